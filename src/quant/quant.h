// Block-quantized weight formats of GGUF files (ggml's block types): their layouts and reference
// decoders. Shared by both backends: the CPU backend decodes weight rows with DequantizeRow, the CUDA
// kernels decode the same structs in registers. docs/quant.md describes every format.
//
// Blocks are read byte-wise (memcpy into the struct), so packed data needs no particular alignment.
// Halves (`uint16_t d`) are IEEE binary16 bits; every multi-byte field is little-endian, as GGUF files
// store it (the decoders assume a little-endian host).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace infernix {

// Decodes `n` consecutive elements of type `type` starting at `src` (a row of packed blocks, or of
// plain elements) into `out[0, n)` as float32. `n` must be a multiple of DTypeBlockSize(type)
// (checked). Handles F32, F16, BF16, F8E4M3 (raw values: FP8 block scales are applied by the caller)
// and every block type (F8E4M3B128 carries its scales). The operations and their order follow ggml's reference dequantizers, so the
// result equals llama.cpp's bit for bit. Pure function: safe to call from any thread.
void DequantizeRow(DType type, const void* src, float* out, int64_t n);

namespace quant {

inline constexpr int kQK = 32;    // elements per block of the legacy types and IQ4_NL
inline constexpr int kQK_K = 256; // elements per super-block of the K-quants and IQ4_XS

// ---- legacy types: blocks of 32, one f16 scale (and min) ----

// x = d * (q - 8), q a 4-bit nibble: element j in the low nibble of qs[j], element j+16 in the high.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// x = d * q + m, q a 4-bit nibble (same order as Q4_0).
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[kQK / 2];
};
// x = d * (q - 16), q 5 bits: the low 4 as in Q4_0, the 5th of element j is bit j of qh (little-endian u32).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x = d * q + m, q 5 bits (same order as Q5_0).
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x = d * q, q a signed byte.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};

// ---- K-quants: super-blocks of 256 with per-sub-block scales ----

// 16 sub-blocks of 16: scales[s] low nibble the scale, high nibble the min;
// x = (d * scale) * q - (dmin * min), q 2 bits. Element 128*h + 32*j + l (l < 32) is bits 2j..2j+1 of
// qs[32*h + l]; its sub-block is 8*h + 2*j + l/16.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d, dmin;
};
// 16 sub-blocks of 16 with 6-bit signed scales (stored + 32) packed in 12 bytes;
// x = (d * (scale - 32)) * (q - (high bit ? 0 : 4)), q the 2 low bits as in Q2_K, the high bit of
// element 128*h + 32*j + l being bit 4*h + j of hmask[l].
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
// 8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes (see ScaleMinK4);
// x = (d * scale) * q - (dmin * min), q 4 bits: element 64*p + l is the low nibble of qs[32*p + l],
// element 64*p + 32 + l its high nibble.
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
// As Q4_K with a 5th bit per element: for element 64*p + 32*h + l, bit 2*p + h of qh[l].
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
// 16 sub-blocks of 16 with signed 8-bit scales; x = (d * scale) * (q - 32), q 6 bits: 4 low bits in ql,
// 2 high bits in qh (layout in k_quants.cpp).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};

// ---- IQ4: 4-bit indices into a fixed non-linear table ----

// The 16 values of the IQ4_NL / IQ4_XS table (int8).
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
// x = d * table[q], q a nibble laid out as in Q4_0.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// 8 sub-blocks of 32 with 6-bit scales (stored + 32): low 4 bits in scales_l (nibble s%2 of byte s/2),
// high 2 bits at bits 2s..2s+1 of scales_h; x = (d * (scale - 32)) * table[q], each sub-block's 16 bytes
// of qs laid out as in Q4_0.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockIQ4_XS) == 136);

// ---- FP8 with inline scales: an FP8 checkpoint's weight and its weight_scale_inv, repacked ----

// x = d * E4M3(qs[j]) (one float multiply, d times the exact E4M3 value: the same float as
// transformers' fp8.to(float32) * scale_inv). Blocks of 128 consecutive elements of a row; d is the
// weight_scale_inv entry of the 128x128 checkpoint block the 128 elements lie in (as f32).
struct BlockF8E4M3B128 {
  float d;
  uint8_t qs[128];
};
static_assert(sizeof(BlockF8E4M3B128) == 132);

// The block struct of each block type, for code generic over types.
template <DType T> struct BlockOf;
template <> struct BlockOf<DType::kQ4_0> { using type = BlockQ4_0; };
template <> struct BlockOf<DType::kQ4_1> { using type = BlockQ4_1; };
template <> struct BlockOf<DType::kQ5_0> { using type = BlockQ5_0; };
template <> struct BlockOf<DType::kQ5_1> { using type = BlockQ5_1; };
template <> struct BlockOf<DType::kQ8_0> { using type = BlockQ8_0; };
template <> struct BlockOf<DType::kQ2_K> { using type = BlockQ2_K; };
template <> struct BlockOf<DType::kQ3_K> { using type = BlockQ3_K; };
template <> struct BlockOf<DType::kQ4_K> { using type = BlockQ4_K; };
template <> struct BlockOf<DType::kQ5_K> { using type = BlockQ5_K; };
template <> struct BlockOf<DType::kQ6_K> { using type = BlockQ6_K; };
template <> struct BlockOf<DType::kIQ4_NL> { using type = BlockIQ4_NL; };
template <> struct BlockOf<DType::kIQ4_XS> { using type = BlockIQ4_XS; };
template <> struct BlockOf<DType::kF8E4M3B128> { using type = BlockF8E4M3B128; };

// Scale and min j (0..7) of a Q4_K / Q5_K super-block, 6 bits each, from its 12 packed bytes: for
// j < 4 the low 6 bits of bytes j (scale) and j+4 (min); for j >= 4 the nibbles of byte j+4 (low:
// scale, high: min) with bits 6-7 of bytes j-4 (scale) and j (min) above them.
inline void ScaleMinK4(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace quant
}  // namespace infernix
