#include "tensor/dtype.h"

#include <cmath>
#include <cstring>

#include "base/check.h"

namespace infernix {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kF8E4M3: return 1;
    default: break;
  }
  INFX_CHECK_MSG(false, "DTypeSize of block type {}", DTypeName(dtype));
  return 0;
}

int64_t DTypeBlockSize(DType dtype) {
  switch (dtype) {
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ8_0:
    case DType::kIQ4_NL: return 32;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS: return 256;
    case DType::kF8E4M3B128: return 128;
    default: return 1;
  }
}

size_t DTypeBlockBytes(DType dtype) {
  switch (dtype) {
    case DType::kQ4_0: return 18;    // f16 scale + 16 bytes of nibbles
    case DType::kQ4_1: return 20;    // f16 scale, f16 min + 16
    case DType::kQ5_0: return 22;    // f16 scale + 4 bytes of high bits + 16
    case DType::kQ5_1: return 24;    // f16 scale, f16 min + 4 + 16
    case DType::kQ8_0: return 34;    // f16 scale + 32 int8
    case DType::kIQ4_NL: return 18;  // f16 scale + 16 bytes of table indices
    case DType::kQ2_K: return 84;    // 16 scales/mins + 64 quants + f16 d, dmin
    case DType::kQ3_K: return 110;   // 32 high-bit mask + 64 quants + 12 scales + f16 d
    case DType::kQ4_K: return 144;   // f16 d, dmin + 12 scales + 128 quants
    case DType::kQ5_K: return 176;   // f16 d, dmin + 12 scales + 32 high bits + 128 quants
    case DType::kQ6_K: return 210;   // 128 low bits + 64 high bits + 16 int8 scales + f16 d
    case DType::kIQ4_XS: return 136; // f16 d + u16 scales_h + 4 scales_l + 128 indices
    case DType::kF8E4M3B128: return 132;  // f32 scale + 128 E4M3 bytes
    default: return DTypeSize(dtype);
  }
}

size_t RowBytes(DType dtype, int64_t n) {
  int64_t block = DTypeBlockSize(dtype);
  INFX_CHECK_MSG(n >= 0 && n % block == 0, "{} elements of {} (blocks of {})", n, DTypeName(dtype), block);
  return static_cast<size_t>(n / block) * DTypeBlockBytes(dtype);
}

float F8E4M3ToF32(uint8_t v) {
  uint32_t sign = (v & 0x80u) << 24;
  uint32_t exponent = (v >> 3) & 0xfu;
  uint32_t mantissa = v & 0x7u;
  if (exponent == 0xf && mantissa == 0x7) return std::bit_cast<float>(sign | 0x7fc00000u);  // NaN
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-9
    float f = std::ldexp(static_cast<float>(mantissa), -9);
    return sign ? -f : f;
  }
  return std::bit_cast<float>(sign | ((exponent + 120) << 23) | (mantissa << 20));
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kF8E4M3: return "f8_e4m3";
    case DType::kQ4_0: return "q4_0";
    case DType::kQ4_1: return "q4_1";
    case DType::kQ5_0: return "q5_0";
    case DType::kQ5_1: return "q5_1";
    case DType::kQ8_0: return "q8_0";
    case DType::kQ2_K: return "q2_k";
    case DType::kQ3_K: return "q3_k";
    case DType::kQ4_K: return "q4_k";
    case DType::kQ5_K: return "q5_k";
    case DType::kQ6_K: return "q6_k";
    case DType::kIQ4_NL: return "iq4_nl";
    case DType::kIQ4_XS: return "iq4_xs";
    case DType::kF8E4M3B128: return "f8_e4m3_b128";
  }
  return "?";
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (int t = 0; t <= static_cast<int>(DType::kF8E4M3B128); ++t)
    if (DTypeName(static_cast<DType>(t)) == name) return static_cast<DType>(t);
  return std::nullopt;
}

std::string BlockQuantizedNames() {
  std::string names;
  for (int t = static_cast<int>(DType::kQ4_0); t <= static_cast<int>(DType::kF8E4M3B128); ++t)
    names += (names.empty() ? "" : ", ") + std::string(DTypeName(static_cast<DType>(t)));
  return names;
}

float F16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: value = mantissa * 2^-24
      float f = std::ldexp(static_cast<float>(mantissa), -24);
      return sign ? -f : f;
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t F32ToF16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // overflow (>= 65520 rounds to inf)
  if (abs < 0x38800000u) {                          // subnormal or zero in half
    float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // * 2^24, exact
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
}

}  // namespace infernix
