#include "formats/safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace infernix {
namespace {

using nlohmann::json;

std::optional<DType> ParseDType(const std::string& s) {
  if (s == "F32") return DType::kF32;
  if (s == "F16") return DType::kF16;
  if (s == "BF16") return DType::kBF16;
  if (s == "F8_E4M3") return DType::kF8E4M3;  // FP8 checkpoints: repacked with their scales at load
  if (s == "I32") return DType::kI32;
  if (s == "I64") return DType::kI64;
  return std::nullopt;
}

// Element size of every dtype the format defines, so that sizes can be validated for all of them.
std::optional<size_t> DTypeNameSize(const std::string& s) {
  static const std::pair<const char*, size_t> kSizes[] = {
      {"F64", 8}, {"F32", 4},     {"F16", 2},     {"BF16", 2},     {"I64", 8},       {"I32", 4},
      {"I16", 2}, {"I8", 1},      {"U64", 8},     {"U32", 4},      {"U16", 2},       {"U8", 1},
      {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1}};
  for (const auto& [name, size] : kSizes)
    if (s == name) return size;
  return std::nullopt;
}

}  // namespace

SafetensorsFile::SafetensorsFile(std::shared_ptr<const Blob> blob, std::string display_path)
    : blob_(std::move(blob)), path_(std::move(display_path)) {
  auto bytes = blob_->bytes();
  if (bytes.size() < 8)
    ThrowError(ErrorCode::kInvalidFormat, "{}: truncated safetensors file: {} bytes, expected at least 8", path_,
               bytes.size());
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);  // little-endian hosts only (x86-64, aarch64)
  if (header_len > bytes.size() - 8)
    ThrowError(ErrorCode::kInvalidFormat,
               "{}: truncated safetensors file: header length is {} bytes but only {} bytes follow", path_,
               header_len, bytes.size() - 8);
  size_t data_start = 8 + static_cast<size_t>(header_len);
  size_t data_size = bytes.size() - data_start;
  json header;
  try {
    header = json::parse(reinterpret_cast<const char*>(bytes.data()) + 8,
                         reinterpret_cast<const char*>(bytes.data()) + data_start);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
    ThrowError(ErrorCode::kInvalidFormat, "{}: malformed safetensors header: {}", path_, e.what());
  }
  if (!header.is_object()) ThrowError(ErrorCode::kInvalidFormat, "{}: safetensors header is not a JSON object", path_);

  std::vector<std::pair<size_t, size_t>> ranges;
  for (auto& item : header.items()) {
    // Not a structured binding: clang 14 (the fuzzing build) cannot capture those in the lambda below.
    const std::string& name = item.key();
    json& info = item.value();
    if (name == "__metadata__") continue;
    auto bad = [&](const std::string& what) {
      ThrowError(ErrorCode::kInvalidFormat, "{}: tensor '{}': {}", path_, name, what);
    };
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets"))
      bad("entry must be an object with dtype, shape and data_offsets");
    if (!info["dtype"].is_string()) bad("dtype is not a string");
    SafetensorsEntry e;
    e.name = name;
    e.dtype_name = info["dtype"].get<std::string>();
    e.dtype = ParseDType(e.dtype_name);
    auto elem_size = DTypeNameSize(e.dtype_name);
    if (!elem_size) bad(fmt::format("unknown dtype '{}'", e.dtype_name));
    const json& shape = info["shape"];
    if (!shape.is_array() || shape.size() > 8) bad("shape must be an array of at most 8 dims");
    uint64_t numel = 1;
    for (const auto& d : shape) {
      if (!d.is_number_unsigned()) bad("shape has a negative or non-integer dimension");
      uint64_t v = d.get<uint64_t>();
      if (v != 0 && numel > (uint64_t{1} << 48) / v) bad("shape is absurdly large");
      numel *= v;
      e.shape.push_back(static_cast<int64_t>(v));
    }
    const json& off = info["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      bad("data_offsets must be two non-negative integers");
    uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end) bad(fmt::format("data_offsets [{}, {}] are reversed", begin, end));
    if (end > data_size)
      bad(fmt::format("data_offsets [{}, {}] point past the end of the data ({} bytes): the file is truncated or "
                      "the header lies about sizes",
                      begin, end, data_size));
    if (end - begin != numel * *elem_size)
      bad(fmt::format("holds {} bytes but shape {} of {} needs {}", end - begin, shape.dump(), e.dtype_name,
                      numel * *elem_size));
    e.offset = data_start + static_cast<size_t>(begin);
    e.size_bytes = static_cast<size_t>(end - begin);
    if (e.size_bytes > 0) ranges.emplace_back(e.offset, e.offset + e.size_bytes);
    entries_.emplace(name, std::move(e));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      ThrowError(ErrorCode::kInvalidFormat, "{}: tensors overlap in the data section at byte {}", path_,
                 ranges[i].first);
}

const SafetensorsEntry* SafetensorsFile::Find(std::string_view name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

Tensor SafetensorsFile::View(const SafetensorsEntry& entry) const {
  if (!entry.dtype)
    ThrowError(ErrorCode::kUnsupported, "{}: tensor '{}' has dtype {}, which is not supported (bf16, f16, f32, f8_e4m3)",
               path_, entry.name, entry.dtype_name);
  if (entry.shape.size() > kMaxDims)
    ThrowError(ErrorCode::kUnsupported, "{}: tensor '{}' has {} dimensions; at most {} are supported", path_,
               entry.name, entry.shape.size(), kMaxDims);
  Tensor t;
  t.data = const_cast<std::byte*>(blob_->bytes().data() + entry.offset);
  t.dtype = *entry.dtype;
  t.shape = Shape::FromVector(entry.shape);
  return t;
}

WeightFiles::WeightFiles(const FileSet& files) {
  const char* kSingle = "model.safetensors";
  const char* kIndex = "model.safetensors.index.json";
  std::vector<std::string> shard_names;
  std::map<std::string, std::string> index_map;
  if (files.Exists(kIndex)) {
    std::string index_path = files.DisplayPath(kIndex);
    json index;
    try {
      index = json::parse(ReadText(files, kIndex));
    } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
      ThrowError(ErrorCode::kInvalidFormat, "{}: malformed JSON: {}", index_path, e.what());
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      ThrowError(ErrorCode::kInvalidFormat, "{}: expected an object with a \"weight_map\" object", index_path);
    std::set<std::string> unique;
    for (auto& [tensor, shard] : index["weight_map"].items()) {
      if (!shard.is_string())
        ThrowError(ErrorCode::kInvalidFormat, "{}: weight_map[\"{}\"] is not a file name", index_path, tensor);
      index_map[tensor] = shard.get<std::string>();
      unique.insert(shard.get<std::string>());
    }
    for (const auto& s : unique) {
      if (!files.Exists(s))
        ThrowError(ErrorCode::kNotFound, "{}: shard '{}' listed in the index is missing ({})", index_path, s,
                   files.DisplayPath(s));
      shard_names.push_back(s);
    }
    description_ = index_path;
  } else if (files.Exists(kSingle)) {
    shard_names.push_back(kSingle);
    description_ = files.DisplayPath(kSingle);
  } else {
    ThrowError(ErrorCode::kNotFound, "{}: no model.safetensors or model.safetensors.index.json", files.Describe());
  }
  for (const auto& s : shard_names) {
    files_.push_back(std::make_unique<SafetensorsFile>(files.Open(s), files.DisplayPath(s)));
    for (const auto& [name, entry] : files_.back()->entries()) {
      auto [it, inserted] = by_name_.emplace(name, files_.back().get());
      if (!inserted)
        ThrowError(ErrorCode::kInvalidFormat, "tensor '{}' appears in both {} and {}", name, it->second->path(),
                   files_.back()->path());
    }
  }
  for (const auto& [tensor, shard] : index_map) {
    auto it = by_name_.find(tensor);
    if (it == by_name_.end())
      ThrowError(ErrorCode::kInvalidFormat, "{}: lists tensor '{}' in '{}', which does not contain it", description_,
                 tensor, shard);
  }
}

std::vector<std::string> WeightFiles::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, file] : by_name_) names.push_back(name);
  return names;
}

bool WeightFiles::Contains(std::string_view name) const { return by_name_.find(name) != by_name_.end(); }

const SafetensorsEntry* WeightFiles::Find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second->Find(name);
}

Tensor WeightFiles::Get(std::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) ThrowError(ErrorCode::kNotFound, "{}: tensor '{}' not found", description_, name);
  return it->second->View(*it->second->Find(name));
}

std::string WeightFiles::FileOf(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? description_ : it->second->path();
}

}  // namespace infernix
