#include "tokenizer/piece_cache.h"

#include <algorithm>
#include <cstring>

namespace infernix {
namespace {

constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;

uint64_t Mix(uint64_t h) {
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ull;
  return h ^ (h >> 32);
}

}  // namespace

PieceCache::PieceCache() {
  for (Shard& shard : shards_) {
    shard.slots.resize(2 * kShardEntries);
    shard.arena.reserve(kShardArenaBytes);
  }
}

uint64_t PieceCache::Hash(std::string_view piece) {
  uint64_t h = piece.size() * kMul;
  size_t i = 0;
  for (; i + 8 <= piece.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, piece.data() + i, 8);
    h = (h ^ word) * kMul;
    h ^= h >> 29;
  }
  if (i < piece.size()) {
    uint64_t word = 0;  // a byte loop: a variable-length memcpy would be a library call
    for (size_t k = i; k < piece.size(); ++k) word = (word << 8) | static_cast<unsigned char>(piece[k]);
    h = (h ^ word) * kMul;
  }
  return Mix(h);
}

size_t PieceCache::Probe(const Shard& shard, std::string_view piece, uint64_t hash) {
  const size_t mask = shard.slots.size() - 1;
  for (size_t i = (hash >> 4) & mask;; i = (i + 1) & mask) {
    const Slot& slot = shard.slots[i];
    if (slot.id_count == 0) return i;
    if (slot.hash == hash && slot.piece_bytes == piece.size() &&
        std::memcmp(shard.arena.data() + slot.offset, piece.data(), piece.size()) == 0) {
      return i;
    }
  }
}

bool PieceCache::Lookup(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.size() > kMaxPieceBytes) return false;
  const uint64_t hash = Hash(piece);
  const Shard& shard = shards_[hash % kShards];
  std::lock_guard lock(shard.mutex);
  const Slot& slot = shard.slots[Probe(shard, piece, hash)];
  if (slot.id_count == 0) return false;
  const size_t old_size = ids->size();
  ids->resize(old_size + slot.id_count);
  std::memcpy(ids->data() + old_size, shard.arena.data() + slot.offset + slot.piece_bytes,
              slot.id_count * sizeof(int32_t));
  return true;
}

void PieceCache::Insert(std::string_view piece, std::span<const int32_t> ids) {
  const size_t bytes = piece.size() + ids.size_bytes();
  if (piece.size() > kMaxPieceBytes || ids.empty() || ids.size() > UINT16_MAX || bytes > kShardArenaBytes) return;
  const uint64_t hash = Hash(piece);
  Shard& shard = shards_[hash % kShards];
  std::lock_guard lock(shard.mutex);
  if (shard.entries >= kShardEntries || shard.arena.size() + bytes > kShardArenaBytes) {
    std::fill(shard.slots.begin(), shard.slots.end(), Slot{});
    shard.arena.clear();
    shard.entries = 0;
  }
  Slot& slot = shard.slots[Probe(shard, piece, hash)];
  if (slot.id_count != 0) return;  // another thread cached it meanwhile
  slot = {hash, static_cast<uint32_t>(shard.arena.size()), static_cast<uint16_t>(piece.size()),
          static_cast<uint16_t>(ids.size())};
  shard.arena.append(piece);
  shard.arena.append(reinterpret_cast<const char*>(ids.data()), ids.size_bytes());
  ++shard.entries;
}

void PieceCache::Clear() {
  for (Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    std::fill(shard.slots.begin(), shard.slots.end(), Slot{});
    shard.arena.clear();
    shard.entries = 0;
  }
}

}  // namespace infernix
