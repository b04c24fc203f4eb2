// libFuzzer target: the safetensors header parser (SafetensorsFile) on arbitrary bytes, then a view
// of every entry. Any Error is an accepted outcome; anything else that escapes is a bug.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"
#include "base/file_set.h"
#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<infernix::SafetensorsFile> file;
  try {
    file = std::make_unique<infernix::SafetensorsFile>(
        infernix::CopyToBlob({reinterpret_cast<const char*>(data), size}), "fuzz.safetensors");
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
