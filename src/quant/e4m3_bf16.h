// E4M3 codes to bf16 with integer operations: a code's sign, exponent and mantissa bits moved into a
// bf16's places give the code's value times 2^-120, exactly (bf16's exponent bias is 127, E4M3's 7; the
// E4M3 subnormals and zero land on bf16 subnormals and zero of the same scaled value), so one bf16
// multiply by 2^120 makes the value itself. On the GPU this replaces the conversion instructions (E4M3 to
// f16, f16 to f32, f32 to bf16: a quarter-rate pipe) with shifts and masks and one bf16x2 multiply
// (backend/cuda/quant_mma.cuh, E4m3x4ToBf16). Header-only and usable on the host, so that a CPU test
// checks the bit layout for every code (f8_test.cpp).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define INFX_E4M3_HD __host__ __device__
#else
#define INFX_E4M3_HD
#endif

namespace infernix {

// The power of two that the bits of E4m3PairToScaledBf16 lack: value = bf16(bits) * 2^kE4m3Bf16Shift.
inline constexpr int kE4m3Bf16Shift = 120;

// Codes c0 and c1 (bits 8..15 and 24..31 of x, the rest zero) as two bf16 values times 2^-120 in one
// word (c0 low, c1 high): each half keeps its sign bit and takes the 7 exponent and mantissa bits 4 places
// lower (bf16 exponent bits 10..7 take E4M3's 4, bf16 mantissa bits 6..4 its 3).
INFX_E4M3_HD constexpr uint32_t E4m3PairToScaledBf16(uint32_t x) {
  return (x & 0x80008000u) | ((x >> 4) & 0x07F007F0u);
}

// The 4 codes of v (byte i = code i) as two words of scaled bf16 pairs: lo = (code 0, code 1), hi =
// (code 2, code 3).
INFX_E4M3_HD constexpr void E4m3x4ToScaledBf16(uint32_t v, uint32_t* lo, uint32_t* hi) {
  *lo = E4m3PairToScaledBf16(((v & 0xFFu) << 8) | ((v & 0xFF00u) << 16));
  *hi = E4m3PairToScaledBf16(((v >> 8) & 0xFF00u) | (v & 0xFF000000u));
}

}  // namespace infernix
