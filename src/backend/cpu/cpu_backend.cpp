#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "quant/quant.h"

namespace infernix {

CpuBackend::CpuBackend(size_t n_threads) : pool_(n_threads) {}

Tensor CpuBackend::Scratch(DType dtype, Shape shape) {
  size_t bytes = (static_cast<size_t>(shape.numel()) * DTypeSize(dtype) + 63) / 64 * 64;
  while (block_index_ < blocks_.size() && block_used_ + bytes > blocks_[block_index_].size_bytes()) {
    ++block_index_;
    block_used_ = 0;
  }
  if (block_index_ == blocks_.size()) {
    size_t block_bytes = std::max<size_t>(bytes, size_t{16} << 20);
    blocks_.emplace_back(DType::kF32, Shape{static_cast<int64_t>(block_bytes / 4)});
    block_used_ = 0;
  }
  auto* base = static_cast<char*>(blocks_[block_index_].view().data) + block_used_;
  block_used_ += bytes;
  return Tensor{base, dtype, shape};
}

void CpuBackend::ResetScratch() {
  block_index_ = 0;
  block_used_ = 0;
}

void CpuBackend::CopyToBackend(const void* host, Tensor dst) { std::memcpy(dst.data, host, dst.size_bytes()); }

void CpuBackend::CopyToHost(const Tensor& src, void* host) { std::memcpy(host, src.data, src.size_bytes()); }

std::span<float> CpuBackend::ReadToHost(const Tensor& src) {
  INFX_CHECK(src.dtype == DType::kF32);
  return {src.as<float>(), static_cast<size_t>(src.numel())};
}

std::unique_ptr<SequenceState> CpuBackend::CreateState(const StateSpec& spec) {
  return std::make_unique<CpuState>(spec);
}

CpuState::CpuState(const StateSpec& spec) : SequenceState(spec) {
  size_t slots = static_cast<size_t>(spec.max_slots);
  keys_.resize(static_cast<size_t>(spec.n_attention_layers) * slots);
  values_.resize(keys_.size());
  size_t linear = static_cast<size_t>(spec.n_linear_layers) * slots;
  conv_.assign(linear, std::vector<float>(static_cast<size_t>(ConvStateElems(spec)), 0.0f));
  recurrent_.assign(linear, std::vector<float>(static_cast<size_t>(RecurrentStateElems(spec)), 0.0f));
}

size_t CpuState::Index(int layer, int slot) const {
  INFX_CHECK(slot >= 0 && slot < spec_.max_slots);
  return static_cast<size_t>(layer) * static_cast<size_t>(spec_.max_slots) + static_cast<size_t>(slot);
}

void CpuState::ClearSlot(int slot) {
  for (int l = 0; l < spec_.n_attention_layers; ++l) {
    keys_[Index(l, slot)].clear();
    values_[Index(l, slot)].clear();
  }
  for (int l = 0; l < spec_.n_linear_layers; ++l) {
    std::fill(conv_[Index(l, slot)].begin(), conv_[Index(l, slot)].end(), 0.0f);
    std::fill(recurrent_[Index(l, slot)].begin(), recurrent_[Index(l, slot)].end(), 0.0f);
  }
  ResetLength(slot);
}

float* CpuState::Keys(int layer, int slot, int64_t length) {
  INFX_CHECK(length <= spec_.max_context);
  auto& k = keys_[Index(layer, slot)];
  k.resize(static_cast<size_t>(length) * spec_.n_kv_heads * spec_.head_dim);
  return k.data();
}

float* CpuState::Values(int layer, int slot, int64_t length) {
  INFX_CHECK(length <= spec_.max_context);
  auto& v = values_[Index(layer, slot)];
  v.resize(static_cast<size_t>(length) * spec_.n_kv_heads * spec_.head_dim);
  return v.data();
}

float* CpuState::Conv(int layer, int slot) { return conv_[Index(layer, slot)].data(); }
float* CpuState::Recurrent(int layer, int slot) { return recurrent_[Index(layer, slot)].data(); }

namespace cpu {

const float* WeightRow(const Tensor& w, int64_t j, std::vector<float>& scratch) {
  int64_t k = w.cols();
  if (w.dtype == DType::kF32) return w.as<const float>() + j * k;
  // FP8 weights are not float weights on their own: their block scales live in another tensor.
  INFX_CHECK_MSG(w.dtype == DType::kBF16 || w.dtype == DType::kF16 || IsBlockQuantized(w.dtype),
                 "weight dtype {} in a float op", DTypeName(w.dtype));
  scratch.resize(static_cast<size_t>(k));
  DequantizeRow(w.dtype, static_cast<const char*>(w.data) + static_cast<size_t>(j) * RowBytes(w.dtype, k),
                scratch.data(), k);
  return scratch.data();
}

std::vector<float> WeightValues(const Tensor& w) {
  INFX_CHECK_MSG(w.dtype != DType::kF8E4M3 && w.dtype != DType::kI32 && w.dtype != DType::kI64,
                 "weight dtype {} in a float op", DTypeName(w.dtype));
  std::vector<float> out(static_cast<size_t>(w.numel()));
  DequantizeRow(w.dtype, w.data, out.data(), w.numel());
  return out;
}

float Dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

float InverseRms(const float* x, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
}

}  // namespace cpu
}  // namespace infernix
