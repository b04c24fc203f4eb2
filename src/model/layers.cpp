#include "model/layers.h"

#include <cmath>

#include "base/check.h"

namespace infernix {
namespace {

// Activations in the backend's activation dtype; routing, gates and logits always in f32.
Tensor NewAct(LayerContext& ctx, Shape shape) { return ctx.backend.Scratch(ctx.backend.activation_dtype(), shape); }
Tensor NewF32(LayerContext& ctx, Shape shape) { return ctx.backend.Scratch(DType::kF32, shape); }

}  // namespace

Tensor RunAttention(LayerContext& ctx, const AttentionWeights& w, int attention_layer, const Tensor& x) {
  Backend& be = ctx.backend;
  const ModelConfig& c = ctx.config;
  int64_t n = x.rows(), hq = c.num_heads, hkv = c.num_kv_heads, d = c.head_dim;
  Tensor q = NewAct(ctx, {n, hq, d});
  be.MatMul(x, w.q_proj, q.Reshaped({n, hq * d}));
  Tensor gate;
  if (w.gated) {
    gate = NewAct(ctx, {n, hq * d});
    be.MatMul(x, w.q_gate, gate);
  }
  Tensor k = NewAct(ctx, {n, hkv, d});
  Tensor v = NewAct(ctx, {n, hkv, d});
  be.MatMul(x, w.k_proj, k.Reshaped({n, hkv * d}));
  be.MatMul(x, w.v_proj, v.Reshaped({n, hkv * d}));
  float eps = static_cast<float>(c.rms_norm_eps);
  be.RmsNorm(q.Reshaped({n * hq, d}), w.q_norm, eps, c.zero_centered_norm, q.Reshaped({n * hq, d}));
  be.RmsNorm(k.Reshaped({n * hkv, d}), w.k_norm, eps, c.zero_centered_norm, k.Reshaped({n * hkv, d}));
  be.Rope(q, ctx.layout, ctx.rope_inv_freq, ctx.rope_attention_scale);
  be.Rope(k, ctx.layout, ctx.rope_inv_freq, ctx.rope_attention_scale);
  Tensor attn = NewAct(ctx, {n, hq, d});
  float scale = 1.0f / std::sqrt(static_cast<float>(d));
  be.Attention(q, k, v, ctx.state, attention_layer, ctx.layout, scale, attn);
  for (const Tensor* t : {&q, &k, &v}) be.Discard(*t);  // normed and rotated in place, read by nothing after
  Tensor flat = attn.Reshaped({n, hq * d});
  if (w.gated) be.SigmoidMul(flat, gate, flat);
  Tensor out = NewAct(ctx, {n, c.hidden_size});
  be.MatMul(flat, w.o_proj, out);
  return out;
}

Tensor RunMlp(LayerContext& ctx, const MlpWeights& w, const Tensor& x) {
  int64_t n = x.rows(), inter = w.gate_proj.rows();
  Tensor gate = NewAct(ctx, {n, inter}), up = NewAct(ctx, {n, inter});
  ctx.backend.MatMul(x, w.gate_proj, gate);
  ctx.backend.MatMul(x, w.up_proj, up);
  ctx.backend.SiluMul(gate, up, gate);
  Tensor out = NewAct(ctx, {n, w.down_proj.rows()});
  ctx.backend.MatMul(gate, w.down_proj, out);
  return out;
}

Tensor RunMoe(LayerContext& ctx, const MoeWeights& w, const Tensor& x) {
  Backend& be = ctx.backend;
  const ModelConfig& c = ctx.config;
  int64_t n = x.rows(), k = c.num_experts_per_tok;
  // The router and the shared-expert gate first (one launch when decoding); the shared expert's MLP runs
  // with the routed experts (MoeExpertsWithShared), beside them where the backend can.
  Tensor logits = NewF32(ctx, {n, c.num_experts});
  be.MatMul(x, w.router, logits);
  Tensor gate_logit;
  if (w.shared_expert) {
    gate_logit = NewF32(ctx, {n, 1});
    be.MatMul(x, w.shared_expert_gate, gate_logit);
  }
  Tensor weights = NewF32(ctx, {n, k});
  Tensor ids = be.Scratch(DType::kI32, {n, k});
  be.MoeRouting(logits, static_cast<int>(k), c.norm_topk_prob, weights, ids);
  Tensor out = NewAct(ctx, {n, c.hidden_size});
  if (w.shared_expert) {
    const MlpWeights& s = *w.shared_expert;
    be.MoeExpertsWithShared(x, weights, ids, w.experts, SharedExpert{s.gate_proj, s.up_proj, s.down_proj, gate_logit},
                            out);
  } else {
    be.MoeExperts(x, weights, ids, w.experts, out);
  }
  return out;
}

Tensor RunGatedDeltaNet(LayerContext& ctx, const GatedDeltaNetWeights& w, int linear_layer, const Tensor& x) {
  Backend& be = ctx.backend;
  const ModelConfig& c = ctx.config;
  int64_t n = x.rows(), nk = c.linear_num_key_heads, nv = c.linear_num_value_heads;
  int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim;
  int64_t key_dim = nk * dk, value_dim = nv * dv, conv_dim = 2 * key_dim + value_dim;
  Tensor mixed = NewAct(ctx, {n, conv_dim});
  be.MatMul(x, w.in_proj_qkv, mixed);
  Tensor z = NewAct(ctx, {n, value_dim});
  be.MatMul(x, w.in_proj_z, z);
  Tensor b = NewAct(ctx, {n, nv});
  Tensor a = NewAct(ctx, {n, nv});
  be.MatMul(x, w.in_proj_b, b);
  be.MatMul(x, w.in_proj_a, a);
  Tensor conv = NewAct(ctx, {n, conv_dim});
  be.CausalConv1d(mixed, w.conv1d, ctx.state, linear_layer, ctx.layout, conv);
  Tensor q, k, v;
  const size_t elem = DTypeSize(conv.dtype);
  if (n == 1 && (key_dim * elem) % 16 == 0) {
    // One token (decode at batch 1): q, k and v are contiguous column ranges of conv's one row, so views
    // of it (16-byte aligned, as the kernels' vector loads want) instead of three copies.
    Tensor flat = conv.Reshaped({conv_dim, 1});
    q = flat.SliceRows(0, key_dim).Reshaped({n, nk, dk});
    k = flat.SliceRows(key_dim, key_dim).Reshaped({n, nk, dk});
    v = flat.SliceRows(2 * key_dim, value_dim).Reshaped({n, nv, dv});
  } else {
    q = NewAct(ctx, {n, nk, dk});
    k = NewAct(ctx, {n, nk, dk});
    v = NewAct(ctx, {n, nv, dv});
    be.SliceColumns(conv, 0, q.Reshaped({n, key_dim}));
    be.SliceColumns(conv, key_dim, k.Reshaped({n, key_dim}));
    be.SliceColumns(conv, 2 * key_dim, v.Reshaped({n, value_dim}));
  }
  Tensor g = NewF32(ctx, {n, nv});
  Tensor beta = NewF32(ctx, {n, nv});
  be.GdnGates(a, b, w.a_log, w.dt_bias, g, beta);
  Tensor core = NewAct(ctx, {n, nv, dv});
  GdnHeadMapping mapping = c.linear_value_heads_tiled ? GdnHeadMapping::kTiled : GdnHeadMapping::kGrouped;
  be.GatedDeltaRule(q, k, v, g, beta, mapping, ctx.state, linear_layer, ctx.layout, core);
  Tensor normed = NewAct(ctx, {n * nv, dv});
  be.GatedRmsNorm(core.Reshaped({n * nv, dv}), z.Reshaped({n * nv, dv}), w.norm, static_cast<float>(c.rms_norm_eps),
                  normed);
  Tensor out = NewAct(ctx, {n, c.hidden_size});
  be.MatMul(normed.Reshaped({n, value_dim}), w.out_proj, out);
  return out;
}

void RunDecoderLayer(LayerContext& ctx, const DecoderLayerWeights& w, int layer, Tensor hidden) {
  Backend& be = ctx.backend;
  const ModelConfig& c = ctx.config;
  float eps = static_cast<float>(c.rms_norm_eps);
  Tensor normed = NewAct(ctx, hidden.shape);
  be.RmsNorm(hidden, w.input_norm, eps, c.zero_centered_norm, normed);
  int index = c.IndexWithinType(layer);
  Tensor mixed = w.attention ? RunAttention(ctx, *w.attention, index, normed)
                             : RunGatedDeltaNet(ctx, *w.linear_attention, index, normed);
  be.Add(hidden, mixed, hidden);
  be.RmsNorm(hidden, w.post_attention_norm, eps, c.zero_centered_norm, normed);
  Tensor mlp = w.moe ? RunMoe(ctx, *w.moe, normed) : RunMlp(ctx, *w.mlp, normed);
  be.Add(hidden, mlp, hidden);
}

}  // namespace infernix
