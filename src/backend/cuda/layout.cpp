#include "backend/cuda/layout.h"

#include <algorithm>
#include <numeric>

#include "base/check.h"

namespace infernix::cuda {

HostLayout FlattenLayout(const BatchLayout& layout) {
  HostLayout h;
  const int64_t n = layout.n_tokens;
  INFX_CHECK(static_cast<int64_t>(layout.positions.size()) == n);
  h.n_tokens = static_cast<int32_t>(n);
  h.n_seqs = static_cast<int32_t>(layout.seqs.size());
  std::vector<int32_t> token_seq(static_cast<size_t>(n), 0);
  std::vector<int32_t> seq_info;
  struct Tile {
    int32_t seq, row0, keys;
  };
  std::vector<Tile> tiles;
  for (size_t s = 0; s < layout.seqs.size(); ++s) {
    const BatchSeq& q = layout.seqs[s];
    INFX_CHECK(q.token_begin >= 0 && q.token_begin + q.n_tokens <= n);
    for (int64_t i = 0; i < q.n_tokens; ++i) token_seq[static_cast<size_t>(q.token_begin + i)] = static_cast<int32_t>(s);
    seq_info.insert(seq_info.end(), {q.slot, static_cast<int32_t>(q.token_begin), static_cast<int32_t>(q.n_tokens),
                                     static_cast<int32_t>(q.pos_begin)});
    h.max_seq_tokens = std::max(h.max_seq_tokens, static_cast<int32_t>(q.n_tokens));
    for (int64_t r = 0; r < q.n_tokens; r += kQueryTile) {
      int64_t rows = std::min<int64_t>(kQueryTile, q.n_tokens - r);
      tiles.push_back({static_cast<int32_t>(s), static_cast<int32_t>(q.token_begin + r),
                       static_cast<int32_t>(q.pos_begin + r + rows)});
    }
  }
  std::stable_sort(tiles.begin(), tiles.end(), [](const Tile& a, const Tile& b) { return a.keys > b.keys; });
  h.n_tiles = static_cast<int32_t>(tiles.size());
  h.data.reserve(static_cast<size_t>(2 * n) + seq_info.size() + 2 * tiles.size());
  h.data.insert(h.data.end(), layout.positions.begin(), layout.positions.end());
  h.data.insert(h.data.end(), token_seq.begin(), token_seq.end());
  h.data.insert(h.data.end(), seq_info.begin(), seq_info.end());
  for (const Tile& t : tiles) h.data.insert(h.data.end(), {t.seq, t.row0});
  return h;
}

DeviceLayout PlaceLayout(const HostLayout& host, const int32_t* device_data) {
  DeviceLayout d;
  d.token_pos = device_data;
  d.token_seq = device_data + host.n_tokens;
  d.seq_info = device_data + 2 * host.n_tokens;
  d.tiles = d.seq_info + 4 * host.n_seqs;
  d.n_tokens = host.n_tokens;
  d.n_seqs = host.n_seqs;
  d.n_tiles = host.n_tiles;
  d.max_seq_tokens = host.max_seq_tokens;
  return d;
}

bool SameLayout(const BatchLayout& a, const BatchLayout& b) {
  if (a.n_tokens != b.n_tokens || a.seqs.size() != b.seqs.size() || a.positions != b.positions) return false;
  for (size_t i = 0; i < a.seqs.size(); ++i) {
    const BatchSeq &x = a.seqs[i], &y = b.seqs[i];
    if (x.slot != y.slot || x.token_begin != y.token_begin || x.n_tokens != y.n_tokens || x.pos_begin != y.pos_begin)
      return false;
  }
  return true;
}

}  // namespace infernix::cuda
