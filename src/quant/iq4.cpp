// Decoders of the non-linear 4-bit types: IQ4_NL (blocks of 32) and IQ4_XS (super-blocks of 256 with
// 6-bit sub-block scales). Each 4-bit index selects one of the 16 values of kIq4NlValues.
#include "quant/quant_internal.h"

namespace infernix::quant {

namespace {
// 32 elements from 16 bytes of indices, scaled by `dl`: element j from the low nibble of qs[j],
// element j + 16 from its high nibble.
inline void DecodeIq4(const uint8_t* qs, float dl, float* out) {
  for (int j = 0; j < 16; ++j) {
    out[j] = dl * static_cast<float>(kIq4NlValues[qs[j] & 0xF]);
    out[j + 16] = dl * static_cast<float>(kIq4NlValues[qs[j] >> 4]);
  }
}
}  // namespace

void DequantizeIQ4_NL(const uint8_t* src, float* out, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, out += kQK) {
    auto b = LoadBlock<BlockIQ4_NL>(src, i);
    DecodeIq4(b.qs, F16ToF32(b.d), out);
  }
}

void DequantizeIQ4_XS(const uint8_t* src, float* out, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    auto b = LoadBlock<BlockIQ4_XS>(src, i);
    float d = F16ToF32(b.d);
    for (int s = 0; s < kQK_K / 32; ++s, out += 32) {
      int low = (b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF;
      int high = (b.scales_h >> (2 * s)) & 3;
      float dl = d * static_cast<float>((low | (high << 4)) - 32);
      DecodeIq4(b.qs + 16 * s, dl, out);
    }
  }
}

}  // namespace infernix::quant
