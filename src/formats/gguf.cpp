#include "formats/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "base/error.h"
#include "base/mapped_file.h"

namespace infernix {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxArrayDepth = 8;        // nested arrays deeper than this are refused (stack safety)
constexpr uint32_t kMaxTensorDims = 4;   // GGML_MAX_DIMS

// ggml's block size and bytes per block for every type id it has had (0 bytes: no such type).
struct GgmlTypeTraits {
  const char* name;
  int64_t block_size;
  uint64_t block_bytes;
};

GgmlTypeTraits TypeTraits(uint32_t id) {
  switch (id) {
    case 0: return {"F32", 1, 4};
    case 1: return {"F16", 1, 2};
    case 2: return {"Q4_0", 32, 18};
    case 3: return {"Q4_1", 32, 20};
    case 6: return {"Q5_0", 32, 22};
    case 7: return {"Q5_1", 32, 24};
    case 8: return {"Q8_0", 32, 34};
    case 9: return {"Q8_1", 32, 36};
    case 10: return {"Q2_K", 256, 84};
    case 11: return {"Q3_K", 256, 110};
    case 12: return {"Q4_K", 256, 144};
    case 13: return {"Q5_K", 256, 176};
    case 14: return {"Q6_K", 256, 210};
    case 15: return {"Q8_K", 256, 292};
    case 16: return {"IQ2_XXS", 256, 66};
    case 17: return {"IQ2_XS", 256, 74};
    case 18: return {"IQ3_XXS", 256, 98};
    case 19: return {"IQ1_S", 256, 50};
    case 20: return {"IQ4_NL", 32, 18};
    case 21: return {"IQ3_S", 256, 110};
    case 22: return {"IQ2_S", 256, 82};
    case 23: return {"IQ4_XS", 256, 136};
    case 24: return {"I8", 1, 1};
    case 25: return {"I16", 1, 2};
    case 26: return {"I32", 1, 4};
    case 27: return {"I64", 1, 8};
    case 28: return {"F64", 1, 8};
    case 29: return {"IQ1_M", 256, 56};
    case 30: return {"BF16", 1, 2};
    case 34: return {"TQ1_0", 256, 54};
    case 35: return {"TQ2_0", 256, 66};
    case 39: return {"MXFP4", 32, 17};
    default: return {nullptr, 0, 0};
  }
}

// Bounds-checked little-endian reads over the file's bytes; every error names the file and the byte
// offset where the bad field starts.
class Reader {
 public:
  Reader(std::span<const std::byte> bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  template <typename... Args>
  [[noreturn]] void Fail(uint64_t at, fmt::format_string<Args...> format, Args&&... args) const {
    ThrowError(ErrorCode::kInvalidFormat, "{}: at byte {}: {}", path_, at,
               fmt::format(format, std::forward<Args>(args)...));
  }

  void Need(uint64_t n, std::string_view what) const {
    if (n > remaining())
      Fail(pos_, "truncated file: {} needs {} bytes but only {} remain (file size {})", what, n, remaining(),
           bytes_.size());
  }

  template <typename T>
  T Read(std::string_view what) {
    Need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
    pos_ += sizeof(T);
    return v;
  }

  std::string ReadString(std::string_view what) {
    uint64_t at = pos_;
    uint64_t len = Read<uint64_t>(what);
    if (len > remaining())
      Fail(at, "{}: string length {} exceeds the {} bytes left in the file", what, len, remaining());
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(len));
    pos_ += len;
    return s;
  }

 private:
  std::span<const std::byte> bytes_;
  const std::string& path_;
  uint64_t pos_ = 0;
};

// The smallest encoding of one value of `type` (a string or array is at least its 8-byte length),
// 0 for an unknown type.
uint64_t MinValueBytes(uint32_t type) {
  switch (static_cast<GgufType>(type)) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    case GgufType::kU64: case GgufType::kI64: case GgufType::kF64: return 8;
    case GgufType::kString: return 8;
    case GgufType::kArray: return 12;
  }
  return 0;
}

bool ReadBool(Reader& r, std::string_view what) {
  uint64_t at = r.pos();
  uint8_t b = r.Read<uint8_t>(what);
  if (b > 1) r.Fail(at, "{}: bool value {} is neither 0 nor 1", what, b);
  return b != 0;
}

int64_t ReadIntegerAsInt64(Reader& r, GgufType type, std::string_view what) {
  switch (type) {
    case GgufType::kU8: return r.Read<uint8_t>(what);
    case GgufType::kI8: return r.Read<int8_t>(what);
    case GgufType::kU16: return r.Read<uint16_t>(what);
    case GgufType::kI16: return r.Read<int16_t>(what);
    case GgufType::kU32: return r.Read<uint32_t>(what);
    case GgufType::kI32: return r.Read<int32_t>(what);
    case GgufType::kI64: return r.Read<int64_t>(what);
    case GgufType::kU64: {
      uint64_t at = r.pos();
      uint64_t v = r.Read<uint64_t>(what);
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        r.Fail(at, "{}: u64 array element {} does not fit in int64", what, v);
      return static_cast<int64_t>(v);
    }
    default: break;
  }
  return 0;  // unreachable: callers pass integer types only
}

bool IsInteger(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kU16: case GgufType::kI16:
    case GgufType::kU32: case GgufType::kI32: case GgufType::kU64: case GgufType::kI64: return true;
    default: return false;
  }
}

GgufValue ReadValue(Reader& r, uint32_t raw_type, const std::string& key, int depth);

std::shared_ptr<GgufArray> ReadArray(Reader& r, const std::string& key, int depth) {
  if (depth >= kMaxArrayDepth)
    r.Fail(r.pos(), "key '{}': arrays nested deeper than {} levels", key, kMaxArrayDepth);
  uint64_t type_at = r.pos();
  uint32_t raw_type = r.Read<uint32_t>("array element type");
  uint64_t min_bytes = MinValueBytes(raw_type);
  if (min_bytes == 0) r.Fail(type_at, "key '{}': unknown array element type {}", key, raw_type);
  uint64_t count_at = r.pos();
  uint64_t count = r.Read<uint64_t>("array length");
  if (count > r.remaining() / min_bytes)
    r.Fail(count_at, "key '{}': array of {} {} elements cannot fit in the {} bytes left in the file", key, count,
           GgufTypeName(static_cast<GgufType>(raw_type)), r.remaining());
  auto array = std::make_shared<GgufArray>();
  GgufType type = static_cast<GgufType>(raw_type);
  array->element_type = type;
  size_t n = static_cast<size_t>(count);
  if (IsInteger(type)) {
    std::vector<int64_t> v(n);
    for (auto& x : v) x = ReadIntegerAsInt64(r, type, "array element");
    array->values = std::move(v);
  } else if (type == GgufType::kF32 || type == GgufType::kF64) {
    std::vector<double> v(n);
    for (auto& x : v) x = type == GgufType::kF32 ? r.Read<float>("array element") : r.Read<double>("array element");
    array->values = std::move(v);
  } else if (type == GgufType::kBool) {
    std::vector<bool> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = ReadBool(r, "array element");
    array->values = std::move(v);
  } else if (type == GgufType::kString) {
    std::vector<std::string> v(n);
    for (auto& x : v) x = r.ReadString("array element string");
    array->values = std::move(v);
  } else {
    std::vector<GgufValue> v;
    v.reserve(n);
    for (size_t i = 0; i < n; ++i) v.push_back(ReadValue(r, raw_type, key, depth + 1));
    array->values = std::move(v);
  }
  return array;
}

GgufValue ReadValue(Reader& r, uint32_t raw_type, const std::string& key, int depth) {
  GgufValue value;
  value.type = static_cast<GgufType>(raw_type);
  switch (value.type) {
    case GgufType::kU64: value.value = r.Read<uint64_t>("value"); break;
    case GgufType::kF32: value.value = static_cast<double>(r.Read<float>("value")); break;
    case GgufType::kF64: value.value = r.Read<double>("value"); break;
    case GgufType::kBool: value.value = ReadBool(r, "value"); break;
    case GgufType::kString: value.value = r.ReadString("string value"); break;
    case GgufType::kArray: value.value = ReadArray(r, key, depth); break;
    default: value.value = ReadIntegerAsInt64(r, value.type, "value"); break;
  }
  return value;
}

class OwnedBlob final : public Blob {
 public:
  explicit OwnedBlob(const std::string& path) : file_(path) {}
  std::span<const std::byte> bytes() const override { return file_.bytes(); }

 private:
  MappedFile file_;
};

}  // namespace

std::string_view GgufTypeName(GgufType type) {
  switch (type) {
    case GgufType::kU8: return "u8";
    case GgufType::kI8: return "i8";
    case GgufType::kU16: return "u16";
    case GgufType::kI16: return "i16";
    case GgufType::kU32: return "u32";
    case GgufType::kI32: return "i32";
    case GgufType::kF32: return "f32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kU64: return "u64";
    case GgufType::kI64: return "i64";
    case GgufType::kF64: return "f64";
  }
  return "unknown";
}

size_t GgufArray::size() const {
  return std::visit([](const auto& v) { return v.size(); }, values);
}

std::string GgmlTypeName(uint32_t ggml_type) {
  GgmlTypeTraits t = TypeTraits(ggml_type);
  return t.name != nullptr ? std::string(t.name) : fmt::format("type {}", ggml_type);
}

std::optional<DType> GgmlTypeToDType(uint32_t ggml_type) {
  switch (ggml_type) {
    case 0: return DType::kF32;
    case 1: return DType::kF16;
    case 2: return DType::kQ4_0;
    case 3: return DType::kQ4_1;
    case 6: return DType::kQ5_0;
    case 7: return DType::kQ5_1;
    case 8: return DType::kQ8_0;
    case 10: return DType::kQ2_K;
    case 11: return DType::kQ3_K;
    case 12: return DType::kQ4_K;
    case 13: return DType::kQ5_K;
    case 14: return DType::kQ6_K;
    case 20: return DType::kIQ4_NL;
    case 23: return DType::kIQ4_XS;
    case 26: return DType::kI32;
    case 27: return DType::kI64;
    case 30: return DType::kBF16;
    default: return std::nullopt;
  }
}

std::unique_ptr<GgufFile> GgufFile::Open(const std::string& path) {
  return FromBlob(std::make_shared<OwnedBlob>(path), path);
}

std::unique_ptr<GgufFile> GgufFile::FromBlob(std::shared_ptr<const Blob> blob, std::string display_path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->blob_ = std::move(blob);
  f->path_ = std::move(display_path);
  const std::string& path = f->path_;
  auto bytes = f->blob_->bytes();
  Reader r(bytes, path);

  if (bytes.size() < 4)
    ThrowError(ErrorCode::kInvalidFormat, "{}: not a GGUF file: {} bytes, too short for the magic", path,
               bytes.size());
  uint32_t magic = r.Read<uint32_t>("magic");
  if (magic != kMagic) {
    std::string shown;
    for (int i = 0; i < 4; ++i) {
      char c = static_cast<char>(bytes[static_cast<size_t>(i)]);
      shown += c >= 0x20 && c < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", static_cast<uint8_t>(c));
    }
    ThrowError(ErrorCode::kInvalidFormat, "{}: not a GGUF file: magic is \"{}\", expected \"GGUF\"", path, shown);
  }
  uint32_t version = r.Read<uint32_t>("version");
  if (version == 1)
    ThrowError(ErrorCode::kUnsupported, "{}: GGUF version 1 is not supported (2 and 3 are); convert the model again "
               "with a current llama.cpp", path);
  if (version != 2 && version != 3) {
    if (__builtin_bswap32(version) == 2 || __builtin_bswap32(version) == 3)
      ThrowError(ErrorCode::kUnsupported, "{}: big-endian GGUF files are not supported", path);
    ThrowError(ErrorCode::kInvalidFormat, "{}: at byte 4: GGUF version {} is unknown (2 and 3 are supported)", path,
               version);
  }
  f->version_ = version;
  uint64_t counts_at = r.pos();
  uint64_t n_tensors = r.Read<uint64_t>("tensor count");
  uint64_t n_kv = r.Read<uint64_t>("metadata key/value count");
  // A key/value takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info at least 8 + 4 + 4 + 8.
  if (n_kv > r.remaining() / 13)
    r.Fail(counts_at + 8, "metadata count {} cannot fit in the {} bytes left in the file", n_kv, r.remaining());
  if (n_tensors > r.remaining() / 24)
    r.Fail(counts_at, "tensor count {} cannot fit in the {} bytes left in the file", n_tensors, r.remaining());

  for (uint64_t i = 0; i < n_kv; ++i) {
    uint64_t key_at = r.pos();
    std::string key = r.ReadString(fmt::format("metadata key #{}", i));
    if (key.empty()) r.Fail(key_at, "metadata key #{} is empty", i);
    uint64_t type_at = r.pos();
    uint32_t raw_type = r.Read<uint32_t>("value type");
    if (MinValueBytes(raw_type) == 0) r.Fail(type_at, "key '{}': unknown value type {}", key, raw_type);
    GgufValue value = ReadValue(r, raw_type, key, 0);
    if (f->metadata_.count(key) != 0) r.Fail(key_at, "duplicate metadata key '{}'", key);
    f->metadata_.emplace(std::move(key), std::move(value));
  }

  if (const GgufValue* a = f->Find("general.alignment")) {
    if (!IsInteger(a->type))
      ThrowError(ErrorCode::kInvalidFormat, "{}: key 'general.alignment' has type {}, expected an integer", path,
                 GgufTypeName(a->type));
    int64_t v = a->type == GgufType::kU64 ? static_cast<int64_t>(std::min<uint64_t>(std::get<uint64_t>(a->value),
                                                                                     uint64_t{1} << 62))
                                          : std::get<int64_t>(a->value);
    if (v <= 0 || !std::has_single_bit(static_cast<uint64_t>(v)) || v > (int64_t{1} << 30))
      ThrowError(ErrorCode::kInvalidFormat, "{}: key 'general.alignment' is {}, expected a power of two up to 2^30",
                 path, v);
    f->alignment_ = static_cast<uint64_t>(v);
  }

  struct Pending {
    uint64_t info_at;
    uint64_t relative_offset;
  };
  std::vector<Pending> pending;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    uint64_t info_at = r.pos();
    GgufTensorInfo t;
    t.name = r.ReadString(fmt::format("tensor #{} name", i));
    auto bad = [&](fmt::string_view what) { r.Fail(info_at, "tensor '{}': {}", t.name, what); };
    uint32_t n_dims = r.Read<uint32_t>("tensor dimension count");
    if (n_dims > kMaxTensorDims) bad(fmt::format("{} dimensions, at most {} are allowed", n_dims, kMaxTensorDims));
    uint64_t numel = 1;
    bool overflow = false;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = r.Read<uint64_t>("tensor dimension");
      if (ne > (uint64_t{1} << 62)) bad(fmt::format("dimension {} is {}, too large", d, ne));
      if (ne != 0 && numel > (uint64_t{1} << 62) / ne) overflow = true;
      numel *= ne;
      t.ne.push_back(static_cast<int64_t>(ne));
    }
    if (overflow) bad("element count overflows");
    t.ggml_type = r.Read<uint32_t>("tensor type");
    GgmlTypeTraits traits = TypeTraits(t.ggml_type);
    if (traits.name == nullptr) bad(fmt::format("unknown ggml type id {}", t.ggml_type));
    t.type_name = traits.name;
    t.dtype = GgmlTypeToDType(t.ggml_type);
    int64_t row = t.ne.empty() ? 1 : t.ne[0];
    if (row % traits.block_size != 0)
      bad(fmt::format("row length {} is not a multiple of the {} block size {}", row, t.type_name,
                      traits.block_size));
    t.size_bytes = numel / static_cast<uint64_t>(traits.block_size) * traits.block_bytes;
    std::vector<int64_t> rev(t.ne.rbegin(), t.ne.rend());
    t.shape = Shape::FromVector(rev);
    uint64_t rel = r.Read<uint64_t>("tensor data offset");
    if (rel % f->alignment_ != 0)
      bad(fmt::format("data offset {} is not a multiple of the alignment {}", rel, f->alignment_));
    if (f->tensor_index_.count(t.name) != 0) bad("duplicate tensor name");
    f->tensor_index_.emplace(t.name, f->tensors_.size());
    f->tensors_.push_back(std::move(t));
    pending.push_back({info_at, rel});
  }

  uint64_t end_of_infos = r.pos();
  f->data_offset_ = (end_of_infos + f->alignment_ - 1) / f->alignment_ * f->alignment_;
  uint64_t file_size = bytes.size();
  std::vector<std::pair<uint64_t, size_t>> ranges;  // (start, tensor index)
  for (size_t i = 0; i < f->tensors_.size(); ++i) {
    GgufTensorInfo& t = f->tensors_[i];
    uint64_t rel = pending[i].relative_offset;
    if (f->data_offset_ > file_size || rel > file_size - f->data_offset_ ||
        t.size_bytes > file_size - f->data_offset_ - rel)
      ThrowError(ErrorCode::kInvalidFormat,
                 "{}: tensor '{}' ({} bytes at data offset {}, byte {} of the file) extends past the end of the "
                 "file ({} bytes): the file is truncated or its tensor directory is wrong",
                 path, t.name, t.size_bytes, rel, f->data_offset_ + rel, file_size);
    t.offset = f->data_offset_ + rel;
    if (t.size_bytes > 0) ranges.emplace_back(t.offset, i);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t k = 1; k < ranges.size(); ++k) {
    const GgufTensorInfo& prev = f->tensors_[ranges[k - 1].second];
    const GgufTensorInfo& cur = f->tensors_[ranges[k].second];
    if (cur.offset < prev.offset + prev.size_bytes)
      ThrowError(ErrorCode::kInvalidFormat,
                 "{}: tensors '{}' (bytes {}..{}) and '{}' (bytes {}..{}) overlap in the data section", path,
                 prev.name, prev.offset, prev.offset + prev.size_bytes, cur.name, cur.offset,
                 cur.offset + cur.size_bytes);
  }
  return f;
}

uint64_t GgufFile::file_size() const { return blob_->bytes().size(); }

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

namespace {

[[noreturn]] void WrongType(const std::string& path, std::string_view key, const GgufValue& v,
                            std::string_view expected) {
  ThrowError(ErrorCode::kInvalidFormat, "{}: metadata key {} has type {}, expected {}", path, key,
             GgufTypeName(v.type), expected);
}

}  // namespace

std::optional<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::kString) WrongType(path_, key, *v, "string");
  return std::get<std::string>(v->value);
}

std::optional<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (!IsInteger(v->type)) WrongType(path_, key, *v, "an integer");
  if (v->type == GgufType::kU64) {
    uint64_t u = std::get<uint64_t>(v->value);
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      ThrowError(ErrorCode::kInvalidFormat, "{}: metadata key {} is {}, which does not fit in int64", path_, key, u);
    return static_cast<int64_t>(u);
  }
  return std::get<int64_t>(v->value);
}

std::optional<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::kF32 && v->type != GgufType::kF64) WrongType(path_, key, *v, "f32 or f64");
  return std::get<double>(v->value);
}

std::optional<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::kBool) WrongType(path_, key, *v, "bool");
  return std::get<bool>(v->value);
}

const GgufArray* GgufFile::GetArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return nullptr;
  if (v->type != GgufType::kArray) WrongType(path_, key, *v, "array");
  return std::get<std::shared_ptr<GgufArray>>(v->value).get();
}

std::string GgufFile::RequireString(std::string_view key) const {
  auto v = GetString(key);
  if (!v) ThrowError(ErrorCode::kInvalidFormat, "{}: missing metadata key {}", path_, key);
  return *v;
}

int64_t GgufFile::RequireInt(std::string_view key) const {
  auto v = GetInt(key);
  if (!v) ThrowError(ErrorCode::kInvalidFormat, "{}: missing metadata key {}", path_, key);
  return *v;
}

double GgufFile::RequireFloat(std::string_view key) const {
  auto v = GetFloat(key);
  if (!v) ThrowError(ErrorCode::kInvalidFormat, "{}: missing metadata key {}", path_, key);
  return *v;
}

std::string GgufFile::architecture() const { return RequireString("general.architecture"); }

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Tensor GgufFile::View(const GgufTensorInfo& info) const {
  if (!info.dtype)
    ThrowError(ErrorCode::kUnsupported, "{}: tensor '{}' has ggml type {}, which is not supported", path_, info.name,
               info.type_name);
  Tensor t;
  t.data = const_cast<std::byte*>(blob_->bytes().data() + info.offset);
  t.dtype = *info.dtype;
  t.shape = info.shape;
  return t;
}

}  // namespace infernix
