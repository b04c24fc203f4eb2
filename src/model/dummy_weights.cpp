#include "model/dummy_weights.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "base/thread_pool.h"
#include "quant/random_blocks.h"
#include "tensor/dtype.h"
#include "tensor/dummy_values.h"

namespace infernix {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

uint64_t HashName(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The MoE router and the shared expert's gate.
bool IsRouter(const std::string& name) {
  return EndsWith(name, "mlp.gate.weight") || EndsWith(name, "shared_expert_gate.weight");
}

}  // namespace

DType DummyRouterDType(DType linear_dtype) {
  return IsBlockQuantized(linear_dtype) && linear_dtype != DType::kF8E4M3B128 ? DType::kF32 : DType::kBF16;
}

DummyWeightSource::DummyWeightSource(const ModelConfig& config, uint64_t seed, DType linear_dtype)
    : config_(config),
      seed_(seed),
      linear_dtype_(linear_dtype),
      pool_(std::make_unique<ThreadPool>(std::min<size_t>(16, std::max(1u, std::thread::hardware_concurrency())))) {}

DummyWeightSource::~DummyWeightSource() = default;

bool DummyWeightSource::Contains(const std::string& name) const {
  if (StartsWith(name, "model.language_model.") || StartsWith(name, "language_model.")) return false;
  if (name == "lm_head.weight") return !config_.tie_word_embeddings;
  if (EndsWith(name, "experts.gate_up_proj") || EndsWith(name, "experts.down_proj")) return false;
  if (EndsWith(name, "in_proj_qkvz.weight") || EndsWith(name, "in_proj_ba.weight")) return false;
  return true;
}

float DummyWeightSource::Scale(const std::string& name, const Shape& shape, bool* unit_offset) const {
  *unit_offset = false;
  if (EndsWith(name, "norm.weight")) {
    // Zero-centred norms scale by 1 + w; plain ones (and DeltaNet's gated norm) by w.
    *unit_offset = !(config_.zero_centered_norm && name.find("linear_attn.") == std::string::npos);
    return 0.1f;
  }
  if (EndsWith(name, "A_log") || EndsWith(name, "dt_bias") || EndsWith(name, "conv1d.weight")) return 0.5f;
  if (EndsWith(name, "embed_tokens.weight")) return 1.0f;
  if (shape.ndim == 2) return std::sqrt(3.0f / static_cast<float>(shape[1]));  // unit-variance outputs
  return 0.1f;
}

uint64_t DummyWeightSource::Seed(const std::string& name) const { return SplitMix64(seed_ ^ HashName(name)); }

bool DummyWeightSource::FloatRouter(const std::string& name) const {
  return DummyRouterDType(linear_dtype_) == DType::kF32 && IsRouter(name);
}

bool DummyWeightSource::Quantized(const std::string& name, const Shape& shape) const {
  return IsBlockQuantized(linear_dtype_) && shape.ndim == 2 && !EndsWith(name, "embed_tokens.weight") &&
         !IsRouter(name) &&
         shape[1] % DTypeBlockSize(linear_dtype_) == 0;
}

std::optional<Tensor> DummyWeightSource::MakeOnBackend(const std::string& name, const Shape& expected,
                                                       Backend& backend) {
  bool unit_offset = false;
  const float scale = Scale(name, expected, &unit_offset);
  if (unit_offset || expected.numel() < (int64_t{1} << 19) || FloatRouter(name)) return std::nullopt;
  return backend.MakeDummyWeight(Quantized(name, expected) ? linear_dtype_ : DType::kBF16, expected, Seed(name), scale);
}

Tensor DummyWeightSource::Get(const std::string& name, const Shape& expected) {
  auto it = made_.find(name);
  if (it != made_.end()) return it->second->view();
  bool unit_offset = false;
  const float scale = Scale(name, expected, &unit_offset);
  if (Quantized(name, expected)) {
    auto packed = std::make_unique<HostBuffer>(
        RandomQuantBlocks(linear_dtype_, expected[0], expected[1], Seed(name), scale, pool_.get()));
    Tensor view = packed->view();
    made_.emplace(name, std::move(packed));
    return view;
  }
  const bool f32 = FloatRouter(name);
  auto buffer = std::make_unique<HostBuffer>(f32 ? DType::kF32 : DType::kBF16, expected);
  const float offset = unit_offset ? 1.0f : 0.0f;
  const uint64_t base = Seed(name);
  const size_t n = static_cast<size_t>(expected.numel());
  float* out_f32 = f32 ? buffer->view().as<float>() : nullptr;
  uint16_t* out_bf16 = f32 ? nullptr : buffer->view().as<uint16_t>();
  auto fill = [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      // Without an offset, the bits of Backend::MakeDummyWeight (tensor/dummy_values.h).
      const float v = scale * DummyUniform(base, i);
      const float w = offset == 0.0f ? v : offset + v;
      if (f32) {
        out_f32[i] = w;
      } else {
        out_bf16[i] = F32ToBf16(w);
      }
    }
  };
  if (n < (size_t{1} << 17)) {
    fill(0, n);
  } else {
    pool_->ParallelFor(n, size_t{1} << 16, fill);
  }
  Tensor view = buffer->view();
  made_.emplace(name, std::move(buffer));
  return view;
}

std::vector<std::string> DummyWeightSource::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, buffer] : made_) names.push_back(name);
  return names;
}

}  // namespace infernix
