// The device layout of f8_e4m3_b128 weights. On the host (and in the CPU backend) a row of k values is
// k / 128 blocks of {f32 scale, 128 E4M3 codes}, 132 bytes each, so nothing past 4 bytes is aligned. On the
// GPU each row holds the same bytes reordered: its k codes first, in order, then its k / 128 f32 scales,
// in block order. Rows keep their size and place (row slices stay valid), a row's codes start wherever
// the row does (16-byte aligned when k is a multiple of 512), and its scales sit 4-byte aligned after
// them. The backend reorders every FP8 weight on the device as it arrives (LaunchF8ToDeviceRows after
// the upload or the dummy fill); every kernel that reads FP8 weights expects this layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/quant.h"

namespace infernix::cuda {

// The host's block (quant/quant.h): its values and bytes, and where its scale and codes lie in it.
using F8Block = quant::BlockF8E4M3B128;
constexpr int64_t kF8BlockValues = sizeof(F8Block::qs), kF8BlockBytes = sizeof(F8Block);

// The bytes of a weight row of k values (k a multiple of 128).
constexpr int64_t F8RowBytes(int64_t k) { return k / kF8BlockValues * kF8BlockBytes; }

// The device layout of rows x k values given in the host's blocks: the reference the tests compare the
// device's reordering with (LaunchF8ToDeviceRows does the same on the GPU).
inline std::vector<uint8_t> F8DeviceRows(const uint8_t* blocks, int64_t rows, int64_t k) {
  const int64_t row_bytes = F8RowBytes(k), n_blocks = k / kF8BlockValues;
  std::vector<uint8_t> out(static_cast<size_t>(rows * row_bytes));
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = blocks + r * row_bytes;
    uint8_t* dst = out.data() + r * row_bytes;
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* block = src + b * kF8BlockBytes;
      std::memcpy(dst + b * kF8BlockValues, block + offsetof(F8Block, qs), kF8BlockValues);
      std::memcpy(dst + k + sizeof(float) * b, block + offsetof(F8Block, d), sizeof(float));
    }
  }
  return out;
}

}  // namespace infernix::cuda
