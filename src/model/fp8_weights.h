// FP8 checkpoints as Qwen publishes them: each quantized linear weight `X.weight` is F8_E4M3
// [out, in] with `X.weight_scale_inv` [ceil(out/128), in/128] (f32, bf16 or f16), weight value =
// E4M3 * scale_inv per 128x128 block. Fp8WeightSource wraps the checkpoint's WeightSource and hands
// the binder each such weight repacked into DType::kF8E4M3B128 (each run of 128 elements of a row
// preceded by the f32 scale of its block), so the backends see one self-contained block type.
// Every other tensor (embeddings, norms, the LM head, routers, anything listed in
// modules_to_not_convert) passes through untouched.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/weight_binder.h"

namespace infernix {

// Repacks an F8E4M3 weight [..., rows, cols] and its scale_inv [..., ceil(rows/128), cols/128]
// (f32/bf16/f16) into kF8E4M3B128 [..., rows, cols]. cols must be a multiple of 128: every real Qwen
// FP8 checkpoint's in-dims are; otherwise kUnsupported naming `name`. A scale tensor of the wrong
// shape or dtype: kInvalidFormat naming it. The out-dim may end in a partial block (its rows use the
// last scale row), as transformers' block quantization allows.
HostBuffer RepackFp8Blocks(const Tensor& weight, const Tensor& scale_inv, const std::string& name,
                           const std::string& where);

class Fp8WeightSource final : public WeightSource {
 public:
  // `block_size`: ModelConfig::fp8_block_size, 128 for an FP8 checkpoint, 0 for one without
  // quantization_config (an F8_E4M3 weight is then refused with kUnsupported).
  Fp8WeightSource(std::unique_ptr<WeightSource> inner, int block_size);

  bool Contains(const std::string& name) const override { return inner_->Contains(name); }
  // FP8 weights come back as kF8E4M3B128 host tensors owned by this source; others as the inner
  // source returns them.
  Tensor Get(const std::string& name, const Shape& expected) override;
  // The inner names less the `X.weight_scale_inv` whose `X.weight` exists (they are part of it).
  std::vector<std::string> Names() const override;
  std::string FileOf(const std::string& name) const override { return inner_->FileOf(name); }
  std::string Describe() const override { return inner_->Describe(); }

 private:
  std::unique_ptr<WeightSource> inner_;
  int block_size_;
  std::map<std::string, std::unique_ptr<HostBuffer>> repacked_;
};

}  // namespace infernix
