#include "model/weight_binder.h"

#include <cstring>

#include "base/error.h"

namespace infernix {
namespace {

bool IsSkippable(const std::string& name) {
  for (const char* p : {"model.visual.", "visual.", "mtp.", "model.mtp.", "model.language_model.mtp."})
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

}  // namespace

WeightBinder::WeightBinder(WeightSource& files, Backend& backend) : files_(files), backend_(backend) {
  for (const char* p : {"model.language_model.", "model.", "language_model.model."}) {
    if (files_.Contains(std::string(p) + "embed_tokens.weight")) {
      prefix_ = p;
      return;
    }
  }
  ThrowError(ErrorCode::kInvalidFormat,
             "{}: no token embedding found (looked for model.embed_tokens.weight and "
             "model.language_model.embed_tokens.weight)",
             files_.Describe());
}

Tensor WeightBinder::Host(const std::string& name, const Shape& expected) {
  if (!files_.Contains(name))
    ThrowError(ErrorCode::kNotFound, "{}: tensor '{}' is missing", files_.Describe(), name);
  Tensor t = files_.Get(name, expected);
  if (!(t.shape == expected))
    ThrowError(ErrorCode::kInvalidFormat, "{}: tensor '{}' has shape {}, expected {} from config.json",
               files_.FileOf(name), name, t.shape.ToString(), expected.ToString());
  // Float and quantized weights pass; the backend refuses, in UploadWeight, a type it cannot compute with.
  if (t.dtype == DType::kI32 || t.dtype == DType::kI64)
    ThrowError(ErrorCode::kUnsupported, "{}: tensor '{}' has dtype {}, expected a float or quantized type",
               files_.FileOf(name), name, DTypeName(t.dtype));
  used_.insert(name);
  return t;
}

Tensor WeightBinder::Get(const std::string& name, const Shape& expected) {
  if (files_.Contains(name)) {
    if (std::optional<Tensor> made = files_.MakeOnBackend(name, expected, backend_)) {
      used_.insert(name);
      return *made;
    }
  }
  Tensor host = Host(name, expected);
  try {
    return backend_.UploadWeight(host);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kUnsupported) throw;
    ThrowError(ErrorCode::kUnsupported, "{}: tensor '{}': {}", files_.FileOf(name), name, e.what());
  }
}

Tensor WeightBinder::Own(HostBuffer buffer) {
  owned_.push_back(std::make_unique<HostBuffer>(std::move(buffer)));
  return backend_.UploadWeight(owned_.back()->view());
}

std::vector<std::string> WeightBinder::Unused() const {
  std::vector<std::string> out;
  for (const auto& name : files_.Names())
    if (!used_.count(name) && !IsSkippable(name)) out.push_back(name);
  return out;
}

std::vector<int64_t> InterleavedRows(int64_t groups, int64_t stride, int64_t offset, int64_t count) {
  std::vector<int64_t> rows;
  rows.reserve(static_cast<size_t>(groups * count));
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t i = 0; i < count; ++i) rows.push_back(g * stride + offset + i);
  return rows;
}

HostBuffer GatherWeightRows(const Tensor& w, const std::vector<int64_t>& rows) {
  int64_t cols = w.cols();
  HostBuffer out(w.dtype, Shape{static_cast<int64_t>(rows.size()), cols});
  size_t row_bytes = RowBytes(w.dtype, cols);
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(static_cast<char*>(out.view().data) + i * row_bytes,
                static_cast<const char*>(w.data) + static_cast<size_t>(rows[i]) * row_bytes, row_bytes);
  return out;
}

}  // namespace infernix
