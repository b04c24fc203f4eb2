// Decoders of the legacy block types (blocks of 32): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.
// Products are float(q) * d and sums (float(q) * d) + m, as ggml computes them (no fused multiply-add:
// the library is built with -ffp-contract=off).
#include "quant/quant_internal.h"

namespace infernix::quant {

void DequantizeQ4_0(const uint8_t* src, float* out, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, out += kQK) {
    auto b = LoadBlock<BlockQ4_0>(src, i);
    float d = F16ToF32(b.d);
    for (int j = 0; j < kQK / 2; ++j) {
      out[j] = static_cast<float>((b.qs[j] & 0xF) - 8) * d;
      out[j + kQK / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantizeQ4_1(const uint8_t* src, float* out, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, out += kQK) {
    auto b = LoadBlock<BlockQ4_1>(src, i);
    float d = F16ToF32(b.d), m = F16ToF32(b.m);
    for (int j = 0; j < kQK / 2; ++j) {
      out[j] = static_cast<float>(b.qs[j] & 0xF) * d + m;
      out[j + kQK / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
    }
  }
}

namespace {
// The 32 fifth bits of a Q5 block, bit j for element j.
uint32_t HighBits(const uint8_t qh[4]) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 | static_cast<uint32_t>(qh[2]) << 16 |
         static_cast<uint32_t>(qh[3]) << 24;
}
// The 5-bit values of elements j and j + 16 (0..31).
inline int Q5Low(const uint8_t* qs, uint32_t qh, int j) {
  return static_cast<int>((qs[j] & 0xFu) | (((qh >> j) & 1u) << 4));
}
inline int Q5High(const uint8_t* qs, uint32_t qh, int j) {
  return static_cast<int>((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
}
}  // namespace

void DequantizeQ5_0(const uint8_t* src, float* out, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, out += kQK) {
    auto b = LoadBlock<BlockQ5_0>(src, i);
    float d = F16ToF32(b.d);
    uint32_t qh = HighBits(b.qh);
    for (int j = 0; j < kQK / 2; ++j) {
      out[j] = static_cast<float>(Q5Low(b.qs, qh, j) - 16) * d;
      out[j + kQK / 2] = static_cast<float>(Q5High(b.qs, qh, j) - 16) * d;
    }
  }
}

void DequantizeQ5_1(const uint8_t* src, float* out, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, out += kQK) {
    auto b = LoadBlock<BlockQ5_1>(src, i);
    float d = F16ToF32(b.d), m = F16ToF32(b.m);
    uint32_t qh = HighBits(b.qh);
    for (int j = 0; j < kQK / 2; ++j) {
      out[j] = static_cast<float>(Q5Low(b.qs, qh, j)) * d + m;
      out[j + kQK / 2] = static_cast<float>(Q5High(b.qs, qh, j)) * d + m;
    }
  }
}

void DequantizeQ8_0(const uint8_t* src, float* out, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, out += kQK) {
    auto b = LoadBlock<BlockQ8_0>(src, i);
    float d = F16ToF32(b.d);
    for (int j = 0; j < kQK; ++j) out[j] = static_cast<float>(b.qs[j]) * d;
  }
}

}  // namespace infernix::quant
