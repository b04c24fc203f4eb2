// libFuzzer target: GgufFile::FromBlob on arbitrary bytes, then every getter and view on what parsed.
// Any Error is an accepted outcome; a crash, a sanitizer report, a failed check or another exception
// is a bug. Built by scripts/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/file_set.h"
#include "formats/gguf.h"

namespace {

template <typename F>
void Try(F&& f) {
  try {
    f();
  } catch (const infernix::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<infernix::GgufFile> file;
  try {
    file = infernix::GgufFile::FromBlob(infernix::CopyToBlob({reinterpret_cast<const char*>(data), size}), "fuzz.gguf");
  } catch (const infernix::Error&) {
    return 0;
  }
  for (const auto& kv : file->metadata()) {
    const std::string& key = kv.first;
    Try([&] { (void)file->GetString(key); });
    Try([&] { (void)file->GetInt(key); });
    Try([&] { (void)file->GetFloat(key); });
    Try([&] { (void)file->GetBool(key); });
    Try([&] {
      if (const infernix::GgufArray* a = file->GetArray(key)) (void)a->size();
    });
  }
  Try([&] { (void)file->architecture(); });
  volatile uint8_t sink = 0;
  for (const auto& info : file->tensors()) {
    Try([&] {
      infernix::Tensor t = file->View(info);
      // Touch the first and last byte: the view must lie inside the blob (ASan checks it).
      if (info.size_bytes > 0) {
        sink = sink + static_cast<const uint8_t*>(t.data)[0];
        sink = sink + static_cast<const uint8_t*>(t.data)[info.size_bytes - 1];
      }
    });
    if (file->FindTensor(info.name) == nullptr) __builtin_trap();
  }
  return 0;
}
