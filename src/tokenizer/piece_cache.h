// A bounded cache from a pre-tokenized piece (normalized text, before the byte-level mapping) to its
// BPE token ids. Encoding text repeats the same pieces ("the", " of", "\n") endlessly, so most pieces
// skip BPE. Thread-safe: 16 shards, each an open-addressing hash table behind its own mutex, so
// concurrent lookups rarely contend. A shard that fills up is emptied and starts over, so the cache
// follows the text being encoded in a long-running server; memory stays below about 4 MiB.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace infernix {

class PieceCache {
 public:
  static constexpr size_t kMaxPieceBytes = 256;  // longer pieces are not cached
  static constexpr size_t kShards = 16;
  static constexpr size_t kShardEntries = 4096;  // pieces per shard
  static constexpr size_t kShardArenaBytes = 256 * 1024;  // bytes of pieces and ids per shard

  PieceCache();

  // On a hit, appends the ids of `piece` to *ids and returns true.
  bool Lookup(std::string_view piece, std::vector<int32_t>* ids) const;
  void Insert(std::string_view piece, std::span<const int32_t> ids);
  void Clear();

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0;  // of the piece in the arena; its ids follow it
    uint16_t piece_bytes = 0;
    uint16_t id_count = 0;  // 0: the slot is empty (every cached piece has at least one id)
  };
  struct Shard {
    mutable std::mutex mutex;
    std::vector<Slot> slots;  // 2 * kShardEntries, a power of two
    std::string arena;
    size_t entries = 0;
  };
  static uint64_t Hash(std::string_view piece);
  // The index of the slot holding `piece`, or of the empty slot where it would go. The caller holds
  // the shard's mutex.
  static size_t Probe(const Shard& shard, std::string_view piece, uint64_t hash);

  std::array<Shard, kShards> shards_;
};

}  // namespace infernix
