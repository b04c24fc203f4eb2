// Element types of tensors, and scalar conversions between them.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace infernix {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kI64 };

size_t DTypeSize(DType dtype);
std::string_view DTypeName(DType dtype);

// bfloat16 -> float is exact (the high 16 bits of the float).
inline float Bf16ToF32(uint16_t v) { return std::bit_cast<float>(static_cast<uint32_t>(v) << 16); }

// float -> bfloat16, round to nearest even (NaN stays NaN).
inline uint16_t F32ToBf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// IEEE half -> float, exact (subnormals, infinities and NaN included).
float F16ToF32(uint16_t h);
// float -> IEEE half, round to nearest even.
uint16_t F32ToF16(float f);

}  // namespace infernix
