// FP8 E4M3 with inline block scales (kF8E4M3B128), and the E4M3 value table shared with DequantizeRow.
#include <cstddef>

#include "quant/quant_internal.h"

namespace infernix::quant {

const std::array<float, 256>& E4M3Table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[static_cast<size_t>(i)] = F8E4M3ToF32(static_cast<uint8_t>(i));
    return t;
  }();
  return table;
}

// x = d * E4M3(q): one rounding, the same float as fp8.to(float32) * scale_inv.
void DequantizeF8E4M3B128(const uint8_t* src, float* out, int64_t n_blocks) {
  const std::array<float, 256>& table = E4M3Table();
  for (int64_t i = 0; i < n_blocks; ++i) {
    const uint8_t* block = src + static_cast<size_t>(i) * sizeof(BlockF8E4M3B128);
    float d;
    std::memcpy(&d, block + offsetof(BlockF8E4M3B128, d), sizeof(float));
    const uint8_t* qs = block + offsetof(BlockF8E4M3B128, qs);
    float* y = out + i * 128;
    for (int j = 0; j < 128; ++j) y[j] = d * table[qs[j]];
  }
}

}  // namespace infernix::quant
