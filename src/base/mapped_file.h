// Read-only memory-mapped files (RAII).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace infernix {

class MappedFile {
 public:
  // Maps the whole file read-only. Throws Error(kNotFound / kIo) naming the path.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace infernix
