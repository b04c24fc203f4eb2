// libFuzzer target: the safetensors header parser (SafetensorsFile) on arbitrary bytes, then a view
// of every entry. Any Error is an accepted outcome; anything else that escapes is a bug.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"
#include "formats/safetensors.h"

namespace {

class CopyBlob final : public infernix::Blob {
 public:
  CopyBlob(const uint8_t* data, size_t size) : bytes_(size) {
    if (size > 0) std::memcpy(bytes_.data(), data, size);
  }
  std::span<const std::byte> bytes() const override { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<infernix::SafetensorsFile> file;
  try {
    file = std::make_unique<infernix::SafetensorsFile>(std::make_shared<CopyBlob>(data, size), "fuzz.safetensors");
  } catch (const infernix::Error&) {
    return 0;
  }
  volatile uint8_t sink = 0;
  for (const auto& [name, entry] : file->entries()) {
    try {
      infernix::Tensor t = file->View(entry);
      if (entry.size_bytes > 0) {
        sink = sink + static_cast<const uint8_t*>(t.data)[0];
        sink = sink + static_cast<const uint8_t*>(t.data)[entry.size_bytes - 1];
      }
    } catch (const infernix::Error&) {
    }
  }
  return 0;
}
