// Qwen3 (dense) and Qwen3-MoE: GQA attention with per-head q/k RMSNorm and full RoPE; SwiGLU MLP, or
// a softmax top-k mixture of experts on the layers config.mlp_types marks (decoder_sparse_step,
// mlp_only_layers). Standard RMSNorm (scale by w).
#include "model/architectures.h"

namespace infernix {

void BindQwen3Weights(const ModelConfig& c, WeightBinder& binder, ModelWeights& weights) {
  const std::string& prefix = binder.prefix();
  for (int l = 0; l < c.num_layers; ++l) {
    std::string p = prefix + "layers." + std::to_string(l) + ".";
    DecoderLayerWeights w;
    w.input_norm = binder.Get(p + "input_layernorm.weight", {c.hidden_size});
    w.post_attention_norm = binder.Get(p + "post_attention_layernorm.weight", {c.hidden_size});
    w.attention = BindAttention(c, binder, p + "self_attn.");
    if (c.mlp_types[static_cast<size_t>(l)] == MlpType::kMoe) {
      MoeWeights moe;
      moe.router = binder.Get(p + "mlp.gate.weight", {c.num_experts, c.hidden_size});
      moe.experts = BindExperts(c, binder, p + "mlp.");
      w.moe = std::move(moe);
    } else {
      w.mlp = BindMlp(c, binder, p + "mlp.", c.intermediate_size);
    }
    weights.layers.push_back(std::move(w));
  }
}

}  // namespace infernix
