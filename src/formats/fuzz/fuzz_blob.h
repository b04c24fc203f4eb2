// The bytes of one fuzz input as a Blob (a copy: libFuzzer's buffer is only valid during the call).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "base/file_set.h"

namespace infernix::fuzz {

class CopyBlob final : public Blob {
 public:
  CopyBlob(const uint8_t* data, size_t size) : bytes_(size) {
    if (size > 0) std::memcpy(bytes_.data(), data, size);
  }
  std::span<const std::byte> bytes() const override { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

}  // namespace infernix::fuzz
