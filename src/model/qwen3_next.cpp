// Qwen3-Next, Qwen3.5 and Qwen3.5-MoE: hybrids of Gated DeltaNet (linear attention) and gated full
// attention (output gate folded into q_proj, partial RoPE), zero-centred RMSNorm (scale by 1 + w),
// and a dense SwiGLU MLP or a mixture of experts with a sigmoid-gated shared expert.
//
// Qwen3-Next stores the DeltaNet input projections fused and interleaved by key head:
//   in_proj_qkvz rows: for each key head g: q_g [dk], k_g [dk], v_g [r * dv], z_g [r * dv]   (r = nv / nk)
//   in_proj_ba rows:   for each key head g: b_g [r], a_g [r]
// Qwen3.5 stores them split (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a) in the canonical order
// q (all heads), k, v. The Qwen3-Next rows are gathered into the canonical layout at load time, so a
// single forward path serves both.
#include "model/architectures.h"

namespace infernix {
namespace {

void Append(std::vector<int64_t>& to, const std::vector<int64_t>& from) { to.insert(to.end(), from.begin(), from.end()); }

GatedDeltaNetWeights BindGatedDeltaNet(const ModelConfig& c, WeightBinder& binder, const std::string& p) {
  GatedDeltaNetWeights w;
  int64_t h = c.hidden_size, nk = c.linear_num_key_heads, nv = c.linear_num_value_heads;
  int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim, r = nv / nk;
  int64_t key_dim = nk * dk, value_dim = nv * dv, conv_dim = 2 * key_dim + value_dim;
  if (binder.Has(p + "in_proj_qkvz.weight")) {
    int64_t group = 2 * dk + 2 * r * dv;
    Tensor qkvz = binder.Host(p + "in_proj_qkvz.weight", {nk * group, h});
    Tensor ba = binder.Host(p + "in_proj_ba.weight", {nk * 2 * r, h});
    std::vector<int64_t> qkv_rows = InterleavedRows(nk, group, 0, dk);  // q, then k, then v of every head
    Append(qkv_rows, InterleavedRows(nk, group, dk, dk));
    Append(qkv_rows, InterleavedRows(nk, group, 2 * dk, r * dv));
    w.in_proj_qkv = binder.Own(GatherWeightRows(qkvz, qkv_rows));
    w.in_proj_z = binder.Own(GatherWeightRows(qkvz, InterleavedRows(nk, group, 2 * dk + r * dv, r * dv)));
    w.in_proj_b = binder.Own(GatherWeightRows(ba, InterleavedRows(nk, 2 * r, 0, r)));
    w.in_proj_a = binder.Own(GatherWeightRows(ba, InterleavedRows(nk, 2 * r, r, r)));
  } else {
    w.in_proj_qkv = binder.Get(p + "in_proj_qkv.weight", {conv_dim, h});
    w.in_proj_z = binder.Get(p + "in_proj_z.weight", {value_dim, h});
    w.in_proj_b = binder.Get(p + "in_proj_b.weight", {nv, h});
    w.in_proj_a = binder.Get(p + "in_proj_a.weight", {nv, h});
  }
  w.conv1d = binder.Get(p + "conv1d.weight", {conv_dim, 1, c.linear_conv_kernel_dim});
  w.a_log = binder.Get(p + "A_log", {nv});
  w.dt_bias = binder.Get(p + "dt_bias", {nv});
  w.norm = binder.Get(p + "norm.weight", {dv});
  w.out_proj = binder.Get(p + "out_proj.weight", {h, value_dim});
  return w;
}

}  // namespace

void BindQwen3NextWeights(const ModelConfig& c, WeightBinder& binder, ModelWeights& weights) {
  const std::string& prefix = binder.prefix();
  for (int l = 0; l < c.num_layers; ++l) {
    std::string p = prefix + "layers." + std::to_string(l) + ".";
    DecoderLayerWeights w;
    w.input_norm = binder.Get(p + "input_layernorm.weight", {c.hidden_size});
    w.post_attention_norm = binder.Get(p + "post_attention_layernorm.weight", {c.hidden_size});
    if (c.layer_types[static_cast<size_t>(l)] == LayerType::kFullAttention) {
      w.attention = BindAttention(c, binder, p + "self_attn.");
    } else {
      w.linear_attention = BindGatedDeltaNet(c, binder, p + "linear_attn.");
    }
    if (c.mlp_types[static_cast<size_t>(l)] == MlpType::kMoe) {
      MoeWeights moe;
      moe.router = binder.Get(p + "mlp.gate.weight", {c.num_experts, c.hidden_size});
      moe.experts = BindExperts(c, binder, p + "mlp.");
      if (c.shared_expert_intermediate_size > 0) {
        moe.shared_expert = BindMlp(c, binder, p + "mlp.shared_expert.", c.shared_expert_intermediate_size);
        moe.shared_expert_gate = binder.Get(p + "mlp.shared_expert_gate.weight", {1, c.hidden_size});
      }
      w.moe = std::move(moe);
    } else {
      w.mlp = BindMlp(c, binder, p + "mlp.", c.intermediate_size);
    }
    weights.layers.push_back(std::move(w));
  }
}

}  // namespace infernix
