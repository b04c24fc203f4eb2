// The CUDA backend: every op of backend/ops.h on one NVIDIA GPU of compute capability 8.0 or newer,
// with bf16 activations (f32 where ops.h says so: router logits and weights, DeltaNet gates, logits).
//
// Execution model. Ops validate their arguments on the host and queue launcher calls on the
// recorder (recorder.h); nothing runs until a synchronisation point: CopyToHost, ResetScratch, a state
// change, Synchronize(). A queued unit that was seen before replays as a CUDA graph, so a decode step
// costs a handful of launches. Consecutive small-batch MatMuls that share their input are merged into
// one weight-streaming launch (gemv.cu), and neighbouring ops of the decode path are fused (a residual
// add with the norm after it; the q/k norms, RoPE and the KV-cache append of an attention layer).
//
// Memory. Weights live in one device arena (one backend per model), activations in a scratch arena
// reset before every forward pass (no allocation once a shape has been seen), small uploads (token
// ids, batch layouts, gathered rows) pass through pinned staging buffers. Sequence state (KV pages,
// DeltaNet states) is owned by the CudaState objects this backend creates.
//
// Thread-safety: none; one thread owns the backend. Tensors it returns are device pointers.
#pragma once

#include <cuda_runtime.h>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "backend/cuda/factory.h"
#include "backend/cuda/gemm_lt.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/recorder.h"
#include "backend/ops.h"

namespace infernix {

class CudaBackend final : public Backend {
 public:
  // Throws Error(kUnsupported) when the device cannot run the backend (see CudaUnavailableReason).
  explicit CudaBackend(const CudaOptions& options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  DType activation_dtype() const override { return DType::kBF16; }

  Tensor UploadWeight(const Tensor& host) override;
  std::optional<Tensor> MakeDummyWeight(DType dtype, const Shape& shape, uint64_t seed, float scale) override;
  Tensor Scratch(DType dtype, Shape shape) override;
  void ResetScratch() override;
  void CopyToBackend(const void* host, Tensor dst) override;
  void CopyToHost(const Tensor& src, void* host) override;
  std::span<float> ReadToHost(const Tensor& src) override;
  // The picks on the device (PickRowsOnDevice: greedy, or with the draws staged) and only the ids read back. A
  // decode step recorded with its pick holds the pick's kernel in its unit; after a replay of it the ids are
  // read from where it wrote them. StageDraws uploads the draws with the pass's inputs (the replayed kernel
  // reads them where the recorded one did).
  std::vector<int32_t> PickGreedy(const Tensor& logits, int64_t sampleable) override;
  void StageDraws(std::span<const TokenDraw> draws) override;
  // Pipelined: the pass's unit ends with the picks and their copy into a device buffer of this backend
  // (pick_feed_), which the next pass's FeedPickedTokens reads on the device; the ids go to the host on a
  // copy of their own, waited for in TakePick.
  void QueuePick(const Tensor& logits, int64_t sampleable, std::span<const TokenDraw> draws) override;
  std::vector<int32_t> TakePick() override;
  void FeedPickedTokens(std::span<const int32_t> rows, Tensor ids) override;
  std::unique_ptr<SequenceState> CreateState(const StateSpec& spec) override;
  bool ReplayForward(uint64_t shape, bool known, const BatchLayout& layout, SequenceState& state) override;

  void Embedding(const Tensor& ids, const Tensor& table, Tensor out) override;
  void RmsNorm(const Tensor& x, const Tensor& weight, float eps, bool unit_offset, Tensor out) override;
  void MatMul(const Tensor& x, const Tensor& w, Tensor out) override;
  void Add(const Tensor& a, const Tensor& b, Tensor out) override;
  void SiluMul(const Tensor& gate, const Tensor& up, Tensor out) override;
  void SigmoidMul(const Tensor& x, const Tensor& gate, Tensor out) override;
  void Discard(const Tensor& x) override;
  void SliceColumns(const Tensor& x, int64_t col_begin, Tensor out) override;
  void Rope(Tensor x, const BatchLayout& layout, const Tensor& inv_freq, float attention_scale) override;
  void Attention(const Tensor& q, const Tensor& k, const Tensor& v, SequenceState& state, int layer,
                 const BatchLayout& layout, float scale, Tensor out) override;
  void CausalConv1d(const Tensor& x, const Tensor& w, SequenceState& state, int layer, const BatchLayout& layout,
                    Tensor out) override;
  void GdnGates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, Tensor g,
                Tensor beta) override;
  void GatedDeltaRule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      GdnHeadMapping mapping, SequenceState& state, int layer, const BatchLayout& layout,
                      Tensor out) override;
  void GatedRmsNorm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor out) override;
  void MoeRouting(const Tensor& logits, int top_k, bool normalize, Tensor weights, Tensor ids) override;
  void MoeExperts(const Tensor& x, const Tensor& weights, const Tensor& ids, const ExpertWeights& experts,
                  Tensor out) override;
  // At decode the shared expert runs in the routed experts' kernels (moe_gemv.cu for bf16 and FP8, the
  // MoeMma kernels of moe_quant.cu for the block types) when its shapes and dtype are theirs; else the ops'
  // default.
  void MoeExpertsWithShared(const Tensor& x, const Tensor& weights, const Tensor& ids, const ExpertWeights& experts,
                            const SharedExpert& shared, Tensor out) override;
  void AddSigmoidGated(Tensor acc, const Tensor& x, const Tensor& gate_logit) override;
  void GatherRows(const Tensor& x, const std::vector<int32_t>& rows, Tensor out) override;

  // ---- CUDA only ----
  // Sampling-side reductions over f32 logits [rows, vocab]: greedy picks (draws null: pick.h's
  // PickGreedyRows, -1 for a row with NaN or +inf among its first `sampleable` values, or only -inf) or draws
  // (pick.h's PickRows, with rows packed draws, cuda::DrawRow, in device memory) over the first `sampleable`
  // columns into ids i32 [rows], in launches of kGreedyMaxRows rows; values f32 / ids i32 [rows, k] in
  // descending order (ties to the lower index), k <= 256; out f32 [rows].
  void PickRowsOnDevice(const Tensor& logits, int64_t sampleable, const cuda::DrawRow* draws, Tensor ids);
  void TopKRows(const Tensor& logits, int k, Tensor values, Tensor ids);
  void LogSumExpRows(const Tensor& logits, Tensor out);

  // Queues fn(stream, args...) behind everything queued so far (recorder.h).
  template <typename... P, typename... A>
  void Enqueue(void (*fn)(cudaStream_t, P...), A... args) {
    FlushGemv();
    FlushPending();
    recorder_.Launch(fn, args...);
  }
  // Runs everything queued, without waiting.
  void Submit();
  // Runs everything queued and waits for the device.
  void Synchronize();

  cudaStream_t stream() const { return stream_; }
  const cudaDeviceProp& properties() const { return props_; }
  const CudaOptions& options() const { return options_; }
  const cuda::RecorderStats& recorder_stats() { return recorder_.stats(); }
  // Host time spent in CopyToHost waiting for the device and the copy, ms (the bench's host breakdown).
  double host_wait_ms() const { return host_wait_ms_; }
  cuda::GemmLt& gemm() { return gemm_; }
  size_t weight_bytes() const { return weights_.used_bytes(); }

 private:
  struct ExpertTableEntry {
    cuda::ExpertTable table;
  };
  // The device copy of `layout` for this unit of work (uploaded once per ResetScratch cycle).
  cuda::DeviceLayout Layout(const BatchLayout& layout);
  // A queued copy of host bytes into fresh scratch memory; returns the device address.
  void* Upload(const void* host, size_t bytes);
  // Pinned staging memory for `bytes` of this unit, or nullptr when it is full.
  void* Stage(size_t bytes);
  // The staging buffer of the unit just launched is free again once the unit has run (an event after it).
  void ReleaseStaging();
  // Device memory for one op's intermediate results (grouped expert rows, chunked DeltaNet factors),
  // 256-byte aligned: one buffer that every such op reuses, so long prefills do not keep one copy per
  // layer in the scratch arena. Safe because ops run in stream order and the kernels that use it are
  // plain launches (never programmatic dependents, which could start before their predecessor ends).
  // Growing it waits for queued work and drops cached graphs, which point into the old buffer.
  void* Workspace(size_t bytes);
  // A bf16 weight [rows, k] made for one product (prefill with block-quantized or f16 weights), in the op
  // workspace: valid until the next op that uses the workspace.
  Tensor DenseWeight(int64_t rows, int64_t k);
  void FlushGemv();
  // Whether the pending GEMV group runs on gemv.cu's kernel (bf16 weights, or FP8 as
  // cuda::GemvTakesWeights says), which takes the norm prologue, the residual epilogue and the tails.
  bool PendingGemvFuses() const;
  void JoinGemv(const Tensor& x, const Tensor& w, Tensor out, const cuda::GemvPrologue& pro = {});
  // The pending RMSNorm as the prologue of a bf16 GEMV reading x (and no longer pending), or kGemvXPlain
  // after launching whatever is pending.
  cuda::GemvPrologue TakeGemvPrologue(const Tensor& x);
  // For a quantized product of w (an integer block type) that reads x: whether the held op makes x (the norm,
  // SiLU-and-multiply, the fused decode attention) and can round it to int8 for the product (2 to
  // kQuantGemvWideMaxTokens rows); then launches it so and returns the product's prologue (kGemvXInt8), else a
  // plain one (the held op untouched). block: the tokens of each product launch when x's rows run in groups
  // (cuda::QuantXBytes; the returned prologue is the first group's); 0: all of x in one.
  cuda::GemvPrologue RoundHeldForQuantized(const Tensor& x, const Tensor& w, int64_t block = 0);
  // Whether an RMSNorm of x into out (after out = x + b when b is set) may wait to be fused into the GEMV
  // that reads out (or, up to kQuantGemvWideMaxTokens rows, into the quantized product's rounding of x).
  bool NormFusable(const Tensor& x, const Tensor* b, const Tensor& weight, const Tensor& out) const;
  // Holds out = RmsNorm(a (+ b)) back as Pending::kNorm (with b, a + b also goes to sum).
  void HoldNorm(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& weight, float eps, float w_offset,
                const Tensor& out);
  // Whether out = a + b may become the epilogue of the pending GEMV group, which makes a or b
  // (cuda::GemvResidual).
  bool ResidualFusable(const Tensor& a, const Tensor& b, const Tensor& out) const;
  // Whether out = RmsNorm(x) may join that epilogue: x is the sum it makes (in place allowed).
  bool ResidualNormFusable(const Tensor& x, const Tensor& weight, const Tensor& out) const;
  // The same two for the held experts (Pending::kMoe), whose down kernel makes a or b.
  bool MoeResidualFusable(const Tensor& a, const Tensor& b, const Tensor& out) const;
  bool MoeResidualNormFusable(const Tensor& x, const Tensor& weight, const Tensor& out) const;
  // Launches the op held back for fusion (plain, unfused).
  void FlushPending();
  // The device table of the experts' weight pointers (cached per layer); with `shared`, a table of one more
  // entry, the shared expert (the caller checks that its shapes and dtype are the routed experts').
  const cuda::ExpertTable& ExpertTableFor(const ExpertWeights& experts, const SharedExpert* shared = nullptr);
  // Queues the reordering of an FP8 weight just placed in device memory into the device layout
  // (f8_layout.h) on the stream.
  void ToDeviceLayout(const Tensor& f8);
  // Checks the arguments of MoeExperts (and MoeExpertsWithShared).
  void CheckMoeArgs(const Tensor& x, const Tensor& weights, const Tensor& ids, const Tensor& out) const;

  // An op held back because the next one may fuse with it. Invariant: the pending op and the
  // pending GEMV group are never both non-empty (a residual add held for fusion after a GEMV lives in
  // the group itself, gemv_.res).
  // kNorm: an RMSNorm (after a residual add when pending_b_ is set) whose result may become the prologue
  // of the GEMV that reads it (cuda::GemvPrologue).
  // kGates: Gated DeltaNet gates of a decode step, held for the delta rule that reads them; kDeltaRule: that
  // delta rule with the gates fused in (cuda::GdnDecodeFusion), held for the gated RMSNorm that may follow.
  // kMoe: a decode step's bf16 experts (moe_gemv.cu), held for the residual add and the norm that may follow
  // (its down kernel's epilogue, cuda::GemvResidual).
  // kCombine: split decode attention's combine, held for the output gate's SigmoidMul (gated attention);
  // kAttention: a decode step's fused attention (cuda::DecodeAttentionFusion), held for the same.
  // kSiluMul: SiLU(pending_a_) * pending_b_ into pending_out_ (2 to kQuantGemvWideMaxTokens bf16 rows that no GEMV
  // fused), held for the quantized product that reads it (RoundHeldForQuantized).
  enum class Pending { kNone, kAdd, kHeads, kNorm, kGates, kDeltaRule, kMoe, kCombine, kAttention, kSiluMul };
  struct PendingHead {  // an in-place per-head RMSNorm, maybe followed by RoPE
    Tensor x, w;
    float eps = 0, w_offset = 0;
    bool rope = false;
    cuda::DeviceLayout layout{};
    const float* inv_freq = nullptr;
    int64_t half = 0;
    float rope_scale = 1.0f;
  };

  CudaOptions options_;
  int device_ = 0;  // first: its initialiser checks the device and makes it current
  cudaDeviceProp props_{};
  size_t smem_optin_ = 0;
  cuda::DecodeMmaResidency decode_mma_residency_;  // of the tensor-core decode attention
  cudaStream_t stream_ = nullptr;
  cuda::DeviceArena weights_;
  cuda::DeviceArena scratch_;
  cuda::DeviceBuffer workspace_;
  cuda::PinnedArena staging_[2];
  cudaEvent_t staging_done_[2] = {nullptr, nullptr};
  int staging_current_ = -1;  // staging buffer of the unit being recorded; -1: none chosen yet
  // ReadToHost's destination (logits): page-locked, grown to the largest read so far up to
  // kMaxPinnedReadback (64 rows of Qwen3's vocabulary take 39 MB); larger reads go to pageable memory.
  static constexpr size_t kMaxPinnedReadback = size_t{64} << 20;
  cuda::PinnedBuffer readback_;
  std::vector<float> readback_large_;
  double host_wait_ms_ = 0;  // host_wait_ms()
  // ReplayForward: the forward pass being queued (its shape, its state's serial, the recorder's flushes
  // and key bytes when it asked), and the last one that ran as one graph, which a pass of the same shape,
  // state and queued inputs may launch again (until the scratch arena is rearranged or graphs dropped).
  // Kept per staging buffer (the unit's uploads come from one of the two, whose addresses are part of its
  // key): steps queued while the one before runs alternate between them (pipelined decode).
  struct ForwardUnit {
    int staging = 0;
    uint64_t shape = 0;
    int64_t state = 0;
    int64_t flushes = 0;
    size_t prefix = 0;
    uint64_t hash = 0;        // the unit's key
    uint64_t generation = 0;  // the recorder's, when it ran
    bool verify = false;      // verify_replay: it would have replayed `hash`
  };
  std::optional<ForwardUnit> queuing_forward_, last_forward_[2];
  // QueuePick: the pick recorded with each last_forward_ unit (its logits, sampleable ids, rows, whether it
  // drew, and the unit's key), and the one a replay of such a unit has just made (and copied to pick_feed_),
  // which the pick after the replay takes instead of picking again (the model keeps steps with and without
  // picks, greedy and drawn, a shape apart).
  struct RecordedPick {
    const void* logits = nullptr;
    int64_t sampleable = 0, rows = 0;
    bool drawn = false;
    uint64_t hash = 0;
  };
  std::optional<RecordedPick> last_forward_pick_[2], replayed_pick_;
  // StageDraws: the draws of the pass being queued, in scratch (valid until the next ResetScratch), for its
  // QueuePick.
  const cuda::DrawRow* staged_draws_ = nullptr;
  int64_t staged_draw_rows_ = 0;
  // Pipelined picks (QueuePick): the device copy of the last pick's ids (pick_feed_rows_ of them; 0:
  // none yet), which FeedPickedTokens gathers from; and the picks queued and not yet taken, each copied into
  // a page-locked slot of a small ring, with an event after its copy.
  static constexpr int kPickSlots = 4;
  static constexpr int64_t kPickFeedRows = 4096;  // logit rows of one pick at most
  cuda::DeviceBuffer pick_feed_;
  int64_t pick_feed_rows_ = 0;
  cuda::PinnedBuffer pick_host_[kPickSlots];
  cudaEvent_t pick_done_[kPickSlots] = {};
  struct QueuedPick {
    int slot = 0;
    int64_t rows = 0;
  };
  std::deque<QueuedPick> queued_picks_;  // oldest first
  int next_pick_slot_ = 0;

  int64_t states_made_ = 0;  // serials of the CudaStates made here
  // CopyToHost: the forward pass being queued, if any, ends with this unit.
  void EndForward();
  cuda::GemmLt gemm_;
  cuda::Recorder recorder_;
  cuda::GemvBatch gemv_{};
  // A GEMV whose residual epilogue's norm feeds the pending group (its x): held until that group is
  // launched, which then decides whether the norm is deferred (cuda::GemvResidual::deferred, kGemvXScaled:
  // no block of the held GEMV waits for the others to normalise) or made by the held GEMV's last block.
  // deferred_x_: x times the norm's weight, scratch of the pending group's shape.
  cuda::GemvBatch held_producer_{};
  bool producer_held_ = false;
  void* deferred_x_ = nullptr;
  // Whether the product of x (the pending GEMV's normalised output) and w may start a group with the
  // pending GEMV held (above).
  bool CanHoldProducer(const Tensor& x, const Tensor& w, const cuda::GemvPrologue& pro) const;
  std::optional<BatchLayout> layout_host_;
  cuda::DeviceLayout layout_device_{};
  std::map<const void*, ExpertTableEntry> expert_tables_;
  Pending pending_ = Pending::kNone;
  Tensor pending_a_, pending_b_, pending_out_;  // kAdd: out = a + b; kSiluMul: out = SiLU(a) * b
  // kNorm: out = RmsNorm(a (+ b), norm_w_); with b, a + b is also stored to pending_sum_.
  Tensor pending_sum_, pending_norm_w_;
  float pending_eps_ = 0, pending_w_offset_ = 0;
  std::vector<PendingHead> pending_heads_;      // kHeads: up to 2 (q, k)
  struct PendingGdn {  // kGates: a, b, a_log, dt_bias -> g, beta; kDeltaRule: also the delta rule's launch
    Tensor a, b, a_log, dt_bias, g, beta;
    cuda::DeviceLayout layout{};
    const void *q = nullptr, *k = nullptr, *v = nullptr;
    float* state = nullptr;
    int64_t slot_stride = 0;
    int32_t nk = 0, nv = 0, dk = 0, dv = 0, tiled = 0;
    Tensor out;
  };
  PendingGdn pending_gdn_;
  struct PendingMoe {  // kMoe: LaunchMoeGemv's arguments
    const void* x = nullptr;
    const float* weights = nullptr;
    const int32_t* ids = nullptr;
    const float* shared_logit = nullptr;
    int64_t n = 0;
    int32_t top_k = 0;
    cuda::ExpertTable table{};
    void* act = nullptr;
    Tensor out;
    cuda::GemvResidual res{};
  };
  PendingMoe pending_moe_;
  struct PendingCombine {  // kCombine: LaunchAttentionCombine's arguments
    int32_t n = 0, heads = 0, head_dim = 0, splits = 0;
    const float* ws_o = nullptr;
    const float* ws_ml = nullptr;
    Tensor out;
  };
  PendingCombine pending_combine_;
  struct PendingAttention {  // kAttention: LaunchAttentionDecodeFused's arguments
    cuda::DeviceLayout layout{};
    cuda::KvCacheView kv{};
    int32_t heads = 0, splits = 0;
    float scale = 0;
    float* ws_o = nullptr;
    float* ws_ml = nullptr;
    Tensor out;
    cuda::DecodeAttentionFusion fusion{};
  };
  PendingAttention pending_attention_;
  void LaunchHeldAttention(const void* gate);
  // Holds LaunchMoeGemv (m.res empty) as Pending::kMoe.
  void HoldMoe(const PendingMoe& m);
  // Launches the held delta rule with its gates (and, when norm is set, the gated norm).
  void LaunchHeldDeltaRule(const cuda::GdnDecodeFusion* norm);
  // Zero-initialised ints through which the blocks of a GEMV elect the one that finishes a fused op (left at
  // zero by it): [0] the norm prologue (cuda::GemvPrologue), [1] the norm after the residual epilogue
  // (cuda::GemvResidual), [2] the MoE routing after the router (cuda::GemvRouting); and [3], [4] the
  // decode experts' pair numbers (cuda::LaunchMoeGemv's sync).
  cuda::DeviceBuffer gemv_counter_;
  cuda::GemvTail gemv_tail_{};  // of the pending GEMV group
  // The sums of squares per token and 16-row tile that a GEMV with a residual epilogue leaves for the
  // norm it ends with (cuda::GemvResidual), floats; one buffer: the GEMVs run in stream order.
  static constexpr int64_t kGemvSumsCapacity = int64_t{cuda::kGemvNormMaxTokens} * 4096;
  cuda::DeviceBuffer gemv_sums_;
  // x of a 2-32-token quantized product rounded to int8 by the held op that makes it (cuda::LaunchRmsNormInt8,
  // cuda::LaunchSiluMulInt8, cuda::DecodeAttentionFusion::xq; cuda::kGemvXInt8): codes and group factors of up
  // to kQuantGemvWideMaxTokens rows of kQuantXMaxCols values; one buffer: the op writes it after the product
  // before it has ended, and the product reads it after its wait.
  static constexpr int64_t kQuantXMaxCols = 16384;
  static constexpr int64_t kQuantXBytes = cuda::QuantXBytes<int64_t>(cuda::kQuantGemvWideMaxTokens, kQuantXMaxCols, 16);
  cuda::DeviceBuffer quant_x_;
  // The fused DeltaNet decode's gated norm (cuda::GdnDecodeFusion): sums of squares per (row, column block)
  // and a zero-initialised counter per row.
  cuda::DeviceBuffer gdn_sums_, gdn_counter_;
  // Zero-initialised ints through which the splits of the fused decode attention elect the one that merges
  // them, one per (token, KV head) (cuda::DecodeAttentionFusion).
  cuda::DeviceBuffer attention_counter_;
  // Zero-initialised ints through which the blocks of a row's greedy pick elect the one that combines
  // them, one per row (cuda::LaunchGreedyRows, up to kGreedyMaxRows rows a launch).
  cuda::DeviceBuffer greedy_counter_;
};

}  // namespace infernix
