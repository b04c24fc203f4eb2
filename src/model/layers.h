// Weights and forward code of the blocks shared by the Qwen architectures: (gated) full attention,
// the SwiGLU MLP, the mixture of experts with an optional sigmoid-gated shared expert, and Gated
// DeltaNet. Written once against backend/ops.h; the per-architecture files only bind weights.
#pragma once

#include <optional>
#include <vector>

#include "backend/ops.h"
#include "formats/hf_config.h"

namespace infernix {

// Everything a block needs for one forward pass over a flattened batch.
struct LayerContext {
  Backend& backend;
  const ModelConfig& config;
  const BatchLayout& layout;
  SequenceState& state;
  Tensor rope_inv_freq;  // f32 [rotary_dim / 2], backend memory
  float rope_attention_scale = 1.0f;
};

// Full attention. q_proj is [heads * head_dim, hidden]. Gated (Qwen3-Next / 3.5): the checkpoint's q_proj
// holds each head's [query (head_dim), gate (head_dim)] rows, split at load into q_proj and q_gate
// (two products of the same input, which decode joins into one launch, and no copies after them); the
// output is multiplied by sigmoid(gate).
struct AttentionWeights {
  Tensor q_proj, k_proj, v_proj, o_proj;  // [out, hidden] / o_proj [hidden, heads * head_dim]
  Tensor q_gate;                          // gated: [heads * head_dim, hidden]
  Tensor q_norm, k_norm;                  // [head_dim], RMSNorm per head (zero-centred in hybrids)
  bool gated = false;
};

struct MlpWeights {
  Tensor gate_proj, up_proj, down_proj;  // [I, H], [I, H], [H, I]
};

struct MoeWeights {
  Tensor router;  // [E, H]
  ExpertWeights experts;
  std::optional<MlpWeights> shared_expert;
  Tensor shared_expert_gate;  // [1, H] when shared_expert is present
};

// Gated DeltaNet, with the projections in a canonical (split) layout:
// in_proj_qkv [2 * nk * dk + nv * dv, H] rows ordered q (all key heads), k, v (all value heads);
// in_proj_z [nv * dv, H]; in_proj_b, in_proj_a [nv, H].
struct GatedDeltaNetWeights {
  Tensor in_proj_qkv, in_proj_z, in_proj_b, in_proj_a;
  Tensor conv1d;          // [C, 1, K]
  Tensor a_log, dt_bias;  // [nv]
  Tensor norm;            // [dv], plain-weight gated RMSNorm
  Tensor out_proj;        // [H, nv * dv]
};

struct DecoderLayerWeights {
  Tensor input_norm, post_attention_norm;  // [H]
  std::optional<AttentionWeights> attention;
  std::optional<GatedDeltaNetWeights> linear_attention;
  std::optional<MlpWeights> mlp;
  std::optional<MoeWeights> moe;
};

// Each returns a new scratch tensor [n, H] (the block's output, before the residual add).
Tensor RunAttention(LayerContext& ctx, const AttentionWeights& w, int attention_layer, const Tensor& x);
Tensor RunGatedDeltaNet(LayerContext& ctx, const GatedDeltaNetWeights& w, int linear_layer, const Tensor& x);
Tensor RunMlp(LayerContext& ctx, const MlpWeights& w, const Tensor& x);
Tensor RunMoe(LayerContext& ctx, const MoeWeights& w, const Tensor& x);

// One decoder layer, in place on hidden [n, H]: pre-norm token mixer and MLP, each with a residual.
void RunDecoderLayer(LayerContext& ctx, const DecoderLayerWeights& w, int layer, Tensor hidden);

}  // namespace infernix
