// The per-type decoders behind DequantizeRow: each decodes `n_blocks` consecutive packed blocks at
// `src` into `out` (n_blocks * block size floats). Internal to src/quant.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include "quant/quant.h"

namespace infernix::quant {

// Block i of a packed row, copied out (packed data may sit at any byte offset).
template <typename Block>
inline Block LoadBlock(const uint8_t* src, int64_t i) {
  Block b;
  std::memcpy(&b, src + static_cast<size_t>(i) * sizeof(Block), sizeof(Block));
  return b;
}

void DequantizeQ4_0(const uint8_t* src, float* out, int64_t n_blocks);
void DequantizeQ4_1(const uint8_t* src, float* out, int64_t n_blocks);
void DequantizeQ5_0(const uint8_t* src, float* out, int64_t n_blocks);
void DequantizeQ5_1(const uint8_t* src, float* out, int64_t n_blocks);
void DequantizeQ8_0(const uint8_t* src, float* out, int64_t n_blocks);
void DequantizeQ2_K(const uint8_t* src, float* out, int64_t n_blocks);
void DequantizeQ3_K(const uint8_t* src, float* out, int64_t n_blocks);
void DequantizeQ4_K(const uint8_t* src, float* out, int64_t n_blocks);
void DequantizeQ5_K(const uint8_t* src, float* out, int64_t n_blocks);
void DequantizeQ6_K(const uint8_t* src, float* out, int64_t n_blocks);
void DequantizeIQ4_NL(const uint8_t* src, float* out, int64_t n_blocks);
void DequantizeIQ4_XS(const uint8_t* src, float* out, int64_t n_blocks);
void DequantizeF8E4M3B128(const uint8_t* src, float* out, int64_t n_blocks);

// All 256 E4M3 values (F8E4M3ToF32), made once; immutable afterwards, so safe from any thread.
const std::array<float, 256>& E4M3Table();

}  // namespace infernix::quant
