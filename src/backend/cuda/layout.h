// A BatchLayout flattened into one int32 array for the device (kernels.h DeviceLayout): per-token
// positions and sequence indices, per-sequence (slot, token_begin, n_tokens, pos_begin), and the query
// tiles of the flash-attention kernel, heaviest (most keys) first.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/ops.h"

namespace infernix::cuda {

struct HostLayout {
  std::vector<int32_t> data;  // token_pos [n], token_seq [n], seq_info [S, 4], tiles [T, 2]
  int32_t n_tokens = 0, n_seqs = 0, n_tiles = 0, max_seq_tokens = 0;
};

HostLayout FlattenLayout(const BatchLayout& layout);
// The DeviceLayout of `host` once its data sits at `device_data` on the device.
DeviceLayout PlaceLayout(const HostLayout& host, const int32_t* device_data);
// Whether two layouts are the same batch (same sequences and positions).
bool SameLayout(const BatchLayout& a, const BatchLayout& b);

}  // namespace infernix::cuda
