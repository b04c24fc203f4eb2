// A small GGUF writer for tests and fuzz seeds: metadata of any type, tensors with given ne/type (with
// their bytes, or a filler pattern), and hooks to break the file on purpose (raw offsets, version, padding).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace infernix::testing_gguf {

class Builder {
 public:
  uint32_t version = 3;
  uint64_t alignment = 32;  // used for layout; write general.alignment yourself to change it in the file

  // Raw metadata: `payload` is the already-encoded value (see the Enc* helpers).
  Builder& Kv(const std::string& key, uint32_t type, const std::string& payload) {
    kvs_.push_back(Str(key) + U32(type) + payload);
    return *this;
  }
  Builder& KvString(const std::string& key, const std::string& v) { return Kv(key, 8, Str(v)); }
  Builder& KvU32(const std::string& key, uint32_t v) { return Kv(key, 4, U32(v)); }
  Builder& KvF32(const std::string& key, float v) { return Kv(key, 6, F32(v)); }
  Builder& KvBool(const std::string& key, bool v) { return Kv(key, 7, std::string(1, v ? '\1' : '\0')); }
  Builder& KvStrings(const std::string& key, const std::vector<std::string>& v) {
    std::string p = U32(8) + U64(v.size());
    for (const auto& s : v) p += Str(s);
    return Kv(key, 9, p);
  }
  Builder& KvI32s(const std::string& key, const std::vector<int32_t>& v) {
    std::string p = U32(5) + U64(v.size());
    for (int32_t x : v) p += U32(static_cast<uint32_t>(x));
    return Kv(key, 9, p);
  }

  // A tensor; `offset` < 0 places it after the previous one (aligned). `data` is written at its offset
  // (zero-filled up to `size_bytes` when shorter).
  Builder& Tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t size_bytes,
                  int64_t offset = -1) {
    uint64_t off = offset >= 0 ? static_cast<uint64_t>(offset) : next_offset_;
    tensors_.push_back({name, std::move(ne), type, off, size_bytes, {}});
    uint64_t end = off + size_bytes;
    next_offset_ = (end + alignment - 1) / alignment * alignment;
    data_size_ = std::max(data_size_, end);
    return *this;
  }

  // A tensor holding `bytes` (placed as Tensor() places it, size bytes.size()).
  Builder& TensorData(const std::string& name, std::vector<uint64_t> ne, uint32_t type, std::string bytes) {
    Tensor(name, std::move(ne), type, bytes.size());
    tensors_.back().data = std::move(bytes);
    return *this;
  }

  std::string Build() const {
    std::string out = "GGUF" + U32(version) + U64(tensors_.size()) + U64(kvs_.size());
    for (const auto& kv : kvs_) out += kv;
    for (const auto& t : tensors_) {
      out += Str(t.name) + U32(static_cast<uint32_t>(t.ne.size()));
      for (uint64_t n : t.ne) out += U64(n);
      out += U32(t.type) + U64(t.offset);
    }
    if (tensors_.empty()) return out;
    out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
    size_t data_start = out.size();
    out.resize(data_start + data_size_, '\0');
    for (size_t i = 0; i < data_size_; ++i) out[data_start + i] = static_cast<char>(i * 7 + 1);
    for (const auto& t : tensors_)
      if (!t.data.empty()) std::memcpy(out.data() + data_start + t.offset, t.data.data(), t.data.size());
    return out;
  }

  static std::string U32(uint32_t v) { return Raw(&v, 4); }
  static std::string U64(uint64_t v) { return Raw(&v, 8); }
  static std::string F32(float v) { return Raw(&v, 4); }
  static std::string Str(const std::string& s) { return U64(s.size()) + s; }

 private:
  static std::string Raw(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }
  struct T {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    uint64_t offset, size_bytes;
    std::string data;  // empty: the filler pattern
  };
  std::vector<std::string> kvs_;
  std::vector<T> tensors_;
  uint64_t next_offset_ = 0, data_size_ = 0;
};

}  // namespace infernix::testing_gguf
