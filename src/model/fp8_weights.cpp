#include "model/fp8_weights.h"

#include <cstring>

#include "base/error.h"

namespace infernix {
namespace {

constexpr int64_t kBlock = 128;
constexpr const char* kScaleSuffix = "_scale_inv";

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

HostBuffer RepackFp8Blocks(const Tensor& weight, const Tensor& scale_inv, const std::string& name,
                           const std::string& where) {
  const Shape& ws = weight.shape;
  if (weight.dtype != DType::kF8E4M3 || ws.ndim < 2)
    ThrowError(ErrorCode::kInvalidFormat, "{}: tensor '{}': expected an F8_E4M3 matrix, got {} of shape {}", where, name,
               DTypeName(weight.dtype), ws.ToString());
  const int64_t rows = ws[ws.ndim - 2], cols = ws[ws.ndim - 1];
  if (cols == 0 || cols % kBlock != 0)
    ThrowError(ErrorCode::kUnsupported,
               "{}: tensor '{}' has rows of {} elements: FP8 weights need a multiple of {} (the scale block)", where,
               name, cols, kBlock);
  const int64_t row_blocks = (rows + kBlock - 1) / kBlock, col_blocks = cols / kBlock;
  Shape want = ws;
  want.dims[static_cast<size_t>(ws.ndim - 2)] = row_blocks;
  want.dims[static_cast<size_t>(ws.ndim - 1)] = col_blocks;
  if (!(scale_inv.shape == want) ||
      (scale_inv.dtype != DType::kF32 && scale_inv.dtype != DType::kBF16 && scale_inv.dtype != DType::kF16))
    ThrowError(ErrorCode::kInvalidFormat, "{}: tensor '{}{}' is {} of shape {}, expected f32 or bf16 of shape {}", where,
               name, kScaleSuffix, DTypeName(scale_inv.dtype), scale_inv.shape.ToString(), want.ToString());
  HostBuffer out(DType::kF8E4M3B128, ws);
  auto* dst = static_cast<uint8_t*>(out.view().data);
  const auto* src = static_cast<const uint8_t*>(weight.data);
  const int64_t n_rows = weight.numel() / cols;  // over all leading dimensions
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t matrix = r / rows, scale_row = matrix * row_blocks + (r % rows) / kBlock;
    for (int64_t b = 0; b < col_blocks; ++b) {
      float d = LoadAsFloat(scale_inv, scale_row * col_blocks + b);
      uint8_t* block = dst + static_cast<size_t>(r * col_blocks + b) * 132;
      std::memcpy(block, &d, sizeof(float));
      std::memcpy(block + 4, src + static_cast<size_t>(r * cols + b * kBlock), kBlock);
    }
  }
  return out;
}

Fp8WeightSource::Fp8WeightSource(std::unique_ptr<WeightSource> inner, int block_size)
    : inner_(std::move(inner)), block_size_(block_size) {}

Tensor Fp8WeightSource::Get(const std::string& name, const Shape& expected) {
  if (auto it = repacked_.find(name); it != repacked_.end()) return it->second->view();
  Tensor t = inner_->Get(name, expected);
  const std::string scale_name = name + kScaleSuffix;
  if (t.dtype != DType::kF8E4M3) {
    if (block_size_ > 0 && inner_->Contains(scale_name))
      ThrowError(ErrorCode::kInvalidFormat, "{}: tensor '{}' is {} but has a '{}' (FP8 scales for a non-FP8 weight)",
                 inner_->FileOf(name), name, DTypeName(t.dtype), scale_name);
    return t;
  }
  if (block_size_ == 0)
    ThrowError(ErrorCode::kUnsupported,
               "{}: tensor '{}' is F8_E4M3 but config.json has no quantization_config (FP8 checkpoints need "
               "quant_method fp8 with weight_block_size [128, 128])",
               inner_->FileOf(name), name);
  if (!inner_->Contains(scale_name))
    ThrowError(ErrorCode::kNotFound, "{}: FP8 tensor '{}' has no '{}'", inner_->FileOf(name), name, scale_name);
  Tensor scale = inner_->Get(scale_name, Shape{});
  auto buffer = std::make_unique<HostBuffer>(RepackFp8Blocks(t, scale, name, inner_->FileOf(name)));
  Tensor view = buffer->view();
  repacked_.emplace(name, std::move(buffer));
  return view;
}

std::vector<std::string> Fp8WeightSource::Names() const {
  std::vector<std::string> out;
  for (std::string& n : inner_->Names()) {
    const std::string suffix = std::string(".weight") + kScaleSuffix;
    if (EndsWith(n, suffix) && inner_->Contains(n.substr(0, n.size() - std::strlen(kScaleSuffix)))) continue;
    out.push_back(std::move(n));
  }
  return out;
}

}  // namespace infernix
