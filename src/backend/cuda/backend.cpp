// The CUDA backend's memory, queueing and state management (the ops are in backend_ops.cpp).
#include "backend/cuda/backend.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "backend/cuda/check.h"
#include "backend/cuda/layout.h"
#include "backend/cuda/state.h"
#include "base/error.h"
#include "tensor/dummy_blocks.h"

namespace infernix {
namespace {

constexpr size_t kStagingBytes = size_t{4} << 20;
constexpr size_t kStagedCopyMax = size_t{1} << 20;  // larger host copies go synchronously

int SelectDevice(const CudaOptions& options) {
  std::string why = CudaUnavailableReason(options.device);
  if (!why.empty()) ThrowError(ErrorCode::kUnsupported, "--backend cuda: {}", why);
  INFX_CUDA_CHECK(cudaSetDevice(options.device));
  return options.device;
}

cudaDeviceProp Properties(int device) {
  cudaDeviceProp p{};
  INFX_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return p;
}

cudaStream_t NewStream() {
  cudaStream_t s = nullptr;
  INFX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

}  // namespace

std::string CudaUnavailableReason(int device) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return fmt::format("no usable CUDA driver or GPU ({})", cudaGetErrorString(err));
  }
  if (count == 0) return "no CUDA GPU found";
  if (device < 0 || device >= count) return fmt::format("GPU {} does not exist ({} found)", device, count);
  cudaDeviceProp p{};
  err = cudaGetDeviceProperties(&p, device);
  if (err != cudaSuccess) return fmt::format("cannot query GPU {} ({})", device, cudaGetErrorString(err));
  if (p.major < 8)
    return fmt::format("GPU {} ({}) has compute capability {}.{}; the CUDA backend needs 8.0 (Ampere) or newer",
                       device, p.name, p.major, p.minor);
  int previous = 0;
  (void)cudaGetDevice(&previous);
  (void)cudaSetDevice(device);
  err = cuda::ProbeKernelImage();
  (void)cudaSetDevice(previous);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return fmt::format("this build has no kernels for GPU {} ({}, sm_{}{}; built for {}): rebuild with "
                       "-DINFERNIX_CUDA_ARCHITECTURES={}{}",
                       device, p.name, p.major, p.minor, INFERNIX_CUDA_ARCHS, p.major, p.minor);
  }
  return "";
}

std::unique_ptr<Backend> CreateCudaBackend(const CudaOptions& options) { return std::make_unique<CudaBackend>(options); }

CudaBackend::CudaBackend(const CudaOptions& options)
    : options_(options),
      device_(SelectDevice(options)),
      props_(Properties(device_)),
      stream_(NewStream()),
      weights_("model weights", size_t{64} << 20, size_t{1} << 30),
      scratch_("activations", size_t{32} << 20, size_t{1} << 30),
      staging_{cuda::PinnedArena(kStagingBytes), cuda::PinnedArena(kStagingBytes)},
      recorder_(stream_, options.graphs) {
  int optin = 0;
  INFX_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device_));
  smem_optin_ = static_cast<size_t>(optin);
  cuda::ConfigureAttentionKernels(smem_optin_);
  decode_mma_residency_ = cuda::AttentionDecodeMmaResidency();
  cuda::ConfigureQuantGemvMma(smem_optin_);
  cuda::ConfigureQuantMoeMma(smem_optin_);
  cuda::ConfigureMoeGrouped(smem_optin_);
  cuda::ConfigureGdnKernels(smem_optin_);
  cuda::ConfigureGemv(smem_optin_);
  gemv_counter_ = cuda::DeviceBuffer(5 * sizeof(int32_t), "GEMV block counters");
  INFX_CUDA_CHECK(cudaMemset(gemv_counter_.data(), 0, gemv_counter_.size_bytes()));
  gemv_sums_ = cuda::DeviceBuffer(kGemvSumsCapacity * sizeof(float), "GEMV sums of squares");
  quant_x_ = cuda::DeviceBuffer(static_cast<size_t>(kQuantXBytes), "int8 rows of quantized products");
  greedy_counter_ = cuda::DeviceBuffer(cuda::kGreedyMaxRows * sizeof(int32_t), "greedy pick counters");
  INFX_CUDA_CHECK(cudaMemset(greedy_counter_.data(), 0, greedy_counter_.size_bytes()));
  gdn_sums_ = cuda::DeviceBuffer(cuda::kGdnFusedMaxRows * 32 * sizeof(float), "DeltaNet norm sums");
  gdn_counter_ = cuda::DeviceBuffer(cuda::kGdnFusedMaxRows * sizeof(int32_t), "DeltaNet norm counters");
  INFX_CUDA_CHECK(cudaMemset(gdn_counter_.data(), 0, gdn_counter_.size_bytes()));
  attention_counter_ =
      cuda::DeviceBuffer(cuda::kAttentionFusedMaxCounters * sizeof(int32_t), "decode attention split counters");
  INFX_CUDA_CHECK(cudaMemset(attention_counter_.data(), 0, attention_counter_.size_bytes()));
  for (auto& e : staging_done_) INFX_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  pick_feed_ = cuda::DeviceBuffer(kPickFeedRows * sizeof(int32_t), "greedy picks");
  for (auto& b : pick_host_) b = cuda::PinnedBuffer(kPickFeedRows * sizeof(int32_t));
  for (auto& e : pick_done_) INFX_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

CudaBackend::~CudaBackend() {
  Submit();
  INFX_CUDA_CHECK(cudaStreamSynchronize(stream_));
  for (auto& e : staging_done_) INFX_CUDA_CHECK(cudaEventDestroy(e));
  for (auto& e : pick_done_) INFX_CUDA_CHECK(cudaEventDestroy(e));
  INFX_CUDA_CHECK(cudaStreamDestroy(stream_));
}

bool CudaBackend::PendingGemvFuses() const {
  return gemv_.n_segments > 0 && cuda::GemvTakesWeights(gemv_.w_type, gemv_.n, gemv_.k);
}

void CudaBackend::FlushGemv() {
  if (producer_held_) {  // launched first; its norm deferred if the group's kernel can finish it
    producer_held_ = false;
    cuda::GemvBatch producer = held_producer_;
    const cuda::GemvResidual& r = producer.res;
    cuda::GemvBatch consumer = gemv_;
    cuda::GemvPrologue& pro = consumer.pro;
    pro.kind = cuda::kGemvXScaled;
    pro.a = r.out;
    pro.w = r.w;
    pro.w_dtype = r.w_dtype;
    pro.w_offset = r.w_offset;
    pro.eps = r.eps;
    pro.out = r.norm_out;
    pro.ss = r.ss;
    pro.ss_tiles = static_cast<int32_t>((producer.seg[0].rows + 15) / 16);
    consumer.x = deferred_x_;
    // One token only: at 8 (Qwen3-8B, H200) the deferred norm made decode steps 2.7% slower, while at one
    // it took 1.5% off the step span (docs/performance.md, seventeenth session).
    // (Not with a residual epilogue of its own: the producer's sums of squares, which its blocks copy after
    // the wait, are in the buffer that epilogue's would write, and it could write the hidden rows they read.)
    if (gemv_.n_segments > 0 && gemv_.x == r.norm_out && PendingGemvFuses() && gemv_.n == producer.n &&
        producer.n == 1 && gemv_.pro.kind == cuda::kGemvXPlain && gemv_tail_.route.ids == nullptr &&
        gemv_tail_.conv.out == nullptr && gemv_.res.out == nullptr && cuda::GemvXScaledFits(consumer)) {
      producer.res.deferred = deferred_x_;
      gemv_ = consumer;
    }
    recorder_.Launch(cuda::LaunchGemv, producer);
  }
  if (gemv_.n_segments == 0) return;
  if (PendingGemvFuses()) {
    if (gemv_tail_.route.ids != nullptr || gemv_tail_.conv.out != nullptr) {
      recorder_.Launch(cuda::LaunchGemvWithTail, gemv_, gemv_tail_);
    } else {
      recorder_.Launch(cuda::LaunchGemv, gemv_);
    }
  } else {
    recorder_.Launch(cuda::LaunchQuantGemvMma, gemv_, smem_optin_);
  }
  gemv_ = cuda::GemvBatch{};
  gemv_tail_ = cuda::GemvTail{};
}

void CudaBackend::FlushPending() {
  const Pending kind = pending_;
  pending_ = Pending::kNone;
  switch (kind) {
    case Pending::kNone: break;
    case Pending::kAdd:
      recorder_.Launch(cuda::LaunchBinary, static_cast<int>(cuda::kOpAdd), static_cast<int>(pending_out_.dtype),
                       pending_a_.data, pending_b_.data, pending_out_.data, pending_out_.numel());
      break;
    case Pending::kHeads:
      for (const PendingHead& h : pending_heads_) {
        recorder_.Launch(cuda::LaunchRmsNorm, static_cast<int>(h.x.dtype), h.x.data, h.w.data,
                         static_cast<int>(h.w.dtype), h.eps, h.w_offset, h.x.data, h.x.rows(), h.x.cols());
        if (h.rope) {
          const int64_t d = h.x.cols(), rows = h.x.rows(), n = h.layout.n_tokens;
          recorder_.Launch(cuda::LaunchRope, static_cast<int>(h.x.dtype), h.x.data, h.layout.token_pos, n,
                           rows / n, d, h.inv_freq, h.half, h.rope_scale);
        }
      }
      pending_heads_.clear();
      break;
    case Pending::kGates: {
      const PendingGdn& p = pending_gdn_;
      recorder_.Launch(cuda::LaunchGdnGates, static_cast<const void*>(p.a.data), static_cast<const void*>(p.b.data),
                       static_cast<const void*>(p.a_log.data), static_cast<int>(p.a_log.dtype),
                       static_cast<const void*>(p.dt_bias.data), static_cast<int>(p.dt_bias.dtype), p.g.as<float>(),
                       p.beta.as<float>(), p.a.rows(), p.a.cols());
      break;
    }
    case Pending::kDeltaRule: LaunchHeldDeltaRule(nullptr); break;
    case Pending::kCombine: {
      const PendingCombine& c = pending_combine_;
      recorder_.Launch(cuda::LaunchAttentionCombine, c.n, c.heads, c.head_dim, c.splits, c.ws_o, c.ws_ml,
                       static_cast<const void*>(nullptr), c.out.data);
      break;
    }
    case Pending::kAttention: LaunchHeldAttention(nullptr); break;
    case Pending::kMoe: {
      const PendingMoe& m = pending_moe_;
      recorder_.Launch(cuda::LaunchMoeGemv, m.x, m.weights, m.ids, m.shared_logit, m.n, m.top_k, m.table, m.act,
                       m.out.data, m.res, static_cast<int32_t*>(gemv_counter_.data()) + 3);
      break;
    }
    case Pending::kNorm:
      if (pending_b_.data != nullptr) {
        recorder_.Launch(cuda::LaunchAddRmsNorm, static_cast<int>(pending_out_.dtype), pending_a_.data, pending_b_.data,
                         pending_sum_.data, pending_norm_w_.data, static_cast<int>(pending_norm_w_.dtype), pending_eps_,
                         pending_w_offset_, pending_out_.data, pending_out_.rows(), pending_out_.cols());
      } else {
        recorder_.Launch(cuda::LaunchRmsNorm, static_cast<int>(pending_out_.dtype), pending_a_.data,
                         pending_norm_w_.data, static_cast<int>(pending_norm_w_.dtype), pending_eps_, pending_w_offset_,
                         pending_out_.data, pending_out_.rows(), pending_out_.cols());
      }
      break;
    case Pending::kSiluMul:
      recorder_.Launch(cuda::LaunchBinary, static_cast<int>(cuda::kOpSiluMul), static_cast<int>(pending_out_.dtype),
                       pending_a_.data, pending_b_.data, pending_out_.data, pending_out_.numel());
      break;
  }
}

void CudaBackend::HoldMoe(const PendingMoe& m) {
  FlushGemv();
  FlushPending();
  pending_moe_ = m;
  pending_moe_.res = cuda::GemvResidual{};
  pending_ = Pending::kMoe;
  if (!options_.fuse) FlushPending();  // nothing joins it
}

void CudaBackend::LaunchHeldDeltaRule(const cuda::GdnDecodeFusion* norm) {
  const PendingGdn& p = pending_gdn_;
  cuda::GdnDecodeFusion f = norm != nullptr ? *norm : cuda::GdnDecodeFusion{};
  f.a = p.a.data;
  f.b = p.b.data;
  f.a_log = p.a_log.data;
  f.a_log_dtype = static_cast<int32_t>(p.a_log.dtype);
  f.dt_bias = p.dt_bias.data;
  f.dt_bias_dtype = static_cast<int32_t>(p.dt_bias.dtype);
  f.g = p.g.as<float>();
  f.beta = p.beta.as<float>();
  pending_ = Pending::kNone;
  recorder_.Launch(cuda::LaunchGatedDeltaRuleDecode, p.layout, p.q, p.k, p.v, p.state, p.slot_stride, p.nk, p.nv, p.dk,
                   p.dv, p.tiled, f, p.out.data);
}

cuda::GemvPrologue CudaBackend::TakeGemvPrologue(const Tensor& x) {
  cuda::GemvPrologue pro{};
  if (pending_ != Pending::kNorm || pending_out_.data != x.data || pending_out_.numel() != x.numel() ||
      x.rows() > cuda::kGemvNormMaxTokens) {
    FlushPending();
    return pro;
  }
  pro.kind = cuda::kGemvXNorm;
  pro.a = pending_a_.data;
  pro.b = pending_b_.data;
  pro.out = pending_out_.data;
  pro.sum = pending_sum_.data;
  pro.w = pending_norm_w_.data;
  pro.w_dtype = static_cast<int32_t>(pending_norm_w_.dtype);
  pro.eps = pending_eps_;
  pro.w_offset = pending_w_offset_;
  pro.counter = static_cast<int32_t*>(gemv_counter_.data());
  pending_ = Pending::kNone;
  return pro;
}

cuda::GemvPrologue CudaBackend::RoundHeldForQuantized(const Tensor& x, const Tensor& w, int64_t block) {
  cuda::GemvPrologue pro{};
  const int64_t n = x.rows(), k = x.cols();
  if (block <= 0) block = n;
  const int group = cuda::QuantGroupValues(static_cast<int>(w.dtype));  // 16 or 32: FP8 returns below
  if (!options_.fuse || x.dtype != DType::kBF16 || n < 2 || n > cuda::kQuantGemvWideMaxTokens || k > kQuantXMaxCols ||
      w.dtype == DType::kF8E4M3B128)
    return pro;
  PendingAttention& a = pending_attention_;
  if (pending_ == Pending::kAttention && a.out.data == x.data && a.out.numel() == x.numel() &&
      a.layout.n_tokens == n && a.fusion.gate == nullptr && cuda::AttentionDecodeRoundsOutput(a.kv.head_dim, a.heads)) {
    a.fusion.xq = quant_x_.data();  // the held attention rounds its output rows as it writes them
    a.fusion.xq_group = group;
    a.fusion.xq_block = static_cast<int32_t>(block);
    FlushGemv();
    LaunchHeldAttention(nullptr);
    pro.kind = cuda::kGemvXInt8;
    pro.a = quant_x_.data();
    return pro;
  }
  const bool norm = pending_ == Pending::kNorm, silu = pending_ == Pending::kSiluMul;
  const void* b = pending_b_.data;
  if (!(norm || silu) || pending_out_.data != x.data || pending_out_.rows() != n || pending_out_.numel() != x.numel())
    return pro;
  if (norm && !cuda::RmsNormInt8Fits(pending_a_.data, b, b != nullptr ? pending_sum_.data : nullptr,
                                     pending_norm_w_.data, static_cast<int>(pending_norm_w_.dtype), pending_out_.data,
                                     n, k))
    return pro;
  if (silu && !cuda::SiluMulInt8Fits(pending_a_.data, b, pending_out_.data, n, k)) return pro;
  FlushGemv();  // (none is pending while an op is held; kept in order all the same)
  pending_ = Pending::kNone;
  if (norm) {
    recorder_.Launch(cuda::LaunchRmsNormInt8, static_cast<const void*>(pending_a_.data), b,
                     b != nullptr ? pending_sum_.data : nullptr, static_cast<const void*>(pending_norm_w_.data),
                     static_cast<int>(pending_norm_w_.dtype), pending_eps_, pending_w_offset_, pending_out_.data, n, k,
                     group, block, quant_x_.data());
  } else {
    recorder_.Launch(cuda::LaunchSiluMulInt8, static_cast<const void*>(pending_a_.data), b, pending_out_.data, n, k,
                     group, block, quant_x_.data());
  }
  pro.kind = cuda::kGemvXInt8;
  pro.a = quant_x_.data();
  return pro;
}

void CudaBackend::Submit() {
  FlushGemv();
  FlushPending();
  recorder_.Flush();
  ReleaseStaging();
}

void CudaBackend::ReleaseStaging() {
  if (staging_current_ < 0) return;
  INFX_CUDA_CHECK(cudaEventRecord(staging_done_[staging_current_], stream_));
  staging_current_ = -1;
}

void CudaBackend::Synchronize() {
  Submit();
  INFX_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void* CudaBackend::Workspace(size_t bytes) {
  if (bytes > workspace_.size_bytes()) {
    Synchronize();
    recorder_.ClearGraphs();
    workspace_ = cuda::DeviceBuffer();  // free the old buffer before allocating the larger one
    workspace_ = cuda::DeviceBuffer(bytes + bytes / 4, "op workspace");
  }
  return workspace_.data();
}

void* CudaBackend::Stage(size_t bytes) {
  if (staging_current_ < 0) {
    // A buffer whose last unit has finished (staging 0 whenever possible, so graphs see one address).
    int pick = 0;
    if (cudaEventQuery(staging_done_[0]) != cudaSuccess) {
      pick = cudaEventQuery(staging_done_[1]) == cudaSuccess ? 1 : 0;
      (void)cudaGetLastError();
      INFX_CUDA_CHECK(cudaEventSynchronize(staging_done_[pick]));
    }
    staging_current_ = pick;
    staging_[pick].Reset();
  }
  return staging_[staging_current_].Allocate(bytes);
}

void* CudaBackend::Upload(const void* host, size_t bytes) {
  void* dst = scratch_.Allocate(bytes);
  void* staged = bytes <= kStagedCopyMax ? Stage(bytes) : nullptr;
  if (staged != nullptr) {
    std::memcpy(staged, host, bytes);
    // Into fresh memory: no queued or held-back op depends on it, so nothing needs flushing first.
    recorder_.Launch(cuda::LaunchMemcpy, dst, static_cast<const void*>(staged), bytes);
  } else {
    Submit();
    INFX_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_));
    INFX_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  return dst;
}

Tensor CudaBackend::UploadWeight(const Tensor& host) {
  const bool is_float = host.dtype == DType::kF32 || host.dtype == DType::kF16 || host.dtype == DType::kBF16;
  if (!is_float && !(IsBlockQuantized(host.dtype) && cuda::QuantTypeSupported(static_cast<int>(host.dtype))))
    ThrowError(ErrorCode::kUnsupported,
               "the CUDA backend has no kernels for {} weights (it takes f32, f16, bf16, the GGUF block types and "
               "f8_e4m3_b128; use --backend cpu)",
               DTypeName(host.dtype));
  size_t bytes = host.size_bytes();
  void* dst = weights_.Allocate(bytes);
  const Tensor placed{dst, host.dtype, host.shape};
  // On the backend's stream, which does not wait for the legacy default one: a plain cudaMemcpy from
  // pageable memory may return before its data has reached the device, and a kernel on this stream (the
  // FP8 reordering below, or the first product) could then read it half written.
  Submit();
  INFX_CUDA_CHECK(cudaMemcpyAsync(dst, host.data, bytes, cudaMemcpyHostToDevice, stream_));
  if (host.dtype == DType::kF8E4M3B128) ToDeviceLayout(placed);
  INFX_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return placed;
}

void CudaBackend::ToDeviceLayout(const Tensor& f8) {
  const int64_t k = f8.shape[f8.shape.ndim - 1];
  cuda::LaunchF8ToDeviceRows(stream_, f8.data, f8.shape.numel() / k, k);
}

std::optional<Tensor> CudaBackend::MakeDummyWeight(DType dtype, const Shape& shape, uint64_t seed, float scale) {
  const bool block = IsBlockQuantized(dtype) && cuda::QuantTypeSupported(static_cast<int>(dtype)) && shape.ndim == 2 &&
                     shape[1] % DTypeBlockSize(dtype) == 0;
  if (dtype != DType::kBF16 && !block) return std::nullopt;
  const int64_t n = shape.numel();
  const size_t bytes =
      block ? static_cast<size_t>(n / DTypeBlockSize(dtype)) * DTypeBlockBytes(dtype) : static_cast<size_t>(n) * 2;
  void* dst = weights_.Allocate(bytes);
  Submit();
  if (block) {
    const DummyBlockScheme b = DummyBlockSchemeOf(dtype, scale);
    cuda::LaunchDummyBlocks(stream_, dst, bytes, DTypeBlockBytes(dtype), seed,
                            cuda::DummyBlockFields{b.fp8 ? 1 : 0, b.d_at, b.min_at, b.d});
  } else {
    cuda::LaunchDummyBf16(stream_, dst, n, seed, scale);
  }
  // Done before returning, as UploadWeight's copy is: loading may read or copy a weight outside the stream.
  if (dtype == DType::kF8E4M3B128) ToDeviceLayout(Tensor{dst, dtype, shape});
  INFX_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return Tensor{dst, dtype, shape};
}

Tensor CudaBackend::Scratch(DType dtype, Shape shape) {
  return Tensor{scratch_.Allocate(static_cast<size_t>(shape.numel()) * DTypeSize(dtype)), dtype, shape};
}

void CudaBackend::ResetScratch() {
  Submit();
  queuing_forward_.reset();
  staged_draws_ = nullptr;
  // Reset may replace the arena's chunks by one larger chunk: nothing queued may still use them, and a
  // pass replayed later would not find its activations where its graph has them.
  if (scratch_.WillConsolidate()) {
    INFX_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (auto& f : last_forward_) f.reset();
  }
  scratch_.Reset();
  layout_host_.reset();
}

void CudaBackend::CopyToBackend(const void* host, Tensor dst) {
  size_t bytes = dst.size_bytes();
  void* staged = bytes <= kStagedCopyMax ? Stage(bytes) : nullptr;
  if (staged != nullptr) {
    std::memcpy(staged, host, bytes);
    Enqueue(cuda::LaunchMemcpy, dst.data, staged, bytes);
    return;
  }
  Submit();
  INFX_CUDA_CHECK(cudaMemcpyAsync(dst.data, host, bytes, cudaMemcpyHostToDevice, stream_));
  INFX_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::CopyToHost(const Tensor& src, void* host) {
  Submit();
  EndForward();
  const auto t0 = std::chrono::steady_clock::now();
  INFX_CUDA_CHECK(cudaMemcpyAsync(host, src.data, src.size_bytes(), cudaMemcpyDeviceToHost, stream_));
  INFX_CUDA_CHECK(cudaStreamSynchronize(stream_));
  host_wait_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::span<float> CudaBackend::ReadToHost(const Tensor& src) {
  INFX_CHECK(src.dtype == DType::kF32);
  const size_t bytes = src.size_bytes();
  constexpr size_t kMiB = size_t{1} << 20;
  float* host = nullptr;
  if (bytes <= kMaxPinnedReadback) {
    // Every read waits for its copy, so the old buffer is free to go.
    if (readback_.size_bytes() < bytes) readback_ = cuda::PinnedBuffer((bytes + kMiB - 1) / kMiB * kMiB);
    host = static_cast<float*>(readback_.data());
  } else {  // e.g. every row of a long prompt's logits: not worth pinning
    readback_large_.resize(static_cast<size_t>(src.numel()));
    host = readback_large_.data();
  }
  CopyToHost(src, host);
  return {host, static_cast<size_t>(src.numel())};
}

std::unique_ptr<SequenceState> CudaBackend::CreateState(const StateSpec& spec) {
  return std::make_unique<CudaState>(spec, *this, ++states_made_);
}

bool CudaBackend::ReplayForward(uint64_t shape, bool known, const BatchLayout& layout, SequenceState& state) {
  const CudaState& st = AsCudaState(state, this);
  queuing_forward_.reset();
  replayed_pick_.reset();
  if (!options_.replay_steps || !options_.graphs) return false;
  Layout(layout);  // queued now, as the first op that needs it would (every pass then starts the same way)
  ForwardUnit f{std::max(staging_current_, 0), shape, st.serial(), recorder_.flushes(), recorder_.queued_key_bytes()};
  FlushGemv();
  FlushPending();
  const std::optional<ForwardUnit>& last = last_forward_[f.staging];
  const bool same = known && last && last->shape == shape && last->state == f.state && last->prefix == f.prefix &&
                    last->generation == recorder_.generation() && recorder_.CachedWithPrefix(last->hash);
  if (same && !options_.verify_replay) {
    recorder_.ReplayWithPrefix(last->hash);
    ReleaseStaging();
    const std::optional<RecordedPick>& pick = last_forward_pick_[f.staging];
    if (pick && pick->hash == last->hash) replayed_pick_ = pick;
    return true;
  }
  f.verify = same;  // verify_replay: the ops about to be queued must make that unit
  f.hash = same ? last->hash : 0;
  queuing_forward_ = f;
  return false;
}

void CudaBackend::EndForward() {
  if (!queuing_forward_) return;
  ForwardUnit f = *queuing_forward_;
  queuing_forward_.reset();
  const cuda::Recorder::LastUnit& unit = recorder_.last_unit();
  // One unit from the pass's first command to its logits: the pass may be replayed.
  const bool one_unit = recorder_.flushes() == f.flushes + 1;
  if (f.verify)
    INFX_CHECK_MSG(one_unit && unit.graph && unit.hash == f.hash,
                   "a replayed forward pass would have launched another unit than its ops make (shape {:#x})", f.shape);
  if (one_unit && unit.graph) {
    f.hash = unit.hash;
    f.generation = recorder_.generation();
    last_forward_[f.staging] = f;
  } else {
    last_forward_[f.staging].reset();
  }
}

cuda::DeviceLayout CudaBackend::Layout(const BatchLayout& layout) {
  if (layout_host_ && cuda::SameLayout(*layout_host_, layout)) return layout_device_;
  cuda::HostLayout flat = cuda::FlattenLayout(layout);
  auto* data = static_cast<const int32_t*>(Upload(flat.data.data(), flat.data.size() * sizeof(int32_t)));
  layout_device_ = cuda::PlaceLayout(flat, data);
  layout_host_ = layout;
  return layout_device_;
}

const cuda::ExpertTable& CudaBackend::ExpertTableFor(const ExpertWeights& experts, const SharedExpert* shared) {
  INFX_CHECK(!experts.gate.empty() && experts.gate.size() == experts.up.size() &&
             experts.gate.size() == experts.down.size());
  // A layer's shared expert is its own key (the table holds it as one more entry).
  const void* key = shared != nullptr ? shared->gate.data : experts.gate[0].data;
  auto it = expert_tables_.find(key);
  if (it != expert_tables_.end()) return it->second.table;
  const size_t n = experts.gate.size(), entries = n + (shared != nullptr ? 1 : 0);
  const Tensor& g0 = experts.gate[0];
  if (IsBlockQuantized(g0.dtype) && !cuda::QuantTypeSupported(static_cast<int>(g0.dtype)))
    ThrowError(ErrorCode::kUnsupported, "the CUDA backend has no kernels for {} expert weights yet (use --backend cpu)",
               DTypeName(g0.dtype));
  std::vector<const void*> ptrs(3 * entries);
  for (size_t e = 0; e < entries; ++e) {
    const bool routed = e < n;
    const Tensor& g = routed ? experts.gate[e] : shared->gate;
    const Tensor& u = routed ? experts.up[e] : shared->up;
    const Tensor& d = routed ? experts.down[e] : shared->down;
    INFX_CHECK_MSG(g.shape == g0.shape && u.shape == g0.shape && d.rows() == g0.cols() && d.cols() == g0.rows() &&
                       g.dtype == g0.dtype && u.dtype == g0.dtype && d.dtype == g0.dtype,
                   "expert {}: gate {} up {} down {}", e, g.Describe(), u.Describe(), d.Describe());
    ptrs[e] = g.data;
    ptrs[entries + e] = u.data;
    ptrs[2 * entries + e] = d.data;
  }
  void* table = weights_.Allocate(ptrs.size() * sizeof(void*));
  // A plain cudaMemcpy from pageable memory need not have landed when it returns, and the backend's stream
  // does not wait for the default one: wait for that. (Not through the stream: this runs while the step's
  // ops are being queued, and flushing them here would split the step's graph.)
  INFX_CUDA_CHECK(cudaMemcpy(table, ptrs.data(), ptrs.size() * sizeof(void*), cudaMemcpyHostToDevice));
  INFX_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  cuda::ExpertTable t;
  auto* base = static_cast<const void* const*>(table);
  t.gate = base;
  t.up = base + entries;
  t.down = base + 2 * entries;
  t.dtype = static_cast<int32_t>(g0.dtype);
  t.n_experts = static_cast<int32_t>(n);
  t.inter = g0.rows();
  t.hidden = g0.cols();
  t.aligned16 = std::all_of(ptrs.begin(), ptrs.end(),
                            [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; })
                    ? 1
                    : 0;
  t.shared = shared != nullptr ? 1 : 0;
  return expert_tables_.emplace(key, ExpertTableEntry{t}).first->second.table;
}

}  // namespace infernix
