// The op contracts: every backend (cpu/ now, cuda/ next) implements this interface, and the models in
// src/model are written once against it. Each op states its shapes, dtypes and math; the CPU backend
// is the reference ("oracle") that other backends are tested against.
//
// Conventions:
//  - Tensors are row-major views (tensor/tensor.h) in memory of the backend that runs the op.
//    Activations are in the backend's activation_dtype() (f32 on the CPU, bf16 on GPUs); router
//    logits, routing weights, DeltaNet gates (g, beta), the shared-expert gate logit and the final
//    logits are always f32: MatMul writes whichever dtype its output tensor has.
//  - Weights W of a linear map are [out, in] (as stored by transformers); the op computes x @ W^T.
//    Weights may be f32, f16, bf16 or a GGUF block type (src/quant, docs/quant.md; a backend refuses a
//    type it has no kernels for in UploadWeight); math is always accumulated in f32.
//  - A batch is flattened: the tokens of several sequences are concatenated, and BatchLayout says
//    which rows belong to which sequence, the sequence's cache slot and its positions.
//  - Per-sequence state (KV cache, conv and recurrent state) lives in a SequenceState made by the
//    backend, indexed by slot. Ops that read state also append/advance it for the batch's tokens.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "backend/pick.h"
#include "tensor/tensor.h"

namespace infernix {

// One sequence's part of a flattened batch: rows [token_begin, token_begin + n_tokens), at positions
// pos_begin, pos_begin + 1, ...; the cache of `slot` holds exactly pos_begin earlier tokens.
struct BatchSeq {
  int slot = 0;
  int64_t token_begin = 0;
  int64_t n_tokens = 0;
  int64_t pos_begin = 0;
};

struct BatchLayout {
  std::vector<BatchSeq> seqs;
  std::vector<int32_t> positions;  // per token (host), pos_begin + offset within its sequence
  int64_t n_tokens = 0;
};

// Sizes of the per-sequence state a model needs.
// How the KV cache holds keys and values.
enum class KvCacheType : uint8_t {
  kActivation,  // the backend's activation type (bf16 on the GPU, f32 on the CPU)
  kF8E4M3,      // E4M3 codes and a power-of-two scale per row of head_dim values (quant/kv_f8.h)
};

struct StateSpec {
  int max_slots = 1;
  int64_t max_context = 0;  // tokens per slot
  // Full-attention layers: KV cache.
  KvCacheType kv_type = KvCacheType::kActivation;
  int n_attention_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  // Gated DeltaNet layers: causal-conv window and recurrent state.
  int n_linear_layers = 0;
  int conv_channels = 0;  // 2 * key_dim + value_dim
  int conv_kernel = 0;    // the conv keeps conv_kernel - 1 previous inputs
  int n_k_heads = 0, n_v_heads = 0, k_head_dim = 0, v_head_dim = 0;
};

// One slot's state in one Gated DeltaNet layer, f32 on every backend: the conv window [conv_kernel - 1,
// conv_channels] and the recurrent state [n_v_heads, k_head_dim, v_head_dim]; 0 without such layers.
inline int64_t ConvStateElems(const StateSpec& s) {
  return s.n_linear_layers > 0 ? static_cast<int64_t>(s.conv_kernel - 1) * s.conv_channels : 0;
}
inline int64_t RecurrentStateElems(const StateSpec& s) {
  return s.n_linear_layers > 0 ? static_cast<int64_t>(s.n_v_heads) * s.k_head_dim * s.v_head_dim : 0;
}

// Per-slot state of every layer. The ops of a forward pass write the state of the batch's tokens
// layer by layer; the model then calls Advance() once, so SlotLength() counts whole tokens.
class SequenceState {
 public:
  virtual ~SequenceState() = default;
  const StateSpec& spec() const { return spec_; }
  // Forgets slot's tokens: KV length 0, conv and recurrent state zero.
  virtual void ClearSlot(int slot) = 0;
  // Tokens currently held for `slot`.
  int64_t SlotLength(int slot) const { return lengths_[static_cast<size_t>(slot)]; }
  // Records that the batch's tokens are now part of their slots.
  void Advance(const BatchLayout& layout) {
    for (const auto& s : layout.seqs) lengths_[static_cast<size_t>(s.slot)] = s.pos_begin + s.n_tokens;
  }

 protected:
  explicit SequenceState(const StateSpec& spec) : spec_(spec), lengths_(static_cast<size_t>(spec.max_slots), 0) {}
  void ResetLength(int slot) { lengths_[static_cast<size_t>(slot)] = 0; }
  StateSpec spec_;

 private:
  std::vector<int64_t> lengths_;
};

// Weights of the routed experts of one MoE layer, one tensor per expert: gate and up [I, H], down [H, I].
struct ExpertWeights {
  std::vector<Tensor> gate, up, down;
};

// The shared expert of a MoE layer (Qwen3-Next, Qwen3.5-MoE): a SwiGLU MLP that every token passes
// through, scaled by the sigmoid of the token's gate logit.
struct SharedExpert {
  Tensor gate, up, down;  // [I_s, H], [I_s, H], [H, I_s]
  Tensor gate_logit;      // f32 [n, 1]: this pass's tokens
};

// Which key head a Gated DeltaNet value head reads (nv value heads over nk key heads, r = nv / nk).
// kGrouped: the value heads of key head 0 come first, then those of key head 1, ...: value head h uses
//   key head h / r (the Hugging Face layout).
// kTiled: [key 0 value 0, key 1 value 0, ..., key 0 value 1, key 1 value 1, ...]: value head h uses key
//   head h % nk (llama.cpp's qwen35 / qwen35moe GGUF files, whose converter reorders the value heads).
// Both are the same when nk == nv.
enum class GdnHeadMapping { kGrouped, kTiled };

// Thread-safety: a backend, its scratch memory and the states it made are used by one thread at a
// time (the engine thread that owns the model); run independent models on independent backends.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // The dtype of activations between ops (hidden states, projections, attention outputs).
  virtual DType activation_dtype() const = 0;

  // ---- memory ----
  // A tensor in this backend's memory with the values of host tensor `host` (same dtype and shape),
  // valid for the backend's lifetime. `host` must stay valid too (the CPU backend uses it in place).
  virtual Tensor UploadWeight(const Tensor& host) = 0;
  // A weight of dummy values made where the weights live (benchmarks: model/dummy_weights.h), with the
  // bytes the host fill writes (tensor/dummy_values.h): bf16, element i = bf16(scale * DummyUniform(seed,
  // i)); a block type, RandomQuantBlocks(dtype, rows, k, seed, scale)'s bytes (shape [rows, k]). Valid for
  // the backend's lifetime. nullopt where the host tensor is the weight anyway (CPU), or for a dtype the
  // backend does not make.
  virtual std::optional<Tensor> MakeDummyWeight(DType /*dtype*/, const Shape& /*shape*/, uint64_t /*seed*/,
                                                float /*scale*/) {
    return std::nullopt;
  }
  // Scratch memory for activations, valid until the next ResetScratch(). Contents undefined.
  virtual Tensor Scratch(DType dtype, Shape shape) = 0;
  virtual void ResetScratch() = 0;
  // The caller will not read x's contents again (until it writes them): the backend may leave them
  // unspecified where an op already called would only keep them up to date. No op's other outputs change.
  // (The CUDA backend's fused decode attention then skips writing its prepared q and k rows back in place,
  // and the cross-block count that orders that write.) Optional: the default does nothing.
  virtual void Discard(const Tensor& /*x*/) {}
  virtual void CopyToBackend(const void* host, Tensor dst) = 0;      // dst.size_bytes() bytes
  virtual void CopyToHost(const Tensor& src, void* host) = 0;        // src.size_bytes() bytes
  // Waits for src (f32) and returns its values in host memory that the caller may change, valid until
  // the next ReadToHost or ResetScratch: src itself on the CPU, the CUDA backend's page-locked readback
  // buffer (copied into at the link's speed, without the staging of a copy to pageable memory; reads of
  // over 64 MB go to pageable memory instead).
  virtual std::span<float> ReadToHost(const Tensor& src) = 0;
  // Greedy picks from logits [rows, cols] (f32, as the model's last product left them): for each row the
  // lowest index of the largest of its first `sampleable` values, or -1 where one of those is NaN or
  // +inf or all are -inf (pick.h, PickGreedyRows: the caller then reads the rows with ReadToHost and
  // samples them itself). The default reads the rows to the host and scans them there, and leaves
  // ReadToHost's buffer as ReadToHost(logits) would; a backend may instead pick on the device and read
  // back only the ids (then a later ReadToHost(logits) copies the rows).
  virtual std::vector<int32_t> PickGreedy(const Tensor& logits, int64_t sampleable) {
    return PickGreedyRows(ReadToHost(logits), logits.rows(), logits.cols(), sampleable);
  }
  // Picks queued without waiting for them (Model::QueuePick: pipelined decode). QueuePick queues the picks
  // of `logits`: PickGreedy's where `draws` is empty, else one per row (pick.h's PickRows: greedy, or the
  // engine's sampler's draw at the row's uniform). TakePick waits for the oldest pick queued and not yet taken
  // and returns its ids. FeedPickedTokens writes token ids i32 [rows.size()] of the pass being queued from
  // the last pick queued (taken or not): ids[i] = its pick at row rows[i], or 0 where it picked none (-1), so
  // a decode step can be queued before the step it continues has been read. The defaults pick at once on the
  // host and keep the ids there; a backend may keep them in its own memory until taken.
  // StageDraws: the model hands the draws of the pass it is queuing to the backend before its ReplayForward
  // (a replayed pass picks with them); QueuePick's `draws` after that pass are the same.
  virtual void StageDraws(std::span<const TokenDraw> /*draws*/) {}
  virtual void QueuePick(const Tensor& logits, int64_t sampleable, std::span<const TokenDraw> draws) {
    last_pick_ = draws.empty() ? PickGreedy(logits, sampleable)
                               : PickRows(ReadToHost(logits), logits.rows(), logits.cols(), sampleable, draws);
    queued_picks_.push_back(last_pick_);
  }
  virtual std::vector<int32_t> TakePick() {
    INFX_CHECK_MSG(!queued_picks_.empty(), "no pick is queued");
    std::vector<int32_t> ids = std::move(queued_picks_.front());
    queued_picks_.pop_front();
    return ids;
  }
  virtual void FeedPickedTokens(std::span<const int32_t> rows, Tensor ids) {
    std::vector<int32_t> fed = FeedFromPicks(last_pick_, rows);
    INFX_CHECK(ids.dtype == DType::kI32 && ids.numel() == static_cast<int64_t>(fed.size()));
    CopyToBackend(fed.data(), ids);
  }
  // Decode steps without queuing every op again. The model calls this at the start of a forward pass,
  // after queuing its token ids, with `shape` standing for everything but those ids and the positions
  // in `layout` (the slots, tokens per sequence, logit rows, the model). A backend that records a forward
  // pass as one unit (CUDA) may launch a unit it ran for a forward pass of that shape on `state` again (the
  // CUDA backend: the last of that shape from the same staging buffer), now with these ids and this layout,
  // and return true: the model then skips its layers and reads its logits from where that shape's passes
  // put them. false (the default): queue the pass as usual.
  // known: whether the model knows where that shape's logits go (it forgets them at times); without it
  // the backend must not replay, but may record the pass for later replays as it records others.
  virtual bool ReplayForward(uint64_t /*shape*/, bool /*known*/, const BatchLayout& /*layout*/,
                             SequenceState& /*state*/) {
    return false;
  }
  virtual std::unique_ptr<SequenceState> CreateState(const StateSpec& spec) = 0;

  // ---- ops ----
  // out[i, :] = table[ids[i], :]. ids i32 [n] (each < table rows, checked by the caller); out f32 [n, H].
  virtual void Embedding(const Tensor& ids, const Tensor& table, Tensor out) = 0;
  // Per row r of x [rows, d]: out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * (unit_offset ? 1 + w : w).
  virtual void RmsNorm(const Tensor& x, const Tensor& weight, float eps, bool unit_offset, Tensor out) = 0;
  // out [n, m] = x [n, k] @ w[m, k]^T.
  virtual void MatMul(const Tensor& x, const Tensor& w, Tensor out) = 0;
  // out = a + b, elementwise, same shapes (out may alias a or b).
  virtual void Add(const Tensor& a, const Tensor& b, Tensor out) = 0;
  // out = silu(gate) * up, elementwise; silu(x) = x * sigmoid(x).
  virtual void SiluMul(const Tensor& gate, const Tensor& up, Tensor out) = 0;
  // out = x * sigmoid(gate), elementwise (out may alias x).
  virtual void SigmoidMul(const Tensor& x, const Tensor& gate, Tensor out) = 0;
  // out [rows, c] = x [rows, cols][:, col_begin : col_begin + c].
  virtual void SliceColumns(const Tensor& x, int64_t col_begin, Tensor out) = 0;
  // In place on x [n, heads, head_dim]: rotates dims [0, rotary_dim) of each head by the token's
  // position (layout.positions), "rotate half" (GPT-NeoX) pairing i <-> i + rotary_dim/2, angle
  // pos * inv_freq[i] (computed in f32), cos/sin scaled by attention_scale; dims past rotary_dim
  // pass through. inv_freq f32 [rotary_dim / 2].
  virtual void Rope(Tensor x, const BatchLayout& layout, const Tensor& inv_freq, float attention_scale) = 0;
  // Causal GQA attention with a KV cache. q [n, hq, d], k and v [n, hkv, d], out [n, hq, d].
  // First appends k, v of every token to the cache of its sequence (attention layer `layer`), then
  // for each token at position p: out = softmax(q . K[0..p] * scale) @ V[0..p], query head h using
  // KV head h / (hq / hkv). Softmax in f32.
  virtual void Attention(const Tensor& q, const Tensor& k, const Tensor& v, SequenceState& state, int layer,
                         const BatchLayout& layout, float scale, Tensor out) = 0;
  // Depthwise causal conv1d + SiLU over time, per sequence, continuing from the slot's conv state
  // (the last kernel-1 inputs, zero for a new sequence), which it then updates. x, out [n, C];
  // w [C, 1, K] or [C, K]: out[t, c] = silu(sum_j w[c, j] * x[t - (K-1) + j, c]).
  virtual void CausalConv1d(const Tensor& x, const Tensor& w, SequenceState& state, int layer,
                            const BatchLayout& layout, Tensor out) = 0;
  // Gated DeltaNet gates, per token and value head: beta = sigmoid(b); g = -exp(a_log) * softplus(a + dt_bias).
  // a, b [n, nv] activations; a_log, dt_bias [nv]; g, beta f32 [n, nv].
  virtual void GdnGates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, Tensor g,
                        Tensor beta) = 0;
  // The gated delta rule, recurrent form, continuing from the slot's state S [nv, dk, dv] (f32, zero for
  // a new sequence), which it updates. q, k [n, nk, dk]; v, out [n, nv, dv]; g, beta [n, nv].
  // Value head h uses key head h / (nv / nk) (kGrouped) or h % nk (kTiled); S, v, g, beta and out are
  // indexed by value head in the same order. Per token: q, k are L2-normalised (x / sqrt(sum x^2 + 1e-6)),
  // q scaled by 1/sqrt(dk); S = S * exp(g); S += k (x) (beta * (v - S^T k)); out = S^T q.
  virtual void GatedDeltaRule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                              GdnHeadMapping mapping, SequenceState& state, int layer, const BatchLayout& layout,
                              Tensor out) = 0;
  // Per row r of x, z [rows, d]: out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w * silu(z[r]).
  virtual void GatedRmsNorm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor out) = 0;
  // Router: p = softmax(logits[r]) in f32; the top_k largest (ties to the lower expert id), in
  // descending order, optionally renormalised to sum 1. logits f32 [n, E]; weights f32 [n, k]; ids i32 [n, k].
  virtual void MoeRouting(const Tensor& logits, int top_k, bool normalize, Tensor weights, Tensor ids) = 0;
  // out[t] = sum_j weights[t, j] * down_e(silu(gate_e x[t]) * up_e x[t]), e = ids[t, j]. x, out [n, H].
  virtual void MoeExperts(const Tensor& x, const Tensor& weights, const Tensor& ids, const ExpertWeights& experts,
                          Tensor out) = 0;
  // MoeExperts with the shared expert added: out[t] = sum_j weights[t, j] * E_ids[t, j](x[t]) +
  // sigmoid(shared.gate_logit[t]) * down_s(silu(gate_s x[t]) * up_s x[t]). This default runs the shared
  // expert through the ops above after the routed ones; a backend may run it beside them.
  virtual void MoeExpertsWithShared(const Tensor& x, const Tensor& weights, const Tensor& ids,
                                    const ExpertWeights& experts, const SharedExpert& shared, Tensor out) {
    MoeExperts(x, weights, ids, experts, out);
    const int64_t n = x.rows(), inter = shared.gate.rows();
    Tensor gate = Scratch(activation_dtype(), {n, inter});
    Tensor up = Scratch(activation_dtype(), {n, inter});
    MatMul(x, shared.gate, gate);
    MatMul(x, shared.up, up);
    SiluMul(gate, up, gate);
    Tensor down = Scratch(activation_dtype(), {n, x.cols()});
    MatMul(gate, shared.down, down);
    AddSigmoidGated(out, down, shared.gate_logit);
  }
  // acc[r] += sigmoid(gate_logit[r, 0]) * x[r]. acc, x [n, H]; gate_logit [n, 1].
  virtual void AddSigmoidGated(Tensor acc, const Tensor& x, const Tensor& gate_logit) = 0;
  // out[i] = x[rows[i]]. x [n, d]; out [rows.size(), d].
  virtual void GatherRows(const Tensor& x, const std::vector<int32_t>& rows, Tensor out) = 0;

 private:
  // The default pipelined picks' ids: the last one queued, and those queued and not yet taken (oldest
  // first; at most a few).
  std::vector<int32_t> last_pick_;
  std::deque<std::vector<int32_t>> queued_picks_;
};

}  // namespace infernix
