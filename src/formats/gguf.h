// GGUF files (llama.cpp's format, versions 2 and 3): a header, typed key/value metadata, a tensor
// directory, then the tensor data at an aligned offset. Files are memory-mapped; tensors are views
// into the mapping. Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
//
// GGUF lists a tensor's dimensions innermost first (ne[0] is the row length); Tensor shapes here are
// row-major, outermost first, so a GGUF tensor with ne = [4096, 1024] is a Tensor of shape [1024, 4096].
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/file_set.h"
#include "tensor/tensor.h"

namespace infernix {

// The value types of GGUF metadata.
enum class GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
std::string_view GgufTypeName(GgufType type);

struct GgufValue;
// An array of one element type. Arrays of strings and numbers are kept as the typed vectors below;
// nested arrays as a vector of values.
struct GgufArray {
  GgufType element_type = GgufType::kU8;
  std::variant<std::vector<int64_t>,      // every integer type (u64 values above INT64_MAX refused)
               std::vector<double>,       // f32, f64
               std::vector<bool>,         // bool
               std::vector<std::string>,  // string
               std::vector<GgufValue>>    // array
      values;
  size_t size() const;
};

struct GgufValue {
  GgufType type = GgufType::kU8;
  std::variant<int64_t, uint64_t, double, bool, std::string, std::shared_ptr<GgufArray>> value;
};

struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;      // as written (GGML_TYPE_*)
  std::string type_name;       // "Q4_K", "BF16", ...: ggml's name, also for types we do not compute with
  std::optional<DType> dtype;  // empty when we do not compute with this type
  std::vector<int64_t> ne;     // GGUF order: ne[0] innermost
  Shape shape;                 // row-major (ne reversed)
  uint64_t offset = 0;         // from the start of the file (data section offset + relative offset)
  uint64_t size_bytes = 0;
};

class GgufFile {
 public:
  // Maps `path` and validates everything before returning: magic "GGUF", version 2 or 3, every
  // length and count inside the file, keys unique, known value types, tensor types known to ggml,
  // row lengths a multiple of the type's block, every tensor's data aligned and inside the file, no
  // two tensors overlapping. Errors: kNotFound / kIo (file), kInvalidFormat naming the file, the
  // byte offset or key or tensor, and the problem.
  static std::unique_ptr<GgufFile> Open(const std::string& path);
  // The same over bytes already in memory (tests, fuzzing); `display_path` names them in errors.
  static std::unique_ptr<GgufFile> FromBlob(std::shared_ptr<const Blob> blob, std::string display_path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const;

  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const GgufValue* Find(std::string_view key) const;
  // Typed getters: nullopt when absent; kInvalidFormat naming the key when present with another type
  // (any integer type converts to an integer getter when the value fits; f32/f64 to GetFloat).
  std::optional<std::string> GetString(std::string_view key) const;
  std::optional<int64_t> GetInt(std::string_view key) const;
  std::optional<double> GetFloat(std::string_view key) const;
  std::optional<bool> GetBool(std::string_view key) const;
  const GgufArray* GetArray(std::string_view key) const;
  // Required variants: kInvalidFormat "<file>: missing metadata key <key>" when absent.
  std::string RequireString(std::string_view key) const;
  int64_t RequireInt(std::string_view key) const;
  double RequireFloat(std::string_view key) const;

  // general.architecture ("qwen3", "qwen3moe", "qwen3next", ...); kInvalidFormat when absent.
  std::string architecture() const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;
  // A view of the tensor's data (row-major shape). Throws kUnsupported naming the tensor and its type
  // when we do not compute with that type.
  Tensor View(const GgufTensorInfo& info) const;

 private:
  GgufFile() = default;
  std::shared_ptr<const Blob> blob_;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// ggml's name of a GGML_TYPE_* id ("Q4_K"), "type <id>" when unknown; and the DType we compute it
// with (nullopt for types ggml has that we do not support).
std::string GgmlTypeName(uint32_t ggml_type);
std::optional<DType> GgmlTypeToDType(uint32_t ggml_type);

}  // namespace infernix
