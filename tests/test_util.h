// Helpers shared by the integration tests: fixture paths, reference tensors, safetensors writing.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/file_set.h"
#include "formats/safetensors.h"

namespace infernix::testing {

// The tiny reference models of tests/fixtures/models, one per architecture.
inline const std::vector<std::string> kTinyModels = {"qwen3-tiny", "qwen3-moe-tiny", "qwen3-next-tiny", "qwen3.5-tiny",
                                                     "qwen3.5-moe-tiny"};

// A GoogleTest-safe name for a model-name parameter ("qwen3.5-tiny" -> "qwen3_5_tiny").
inline std::string ParamName(std::string s) {
  for (char& c : s)
    if (c == '-' || c == '.') c = '_';
  return s;
}

inline std::string FixturesDir() { return INFERNIX_FIXTURES_DIR; }
inline std::string ModelDir(const std::string& name) { return FixturesDir() + "/models/" + name; }

// Typed access to a reference.safetensors file.
class Reference {
 public:
  // The reference of fixture model `model` (tests/fixtures/models/<model>).
  explicit Reference(const std::string& model) : Reference(InDir{ModelDir(model)}) {}
  // reference.safetensors in folder `dir`.
  struct InDir {
    std::string dir;
  };
  explicit Reference(const InDir& in)
      : files_(in.dir),
        file_(files_.Open("reference.safetensors"), files_.DisplayPath("reference.safetensors")) {}
  bool Has(const std::string& name) const { return file_.Find(name) != nullptr; }
  std::vector<int32_t> Ids(const std::string& name) const { return Copy<int32_t>(name); }
  std::vector<float> Floats(const std::string& name) const { return Copy<float>(name); }
  std::vector<int64_t> Shape(const std::string& name) const { return file_.Find(name)->shape; }

 private:
  template <typename T>
  std::vector<T> Copy(const std::string& name) const {
    const SafetensorsEntry* e = file_.Find(name);
    if (e == nullptr) throw std::runtime_error("reference has no " + name);
    Tensor t = file_.View(*e);
    std::vector<T> out(static_cast<size_t>(t.numel()));
    std::memcpy(out.data(), t.data, t.size_bytes());
    return out;
  }
  DirFileSet files_;
  SafetensorsFile file_;
};

struct RawTensor {
  std::string dtype;  // "F32", "BF16", "I32", ...
  std::vector<int64_t> shape;
  std::string bytes;
};

// Writes a safetensors file (header entries in name order, data packed in the same order).
inline void WriteSafetensors(const std::string& path, const std::map<std::string, RawTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  std::string data;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
    data += t.bytes;
  }
  std::string h = header.dump();
  uint64_t len = h.size();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << h << data;
}

// Every tensor of a safetensors file, as raw bytes (the inverse of WriteSafetensors).
inline std::map<std::string, RawTensor> ReadSafetensors(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  DirFileSet dir(slash == std::string::npos ? "." : path.substr(0, slash));
  std::shared_ptr<const Blob> blob = dir.Open(slash == std::string::npos ? path : path.substr(slash + 1));
  SafetensorsFile f(blob, path);
  std::map<std::string, RawTensor> out;
  auto bytes = blob->bytes();
  for (const auto& [name, e] : f.entries())
    out[name] = RawTensor{e.dtype_name, e.shape,
                          std::string(reinterpret_cast<const char*>(bytes.data()) + e.offset, e.size_bytes)};
  return out;
}

inline std::string ReadBinary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void WriteBinary(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace infernix::testing
