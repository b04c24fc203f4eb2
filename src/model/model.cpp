#include "model/model.h"

#include <algorithm>
#include <set>

#include "base/check.h"
#include "base/error.h"
#include "model/architectures.h"
#include "model/dummy_weights.h"
#include "model/fp8_weights.h"
#include "model/rope.h"
#include "model/weight_binder.h"

namespace infernix {

ForwardBatch ForwardBatch::Single(std::vector<int32_t> tokens, int slot, int64_t pos_begin, bool all_logits) {
  ForwardBatch b;
  int64_t n = static_cast<int64_t>(tokens.size());
  b.seqs.push_back(BatchSeq{slot, 0, n, pos_begin});
  if (all_logits) {
    for (int64_t i = 0; i < n; ++i) b.logit_rows.push_back(static_cast<int32_t>(i));
  } else if (n > 0) {
    b.logit_rows.push_back(static_cast<int32_t>(n - 1));
  }
  b.tokens = std::move(tokens);
  return b;
}

AttentionWeights BindAttention(const ModelConfig& c, WeightBinder& binder, const std::string& p) {
  AttentionWeights a;
  int64_t h = c.hidden_size, d = c.head_dim;
  a.gated = c.gated_attention;
  if (a.gated) {  // per head: d rows of query, then d of gate
    Tensor qg = binder.Host(p + "q_proj.weight", {c.num_heads * d * 2, h});
    a.q_proj = binder.Own(GatherWeightRows(qg, InterleavedRows(c.num_heads, 2 * d, 0, d)));
    a.q_gate = binder.Own(GatherWeightRows(qg, InterleavedRows(c.num_heads, 2 * d, d, d)));
  } else {
    a.q_proj = binder.Get(p + "q_proj.weight", {c.num_heads * d, h});
  }
  a.k_proj = binder.Get(p + "k_proj.weight", {c.num_kv_heads * d, h});
  a.v_proj = binder.Get(p + "v_proj.weight", {c.num_kv_heads * d, h});
  a.o_proj = binder.Get(p + "o_proj.weight", {h, c.num_heads * d});
  a.q_norm = binder.Get(p + "q_norm.weight", {d});
  a.k_norm = binder.Get(p + "k_norm.weight", {d});
  return a;
}

MlpWeights BindMlp(const ModelConfig& c, WeightBinder& binder, const std::string& p, int64_t intermediate) {
  MlpWeights m;
  m.gate_proj = binder.Get(p + "gate_proj.weight", {intermediate, c.hidden_size});
  m.up_proj = binder.Get(p + "up_proj.weight", {intermediate, c.hidden_size});
  m.down_proj = binder.Get(p + "down_proj.weight", {c.hidden_size, intermediate});
  return m;
}

ExpertWeights BindExperts(const ModelConfig& c, WeightBinder& binder, const std::string& p) {
  ExpertWeights e;
  int64_t h = c.hidden_size, inter = c.moe_intermediate_size, n = c.num_experts;
  if (binder.Has(p + "experts.gate_up_proj")) {  // fused layout: [E, 2I, H] and [E, H, I]
    Tensor gate_up = binder.Get(p + "experts.gate_up_proj", {n, 2 * inter, h});
    Tensor down = binder.Get(p + "experts.down_proj", {n, h, inter});
    for (int64_t i = 0; i < n; ++i) {
      Tensor gu = gate_up.SliceRows(i, 1).Reshaped({2 * inter, h});
      e.gate.push_back(gu.SliceRows(0, inter));
      e.up.push_back(gu.SliceRows(inter, inter));
      e.down.push_back(down.SliceRows(i, 1).Reshaped({h, inter}));
    }
    return e;
  }
  for (int64_t i = 0; i < n; ++i) {
    std::string q = p + "experts." + std::to_string(i) + ".";
    e.gate.push_back(binder.Get(q + "gate_proj.weight", {inter, h}));
    e.up.push_back(binder.Get(q + "up_proj.weight", {inter, h}));
    e.down.push_back(binder.Get(q + "down_proj.weight", {h, inter}));
  }
  return e;
}

Model::Model(ModelConfig config, std::unique_ptr<WeightSource> files, Backend& backend)
    : config_(std::move(config)), files_(std::move(files)), backend_(backend) {
  binder_ = std::make_unique<WeightBinder>(*files_, backend_);
  const std::string& p = binder_->prefix();
  int64_t v = config_.vocab_size, h = config_.hidden_size;
  weights_.embed = binder_->Get(p + "embed_tokens.weight", {v, h});
  weights_.final_norm = binder_->Get(p + "norm.weight", {h});
  if (binder_->Has("lm_head.weight")) {
    weights_.lm_head = binder_->Get("lm_head.weight", {v, h});
  } else if (config_.tie_word_embeddings) {
    weights_.lm_head = weights_.embed;
  } else {
    ThrowError(ErrorCode::kNotFound, "{}: tensor 'lm_head.weight' is missing and tie_word_embeddings is false",
               files_->Describe());
  }
  if (config_.is_hybrid()) {
    BindQwen3NextWeights(config_, *binder_, weights_);
  } else {
    BindQwen3Weights(config_, *binder_, weights_);
  }
  RopeFrequencies rope = ComputeRopeFrequencies(config_.rope, config_.max_position_embeddings);
  rope_inv_freq_host_ = HostBuffer(DType::kF32, {static_cast<int64_t>(rope.inv_freq.size())});
  std::copy(rope.inv_freq.begin(), rope.inv_freq.end(), rope_inv_freq_host_.view().as<float>());
  rope_inv_freq_ = backend_.UploadWeight(rope_inv_freq_host_.view());
  rope_attention_scale_ = rope.attention_scale;
}

Model::~Model() = default;

StateSpec Model::MakeStateSpec(int max_slots, int64_t max_context, KvCacheType kv_type) const {
  const ModelConfig& c = config_;
  StateSpec s;
  s.max_slots = max_slots;
  s.max_context = max_context;
  s.kv_type = kv_type;
  s.n_attention_layers = c.CountLayers(LayerType::kFullAttention);
  s.n_kv_heads = c.num_kv_heads;
  s.head_dim = c.head_dim;
  s.n_linear_layers = c.CountLayers(LayerType::kLinearAttention);
  if (s.n_linear_layers > 0) {
    s.conv_channels = 2 * c.linear_num_key_heads * c.linear_key_head_dim + c.linear_num_value_heads * c.linear_value_head_dim;
    s.conv_kernel = c.linear_conv_kernel_dim;
    s.n_k_heads = c.linear_num_key_heads;
    s.n_v_heads = c.linear_num_value_heads;
    s.k_head_dim = c.linear_key_head_dim;
    s.v_head_dim = c.linear_value_head_dim;
  }
  return s;
}

void Model::Forward(const ForwardBatch& batch, SequenceState& state, std::vector<float>& logits) {
  std::span<const float> values = Forward(batch, state);
  // Resized, not cleared first: a caller that reuses the vector keeps its size, so it is not zero-filled
  // before the copy overwrites it.
  logits.resize(values.size());
  std::copy(values.begin(), values.end(), logits.begin());
}

std::span<float> Model::Forward(const ForwardBatch& batch, SequenceState& state) {
  last_logits_ = RunForward(batch, state, Picks::kNone);
  return last_logits_ ? backend_.ReadToHost(*last_logits_) : std::span<float>{};
}

std::vector<int32_t> Model::ForwardGreedy(const ForwardBatch& batch, SequenceState& state, int64_t sampleable) {
  INFX_CHECK_MSG(picks_queued_ == 0, "ForwardGreedy with {} queued passes not taken", picks_queued_);
  if (batch.logit_rows.empty()) {
    last_logits_ = RunForward(batch, state, Picks::kGreedy);
    return {};
  }
  QueuePick(batch, state, sampleable);
  return TakePick();
}

void Model::QueuePick(const ForwardBatch& batch, SequenceState& state, int64_t sampleable,
                      std::span<const TokenDraw> draws, std::span<const int32_t> feed) {
  INFX_CHECK_MSG(!batch.logit_rows.empty(), "a picking pass needs logit rows");
  INFX_CHECK_MSG(draws.empty() || draws.size() == batch.logit_rows.size(), "{} draws for {} logit rows", draws.size(),
                 batch.logit_rows.size());
  // All greedy: the greedy picks (the backend's cheaper form).
  if (std::all_of(draws.begin(), draws.end(), [](const TokenDraw& d) { return d.greedy; })) draws = {};
  last_logits_ = RunForward(batch, state, draws.empty() ? Picks::kGreedy : Picks::kDrawn, draws, feed);
  INFX_CHECK(last_logits_.has_value());
  backend_.QueuePick(*last_logits_, sampleable, draws);
  ++picks_queued_;
}

std::vector<int32_t> Model::TakePick() {
  INFX_CHECK_MSG(picks_queued_ > 0, "no picking pass is queued");
  --picks_queued_;
  return backend_.TakePick();
}

std::span<float> Model::LastLogits() {
  INFX_CHECK_MSG(last_logits_.has_value(), "no logits: the last forward pass had no logit rows");
  return backend_.ReadToHost(*last_logits_);
}

std::optional<Tensor> Model::RunForward(const ForwardBatch& batch, SequenceState& state, Picks picks,
                                        std::span<const TokenDraw> draws, std::span<const int32_t> feed) {
  last_logits_.reset();  // scratch of the pass before, which ResetScratch below ends
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const bool fed = !feed.empty();
  INFX_CHECK_MSG(!fed || static_cast<int64_t>(feed.size()) == n, "{} fed tokens for a batch of {}", feed.size(), n);
  for (int64_t i = 0; i < n && !fed; ++i) {
    int32_t id = batch.tokens[static_cast<size_t>(i)];
    if (id < 0 || id >= config_.vocab_size)
      ThrowError(ErrorCode::kInvalidArgument, "token {} (at index {}) is outside the vocabulary [0, {})", id, i,
                 config_.vocab_size);
  }
  BatchLayout layout;
  layout.n_tokens = n;
  layout.seqs = batch.seqs;
  layout.positions.resize(static_cast<size_t>(n));
  std::set<int> slots;
  int64_t covered = 0;
  for (const BatchSeq& s : batch.seqs) {
    INFX_CHECK_MSG(slots.insert(s.slot).second, "slot {} twice in one batch", s.slot);
    INFX_CHECK(s.slot >= 0 && s.slot < state.spec().max_slots);
    INFX_CHECK_MSG(s.pos_begin == state.SlotLength(s.slot), "slot {} holds {} tokens, batch starts at {}", s.slot,
                   state.SlotLength(s.slot), s.pos_begin);
    INFX_CHECK(s.token_begin >= 0 && s.n_tokens >= 0 && s.token_begin + s.n_tokens <= n);
    if (s.pos_begin + s.n_tokens > state.spec().max_context)
      ThrowError(ErrorCode::kOutOfRange, "sequence of {} tokens exceeds the context size of {} tokens",
                 s.pos_begin + s.n_tokens, state.spec().max_context);
    for (int64_t i = 0; i < s.n_tokens; ++i)
      layout.positions[static_cast<size_t>(s.token_begin + i)] = static_cast<int32_t>(s.pos_begin + i);
    covered += s.n_tokens;
  }
  INFX_CHECK_MSG(covered == n, "sequences cover {} of {} tokens", covered, n);
  if (n == 0) return std::nullopt;

  Backend& be = backend_;
  be.ResetScratch();
  LayerContext ctx{be, config_, layout, state, rope_inv_freq_, rope_attention_scale_};
  Tensor ids = be.Scratch(DType::kI32, {n});
  if (fed) {
    be.FeedPickedTokens(feed, ids);  // the picks are ids below sampleable <= vocab_size, or fed as 0
  } else {
    be.CopyToBackend(batch.tokens.data(), ids);
  }
  if (picks == Picks::kDrawn) be.StageDraws(draws);  // before a replay, which draws with them
  // A decode step (one token per sequence) of a shape queued before: the backend may run it as it ran such
  // a pass, with the new ids and positions, without the layers being queued again.
  const std::optional<uint64_t> shape = DecodeShape(batch, picks, fed);
  if (shape) {
    const auto known = replay_logits_.find(*shape);  // replay_logits_ forgets them all at times
    if (be.ReplayForward(*shape, known != replay_logits_.end(), layout, state)) {
      INFX_CHECK(known != replay_logits_.end());
      state.Advance(layout);
      return known->second;
    }
  }
  Tensor hidden = be.Scratch(be.activation_dtype(), {n, config_.hidden_size});
  be.Embedding(ids, weights_.embed, hidden);
  for (int l = 0; l < config_.num_layers; ++l) RunDecoderLayer(ctx, weights_.layers[static_cast<size_t>(l)], l, hidden);
  state.Advance(layout);

  int64_t rows = static_cast<int64_t>(batch.logit_rows.size());
  if (rows == 0) return std::nullopt;
  Tensor selected = be.Scratch(be.activation_dtype(), {rows, config_.hidden_size});
  const float eps = static_cast<float>(config_.rms_norm_eps);
  bool every_row = rows == n;  // decode: each token's logits, in order
  for (int64_t i = 0; every_row && i < rows; ++i) every_row = batch.logit_rows[static_cast<size_t>(i)] == i;
  if (every_row) {  // no gather; the norm may then join the last layer's final product (CUDA)
    be.RmsNorm(hidden, weights_.final_norm, eps, config_.zero_centered_norm, selected);
  } else {
    be.GatherRows(hidden, batch.logit_rows, selected);
    be.RmsNorm(selected, weights_.final_norm, eps, config_.zero_centered_norm, selected);
  }
  Tensor out = be.Scratch(DType::kF32, {rows, config_.vocab_size});
  be.MatMul(selected, weights_.lm_head, out);
  if (shape) {
    if (replay_logits_.size() >= kMaxReplayShapes && !replay_logits_.contains(*shape)) replay_logits_.clear();
    replay_logits_[*shape] = out;
  }
  return out;
}

std::optional<uint64_t> Model::DecodeShape(const ForwardBatch& batch, Picks picks, bool fed) const {
  uint64_t h = 0x6a09e667f3bcc908ull;
  auto mix = [&h](uint64_t v) {
    h = (h ^ v) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  };
  // The model (its weights' addresses), then the batch without its ids and positions.
  mix(reinterpret_cast<uintptr_t>(weights_.embed.data));
  mix(reinterpret_cast<uintptr_t>(weights_.lm_head.data));
  mix(batch.tokens.size());
  for (const BatchSeq& s : batch.seqs) {
    if (s.n_tokens != 1) return std::nullopt;
    mix(static_cast<uint64_t>(s.slot));
    mix(static_cast<uint64_t>(s.token_begin));
  }
  mix(batch.logit_rows.size());
  for (int32_t r : batch.logit_rows) mix(static_cast<uint64_t>(r));
  mix(static_cast<uint64_t>(picks));
  mix(fed ? 1 : 0);
  return h;
}

std::unique_ptr<Model> LoadModel(const FileSet& files, Backend& backend) {
  return LoadModel(LoadModelConfig(files), files, backend);
}

std::unique_ptr<Model> LoadModel(ModelConfig config, const FileSet& files, Backend& backend) {
  // FP8 weights (with their weight_scale_inv) are repacked into kF8E4M3B128; the rest passes through.
  auto weights = std::make_unique<Fp8WeightSource>(
      std::make_unique<SafetensorsWeightSource>(std::make_unique<WeightFiles>(files)), config.fp8_block_size);
  return std::make_unique<Model>(std::move(config), std::move(weights), backend);
}

std::unique_ptr<Model> LoadModelWithDummyWeights(ModelConfig config, Backend& backend, uint64_t seed,
                                                 DType linear_dtype) {
  auto weights = std::make_unique<DummyWeightSource>(config, seed, linear_dtype);
  return std::make_unique<Model>(std::move(config), std::move(weights), backend);
}

}  // namespace infernix
