// Decoders of the K-quants (super-blocks of 256): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
// Each sub-block's scale (and min) is first turned into a float factor, dl = d * scale and
// ml = dmin * min, then every element is dl * q (- ml): ggml's order, which the oracle's values follow
// bit for bit (no fused multiply-add: the library is built with -ffp-contract=off).
#include "quant/quant_internal.h"

namespace infernix::quant {

void DequantizeQ2_K(const uint8_t* src, float* out, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    auto b = LoadBlock<BlockQ2_K>(src, i);
    float d = F16ToF32(b.d), dmin = F16ToF32(b.dmin);
    for (int h = 0; h < 2; ++h) {  // two halves of 128, each reading 32 bytes of qs four times
      const uint8_t* q = b.qs + 32 * h;
      for (int j = 0; j < 4; ++j) {
        int shift = 2 * j;
        for (int half = 0; half < 2; ++half) {  // sub-blocks of 16: bytes [0, 16) then [16, 32)
          uint8_t sc = b.scales[8 * h + 2 * j + half];
          float dl = d * static_cast<float>(sc & 0xF);
          float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l)
            *out++ = dl * static_cast<float>((q[16 * half + l] >> shift) & 3) - ml;
        }
      }
    }
  }
}

namespace {
// Sub-block scale s (0..15) of a Q3_K super-block, 6 bits (stored + 32): the low 4 bits are nibble
// s / 8 of byte s % 8, the high 2 bits are bits 2 * (s / 4) of byte 8 + s % 4.
int Q3Scale(const uint8_t* scales, int s) {
  int low = (scales[s % 8] >> (4 * (s / 8))) & 0xF;
  int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return low | (high << 4);
}
}  // namespace

void DequantizeQ3_K(const uint8_t* src, float* out, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    auto b = LoadBlock<BlockQ3_K>(src, i);
    float d = F16ToF32(b.d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = b.qs + 32 * h;
      for (int j = 0; j < 4; ++j) {
        int shift = 2 * j;
        uint8_t mask = static_cast<uint8_t>(1u << (4 * h + j));
        for (int half = 0; half < 2; ++half) {
          float dl = d * static_cast<float>(Q3Scale(b.scales, 8 * h + 2 * j + half) - 32);
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            int v = ((q[l] >> shift) & 3) - ((b.hmask[l] & mask) ? 0 : 4);
            *out++ = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

void DequantizeQ4_K(const uint8_t* src, float* out, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    auto b = LoadBlock<BlockQ4_K>(src, i);
    float d = F16ToF32(b.d), dmin = F16ToF32(b.dmin);
    for (int p = 0; p < 4; ++p) {  // pairs of sub-blocks of 32 sharing 32 bytes of qs
      const uint8_t* q = b.qs + 32 * p;
      uint8_t sc, m;
      ScaleMinK4(2 * p, b.scales, &sc, &m);
      float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      ScaleMinK4(2 * p + 1, b.scales, &sc, &m);
      float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) *out++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *out++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void DequantizeQ5_K(const uint8_t* src, float* out, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    auto b = LoadBlock<BlockQ5_K>(src, i);
    float d = F16ToF32(b.d), dmin = F16ToF32(b.dmin);
    for (int p = 0; p < 4; ++p) {
      const uint8_t* q = b.qs + 32 * p;
      uint8_t sc, m;
      ScaleMinK4(2 * p, b.scales, &sc, &m);
      float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      ScaleMinK4(2 * p + 1, b.scales, &sc, &m);
      float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      uint8_t u1 = static_cast<uint8_t>(1u << (2 * p)), u2 = static_cast<uint8_t>(2u << (2 * p));
      for (int l = 0; l < 32; ++l)
        *out++ = d1 * static_cast<float>((q[l] & 0xF) + ((b.qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l)
        *out++ = d2 * static_cast<float>((q[l] >> 4) + ((b.qh[l] & u2) ? 16 : 0)) - m2;
    }
  }
}

// Q6_K layout, per half h of 128 elements (ql + 64h, qh + 32h, scales + 8h), for l < 32:
//   element l      low nibble of ql[l],      qh[l] bits 0-1, scale l/16
//   element l + 32 low nibble of ql[l + 32], qh[l] bits 2-3, scale l/16 + 2
//   element l + 64 high nibble of ql[l],     qh[l] bits 4-5, scale l/16 + 4
//   element l + 96 high nibble of ql[l + 32], qh[l] bits 6-7, scale l/16 + 6
void DequantizeQ6_K(const uint8_t* src, float* out, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    auto b = LoadBlock<BlockQ6_K>(src, i);
    float d = F16ToF32(b.d);
    for (int h = 0; h < 2; ++h, out += 128) {
      const uint8_t* ql = b.ql + 64 * h;
      const uint8_t* qh = b.qh + 32 * h;
      const int8_t* sc = b.scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        int s = l / 16;
        int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        out[l] = d * static_cast<float>(sc[s]) * static_cast<float>(q1);
        out[l + 32] = d * static_cast<float>(sc[s + 2]) * static_cast<float>(q2);
        out[l + 64] = d * static_cast<float>(sc[s + 4]) * static_cast<float>(q3);
        out[l + 96] = d * static_cast<float>(sc[s + 6]) * static_cast<float>(q4);
      }
    }
  }
}

}  // namespace infernix::quant
