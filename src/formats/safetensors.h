// safetensors files (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N,
// N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the
// data. Files are memory-mapped; tensors are views into the mapping.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/file_set.h"
#include "tensor/tensor.h"

namespace infernix {

struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;      // as written in the file: "BF16", "F32", "F8_E4M3", ...
  std::optional<DType> dtype;  // empty when we do not compute with this dtype
  std::vector<int64_t> shape;
  size_t offset = 0;  // from the start of the file
  size_t size_bytes = 0;
};

class SafetensorsFile {
 public:
  // Parses and validates the header: every entry's offsets inside the file, its size equal to
  // numel * dtype size, no two entries overlapping. Errors (kInvalidFormat) name the file, the tensor
  // and the problem.
  SafetensorsFile(std::shared_ptr<const Blob> blob, std::string display_path);

  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry, std::less<>>& entries() const { return entries_; }
  const SafetensorsEntry* Find(std::string_view name) const;
  // A view of the tensor's data. Throws kUnsupported for a dtype we do not compute with.
  Tensor View(const SafetensorsEntry& entry) const;

 private:
  std::shared_ptr<const Blob> blob_;
  std::string path_;
  std::map<std::string, SafetensorsEntry, std::less<>> entries_;
};

// The weights of a model folder: "model.safetensors", or the shards listed by
// "model.safetensors.index.json" ({"weight_map": {tensor: file}}). Missing shards are an error naming
// the index and the shard.
class WeightFiles {
 public:
  explicit WeightFiles(const FileSet& files);

  // Every tensor name, sorted.
  std::vector<std::string> Names() const;
  bool Contains(std::string_view name) const;
  const SafetensorsEntry* Find(std::string_view name) const;
  // Throws kNotFound naming the tensor and the weight files when absent.
  Tensor Get(std::string_view name) const;
  // Which file holds a tensor (for messages).
  std::string FileOf(std::string_view name) const;
  std::string Describe() const { return description_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*, std::less<>> by_name_;
  std::string description_;
};

}  // namespace infernix
