// Random weights of the right names, dtypes and shapes, made up from a config alone: for benchmarks
// of models whose checkpoints are not at hand (`--dummy-weights`). Values are deterministic in the
// seed and scaled so that a forward pass stays finite (unit-variance projections, norms near 1).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "formats/hf_config.h"
#include "model/weight_binder.h"

namespace infernix {

class ThreadPool;

// The dtype of the MoE routers (and the shared expert's gate) among dummy weights of `linear_dtype`: f32
// for a GGUF block type, as llama.cpp's files keep them; bf16 otherwise (bf16, FP8 checkpoints).
DType DummyRouterDType(DType linear_dtype);

// Answers the binder with the split (canonical) layouts: per-expert tensors, in_proj_qkv/z/b/a, the
// "model." prefix, and lm_head.weight only when the embeddings are not tied. Every tensor is bf16, except
// that with a block-quantized `linear_dtype` the 2-D projection weights (attention, DeltaNet, dense and
// shared-expert and routed-expert MLPs, the LM head; not the embedding or routers) are random blocks of
// that type (quant/random_blocks.h), and with a GGUF block type the MoE routers and the shared expert's
// gate are f32, as llama.cpp's quantized files keep them (FP8 checkpoints keep them in bf16).
// Tensors are generated on first Get and kept for the source's lifetime. MakeOnBackend makes the large
// ones (512 Ki elements or more, no norm offset; bf16 or random blocks) on a backend that can
// (Backend::MakeDummyWeight: the CUDA backend fills device memory with the same bytes), so that tens of
// GB of weights need no host copy. Not thread-safe.
class DummyWeightSource final : public WeightSource {
 public:
  DummyWeightSource(const ModelConfig& config, uint64_t seed, DType linear_dtype = DType::kBF16);
  ~DummyWeightSource() override;
  bool Contains(const std::string& name) const override;
  Tensor Get(const std::string& name, const Shape& expected) override;
  std::optional<Tensor> MakeOnBackend(const std::string& name, const Shape& expected, Backend& backend) override;
  std::vector<std::string> Names() const override;
  std::string FileOf(const std::string& name) const override { return "<dummy weights>/" + name; }
  std::string Describe() const override { return "<dummy weights>"; }

 private:
  float Scale(const std::string& name, const Shape& shape, bool* unit_offset) const;
  // The stream of `name`'s values (the same wherever they are made).
  uint64_t Seed(const std::string& name) const;
  // Whether `name` is made as random blocks of linear_dtype_ (else bf16).
  bool Quantized(const std::string& name, const Shape& shape) const;
  // Whether `name` is a router made in f32 (a GGUF block type's file keeps them so).
  bool FloatRouter(const std::string& name) const;

  ModelConfig config_;
  uint64_t seed_;
  DType linear_dtype_;
  std::map<std::string, std::unique_ptr<HostBuffer>> made_;
  std::unique_ptr<ThreadPool> pool_;  // fills every tensor of 256 KiB or more (one pool for all of them)
};

}  // namespace infernix
