// Element types of tensors, and scalar conversions between them.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace infernix {

// Plain element types, then FP8 (E4M3, one byte per element; its scales live in a separate tensor), then
// the block-quantized formats of GGUF files, then FP8 with its scales inline (kF8E4M3B128: what an FP8
// checkpoint's weight and weight_scale_inv are repacked into at load). A block type packs
// DTypeBlockSize elements into DTypeBlockBytes bytes; the last dimension of such a tensor is a multiple
// of the block size, so that every row starts on a block. src/quant/ holds the formats' definitions and
// decoders. The values are fixed (the CUDA code depends on them): new types go at the end, and every
// type from kQ4_0 on is a block type.
enum class DType : uint8_t {
  kF32, kF16, kBF16, kI32, kI64,
  kF8E4M3,
  kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0,
  kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K,
  kIQ4_NL, kIQ4_XS,
  kF8E4M3B128,  // blocks of 128 consecutive elements of a row: f32 scale, 128 E4M3 bytes (132 bytes)
};

// Bytes per element: plain types and FP8 only (a check fails for block types: use RowBytes).
size_t DTypeSize(DType dtype);
std::string_view DTypeName(DType dtype);
// The type whose DTypeName is `name`, if any.
std::optional<DType> DTypeFromName(std::string_view name);
// The names of the block-quantized types, comma-separated ("q4_0, q4_1, ..., f8_e4m3_b128"), for errors.
std::string BlockQuantizedNames();
// Elements per block (1 for plain types and FP8) and bytes per block.
int64_t DTypeBlockSize(DType dtype);
size_t DTypeBlockBytes(DType dtype);
inline bool IsBlockQuantized(DType dtype) { return dtype >= DType::kQ4_0; }
// Bytes of `n` consecutive elements; `n` must be a multiple of the block size (checked).
size_t RowBytes(DType dtype, int64_t n);

// bfloat16 -> float is exact (the high 16 bits of the float).
inline float Bf16ToF32(uint16_t v) { return std::bit_cast<float>(static_cast<uint32_t>(v) << 16); }

// float -> bfloat16, round to nearest even (NaN stays NaN).
inline uint16_t F32ToBf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// FP8 E4M3 (OCP "fn" variant: no infinities, 0x7f/0xff are NaN, max 448) -> float, exact.
float F8E4M3ToF32(uint8_t v);

// IEEE half -> float, exact (subnormals, infinities and NaN included).
float F16ToF32(uint16_t h);
// float -> IEEE half, round to nearest even.
uint16_t F32ToF16(float f);

}  // namespace infernix
