// Weight binding, one function per architecture family (each in its own file).
#pragma once

#include "formats/hf_config.h"
#include "model/model.h"
#include "model/weight_binder.h"

namespace infernix {

// Qwen3 and Qwen3-MoE (qwen3.cpp).
void BindQwen3Weights(const ModelConfig& config, WeightBinder& binder, ModelWeights& weights);
// Qwen3-Next, Qwen3.5 and Qwen3.5-MoE hybrids (qwen3_next.cpp).
void BindQwen3NextWeights(const ModelConfig& config, WeightBinder& binder, ModelWeights& weights);

// Shared pieces used by both binders (model.cpp).
AttentionWeights BindAttention(const ModelConfig& c, WeightBinder& binder, const std::string& p);
MlpWeights BindMlp(const ModelConfig& c, WeightBinder& binder, const std::string& p, int64_t intermediate);
// Routed experts under p + "experts.", one tensor per expert, or fused gate_up_proj / down_proj.
ExpertWeights BindExperts(const ModelConfig& c, WeightBinder& binder, const std::string& p);

}  // namespace infernix
