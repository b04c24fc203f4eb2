// Gated DeltaNet: the causal depthwise conv1d with its rolling state, the gates, and the gated delta
// rule in recurrent form. Simple, exact-order kernels: a thread per channel for the conv (its window in
// registers), a block per (sequence, value head, 32 state columns) for the delta rule with the
// f32 state S [dk, dv] in registers. Those serve decode; for long sequences the conv runs a thread
// per (kConvTokens tokens, channel) in parallel, and the delta rule runs chunked (gdn_chunked.cu).
//
// The parallel conv: output i of a sequence is SiLU(sum_j w[j] * win[i + j]) over the window
// win = [old state (kernel - 1 values, oldest first) | x of the sequence], so each thread reads its
// slice of win straight from the state and x. The new state, win[n .. n + kernel - 2], is written by a
// second kernel once every output has read the old one (stream order); it reads the old state itself
// when the sequence is shorter than the window.
#include <cmath>

#include "backend/cuda/device_util.cuh"

namespace infernix::cuda {
namespace {

constexpr int kMaxConvKernel = 8;
constexpr int kConvTokens = 8;   // outputs per thread of the parallel conv (its window slice in registers)
constexpr int kMaxKeyDim = 128;  // register-resident state columns; larger dk uses the global-memory kernel

template <typename T>
__global__ void CausalConv1dKernel(DeviceLayout layout, const T* x, const void* w, int w_dtype, float* state,
                                   int64_t slot_stride, int channels, int kernel, T* out) {
  AllowDependentLaunch();
  WaitForPrevious();
  const int seq = blockIdx.x;
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const int slot = layout.seq_info[seq * 4], tb = layout.seq_info[seq * 4 + 1], n = layout.seq_info[seq * 4 + 2];
  const int keep = kernel - 1;
  float* st = state + slot * slot_stride;  // [keep, channels], oldest first
  float win[kMaxConvKernel], wc[kMaxConvKernel];
#pragma unroll
  for (int j = 0; j < kMaxConvKernel; ++j) {
    win[j] = j < keep ? st[static_cast<int64_t>(j) * channels + c] : 0.0f;
    wc[j] = j < kernel ? LoadF(w, w_dtype, static_cast<int64_t>(c) * kernel + j) : 0.0f;
  }
  for (int i = 0; i < n; ++i) {
    const int64_t idx = static_cast<int64_t>(tb + i) * channels + c;
    const float xv = ToF(x[idx]);
    float acc = 0;
#pragma unroll
    for (int j = 0; j < kMaxConvKernel; ++j) {
      if (j < keep) acc += wc[j] * win[j];
      if (j == keep) acc += wc[j] * xv;
    }
    out[idx] = FromF<T>(SiluF(acc));
#pragma unroll
    for (int j = 0; j < kMaxConvKernel - 1; ++j)
      if (j < keep - 1) win[j] = win[j + 1];
#pragma unroll
    for (int j = 0; j < kMaxConvKernel; ++j)
      if (j == keep - 1) win[j] = xv;
  }
#pragma unroll
  for (int j = 0; j < kMaxConvKernel; ++j)
    if (j < keep) st[static_cast<int64_t>(j) * channels + c] = win[j];
}

// Grid (token groups of kConvTokens, channel blocks, sequences): outputs only; the state is read, not written.
template <typename T>
__global__ void CausalConv1dParallelKernel(DeviceLayout layout, const T* x, const void* w, int w_dtype,
                                           const float* state, int64_t slot_stride, int channels, int kernel, T* out) {
  const int seq = blockIdx.z;
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  const int slot = layout.seq_info[seq * 4], tb = layout.seq_info[seq * 4 + 1], n = layout.seq_info[seq * 4 + 2];
  const int i0 = blockIdx.x * kConvTokens;
  if (c >= channels || i0 >= n) return;
  const int keep = kernel - 1;
  const float* st = state + slot * slot_stride;  // [keep, channels], oldest first
  float wc[kMaxConvKernel];
#pragma unroll
  for (int j = 0; j < kMaxConvKernel; ++j)
    wc[j] = j < kernel ? LoadF(w, w_dtype, static_cast<int64_t>(c) * kernel + j) : 0.0f;
  // win[m] = window position i0 + m: the old state below keep, then x; zeros past the sequence.
  float win[kMaxConvKernel - 1 + kConvTokens];
#pragma unroll
  for (int m = 0; m < kMaxConvKernel - 1 + kConvTokens; ++m) {
    const int p = i0 + m;
    float val = 0.0f;
    if (m < keep + kConvTokens) {
      if (p < keep) {
        val = st[static_cast<int64_t>(p) * channels + c];
      } else if (p - keep < n) {
        val = ToF(x[static_cast<int64_t>(tb + p - keep) * channels + c]);
      }
    }
    win[m] = val;
  }
#pragma unroll
  for (int t = 0; t < kConvTokens; ++t) {
    if (i0 + t >= n) break;
    float acc = 0;
#pragma unroll
    for (int j = 0; j < kMaxConvKernel; ++j)
      if (j < kernel) acc += wc[j] * win[t + j];
    out[static_cast<int64_t>(tb + i0 + t) * channels + c] = FromF<T>(SiluF(acc));
  }
}

// Grid (channel blocks, sequences): state = win[n .. n + keep - 1], in ascending order, so that an old
// value (position n + j > j) is read before its slot is overwritten.
template <typename T>
__global__ void CausalConv1dSaveKernel(DeviceLayout layout, const T* x, float* state, int64_t slot_stride, int channels,
                                       int kernel) {
  const int seq = blockIdx.y;
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const int slot = layout.seq_info[seq * 4], tb = layout.seq_info[seq * 4 + 1], n = layout.seq_info[seq * 4 + 2];
  const int keep = kernel - 1;
  float* st = state + slot * slot_stride;
  for (int j = 0; j < keep; ++j) {
    const int p = n + j;
    const float val = p < keep ? st[static_cast<int64_t>(p) * channels + c]
                               : ToF(x[static_cast<int64_t>(tb + p - keep) * channels + c]);
    st[static_cast<int64_t>(j) * channels + c] = val;
  }
}

template <typename T>
__global__ void GdnGatesKernel(const T* a, const T* b, const void* a_log, int a_log_dtype, const void* dt_bias,
                               int dt_bias_dtype, float* g, float* beta, int64_t n, int64_t nv) {
  AllowDependentLaunch();
  WaitForPrevious();
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * nv) return;
  int64_t h = i % nv;
  float x = ToF(a[i]) + LoadF(dt_bias, dt_bias_dtype, h);
  float softplus = x > 20.0f ? x : log1pf(expf(x));  // torch's softplus, threshold 20
  g[i] = -expf(LoadF(a_log, a_log_dtype, h)) * softplus;
  beta[i] = SigmoidF(ToF(b[i]));
}

// One block per (sequence, value head, kRuleCols state columns): warp w holds rows
// [w * kRuleRows, (w + 1) * kRuleRows) of those columns of S [dk, dv] in registers (dk <= kMaxKeyDim),
// so a decode step reads and writes the f32 state once, spread over n_seqs * nv * dv / 32 blocks.
// The two dot products over dk (S^T k and S^T q) are summed across the warps through shared memory.
// kFused (decode, one token per sequence: GdnDecodeFusion): the block computes its head's gates from a
// and b itself (and the first column block stores them), and with f.norm_out the gated RMSNorm of the
// head's dv outputs follows: every block leaves the sum of squares of its columns' outputs (as stored, in
// T); the last of the head's column blocks to finish, elected through a counter per (sequence, head),
// adds them in column order and writes the head's normalised outputs.
constexpr int kRuleCols = 32;
constexpr int kRuleParts = 4;
constexpr int kRuleRows = kMaxKeyDim / kRuleParts;
static_assert(32 * kRuleParts >= kMaxKeyDim, "a thread loads one value of q and of k");

template <typename T>
__device__ void FinishGatedNorm(const GdnDecodeFusion& f, int64_t row, int dv, int col_blocks, int cb, float sq,
                                const T* core) {
  // What the last block needs that no other block writes, loaded before the election: the gate z and the
  // norm weight of column threadIdx.x (the first blockDim.x columns; the rest in the loop below).
  const auto* core_bits = reinterpret_cast<const unsigned short*>(core + row * dv);
  const T* z = static_cast<const T*>(f.z) + row * dv;
  const int c0 = static_cast<int>(threadIdx.x);
  const float z0 = c0 < dv ? ToF(z[c0]) : 0.0f;
  const float w0 = c0 < dv ? LoadF(f.norm_w, f.norm_w_dtype, c0) : 0.0f;
  if (threadIdx.x < 32) {  // warp 0 holds the block's outputs
    sq = WarpSum(sq);
    if (threadIdx.x == 0) f.ss[row * col_blocks + cb] = sq;
  }
  // After the block's outputs and sum (the blocks of one row count themselves in on its own counter).
  if (!LastBlockToArrive(f.counter + row, col_blocks)) return;
  // The other blocks' outputs of column c0 go out with the sums' loads: one wait for both.
  const float x0 = c0 < dv ? ToF(__ushort_as_bfloat16(__ldcg(core_bits + c0))) : 0.0f;
  float total = 0.0f;
  for (int i = 0; i < col_blocks; ++i) total += __ldcg(f.ss + row * col_blocks + i);
  const float inv = RmsInv(total, dv, f.eps);
  T* out = static_cast<T*>(f.norm_out) + row * dv;
  if (c0 < dv) out[c0] = FromF<T>(w0 * (x0 * inv) * SiluF(z0));
  for (int c = c0 + static_cast<int>(blockDim.x); c < dv; c += blockDim.x) {
    const float x = ToF(__ushort_as_bfloat16(__ldcg(core_bits + c)));
    out[c] = FromF<T>(LoadF(f.norm_w, f.norm_w_dtype, c) * (x * inv) * SiluF(ToF(z[c])));
  }
}

// kD: 0, or the key and value head dim both are (128 for Qwen3-Next and Qwen3.5): with the dims known at
// compile time a thread's 32 state rows are immediate offsets from one address (the fused kernel took 168
// registers with them at run time, 3 blocks per SM: 2.6 waves for the 1,024 blocks of 8 Qwen3-Next
// sequences; 80 with them fixed).
template <typename T, bool kFused, int kD = 0>
__global__ void __launch_bounds__(32 * kRuleParts)
    GatedDeltaRuleKernel(DeviceLayout layout, const T* q, const T* k, const T* v, const float* g, const float* beta,
                         float* state, int64_t slot_stride, int nk, int nv, int dk, int dv, int tiled,
                         GdnDecodeFusion f, T* out) {
  if constexpr (kD != 0) dk = dv = kD;
  __shared__ float qs[kMaxKeyDim], ks[kMaxKeyDim];
  __shared__ float red_kv[kRuleParts][kRuleCols], red_o[kRuleParts][kRuleCols];
  AllowDependentLaunch();
  const int col_blocks = (dv + kRuleCols - 1) / kRuleCols;
  const int cb = blockIdx.x % col_blocks, sh = blockIdx.x / col_blocks, seq = sh / nv, h = sh % nv;
  float a_log = 0.0f, dt_bias = 0.0f;
  if constexpr (kFused) {  // weights: before the wait
    a_log = LoadF(f.a_log, f.a_log_dtype, h);
    dt_bias = LoadF(f.dt_bias, f.dt_bias_dtype, h);
  }
  // The state too: the step's layout was copied in before its first kernel, and only this kernel (of this
  // layer, the step before) or a copy before the step writes this slot's state. Its loads go out before the
  // wait for q, k, v and the gates.
  const int kh = GdnKeyHead(h, nk, nv, tiled);
  const int slot = layout.seq_info[seq * 4], tb = layout.seq_info[seq * 4 + 1], n = layout.seq_info[seq * 4 + 2];
  const int lane = threadIdx.x & 31, part = threadIdx.x >> 5, c = cb * kRuleCols + lane, r0 = part * kRuleRows;
  const bool active = c < dv;
  float* s = state + slot * slot_stride + static_cast<int64_t>(h) * dk * dv;  // [dk, dv]
  float sreg[kRuleRows];
#pragma unroll
  for (int i = 0; i < kRuleRows; ++i) sreg[i] = active && r0 + i < dk ? s[static_cast<int64_t>(r0 + i) * dv + c] : 0.0f;
  WaitForPrevious();
  const float q_scale = 1.0f / sqrtf(static_cast<float>(dk));
  float sq = 0.0f;  // kFused: the square of this thread's (stored) output
  for (int j = 0; j < n; ++j) {
    const int64_t t = tb + j;
    // The token's loads that the arithmetic below waits for go out together, before the barriers: v,
    // the gates' inputs (or the gates), and q and k (a value of each per thread: dk <= kMaxKeyDim, the
    // block's threads).
    const float v_in = active ? ToF(v[(t * nv + h) * dv + c]) : 0.0f;
    const int r_in = static_cast<int>(threadIdx.x);
    const float q_in = r_in < dk ? ToF(q[(t * nk + kh) * dk + r_in]) : 0.0f;
    const float k_in = r_in < dk ? ToF(k[(t * nk + kh) * dk + r_in]) : 0.0f;
    float gate_in, beta_in;
    if constexpr (kFused) {
      gate_in = ToF(static_cast<const T*>(f.a)[t * nv + h]);
      beta_in = ToF(static_cast<const T*>(f.b)[t * nv + h]);
    } else {
      gate_in = g[t * nv + h];
      beta_in = beta[t * nv + h];
    }
    __syncthreads();  // the previous token's q, k and partial sums are consumed
    if (r_in < dk) {
      qs[r_in] = q_in;
      ks[r_in] = k_in;
    }
    __syncthreads();
    float qq = 0, kk = 0;
    for (int r = lane; r < dk; r += 32) {
      qq += qs[r] * qs[r];
      kk += ks[r] * ks[r];
    }
    const float q_inv = 1.0f / sqrtf(WarpSum(qq) + 1e-6f) * q_scale, k_inv = 1.0f / sqrtf(WarpSum(kk) + 1e-6f);
    float gt, bt;
    if constexpr (kFused) {  // GdnGatesKernel's arithmetic
      const float x = gate_in + dt_bias;
      gt = -expf(a_log) * (x > 20.0f ? x : log1pf(expf(x)));
      bt = SigmoidF(beta_in);
      if (cb == 0 && threadIdx.x == 0) {
        f.g[t * nv + h] = gt;
        f.beta[t * nv + h] = bt;
      }
    } else {
      gt = gate_in;
      bt = beta_in;
    }
    const float decay = expf(gt);
    float kv = 0;
#pragma unroll
    for (int i = 0; i < kRuleRows; ++i) {
      sreg[i] *= decay;
      if (r0 + i < dk) kv += sreg[i] * (ks[r0 + i] * k_inv);
    }
    red_kv[part][lane] = kv;
    __syncthreads();
    kv = 0;
#pragma unroll
    for (int p = 0; p < kRuleParts; ++p) kv += red_kv[p][lane];
    const float delta = active ? (v_in - kv) * bt : 0.0f;
    float o = 0;
#pragma unroll
    for (int i = 0; i < kRuleRows; ++i) {
      if (r0 + i < dk) {
        sreg[i] += (ks[r0 + i] * k_inv) * delta;
        o += sreg[i] * (qs[r0 + i] * q_inv);
      }
    }
    red_o[part][lane] = o;
    __syncthreads();
    if (part == 0 && active) {
      o = 0;
#pragma unroll
      for (int p = 0; p < kRuleParts; ++p) o += red_o[p][lane];
      const T stored = FromF<T>(o);
      out[(t * nv + h) * dv + c] = stored;
      sq = ToF(stored) * ToF(stored);
    }
  }
  if (active) {
#pragma unroll
    for (int i = 0; i < kRuleRows; ++i)
      if (r0 + i < dk) s[static_cast<int64_t>(r0 + i) * dv + c] = sreg[i];
  }
  if constexpr (kFused) {
    if (f.norm_out != nullptr) FinishGatedNorm<T>(f, static_cast<int64_t>(tb) * nv + h, dv, col_blocks, cb, sq, out);
  }
}

// dk > kMaxKeyDim: one block per (sequence, value head), thread c updating column c of S in place in
// global memory.
template <typename T>
__global__ void GatedDeltaRuleGlobalKernel(DeviceLayout layout, const T* q, const T* k, const T* v, const float* g,
                                           const float* beta, float* state, int64_t slot_stride, int nk, int nv, int dk,
                                           int dv, int tiled, T* out) {
  AllowDependentLaunch();
  WaitForPrevious();
  extern __shared__ float sh[];  // q [dk], k [dk]
  float* qs = sh;
  float* ks = sh + dk;
  const int seq = blockIdx.x / nv, h = blockIdx.x % nv, kh = GdnKeyHead(h, nk, nv, tiled);
  const int slot = layout.seq_info[seq * 4], tb = layout.seq_info[seq * 4 + 1], n = layout.seq_info[seq * 4 + 2];
  const int c = threadIdx.x;
  const bool active = c < dv;
  float* s = state + slot * slot_stride + static_cast<int64_t>(h) * dk * dv;  // [dk, dv]
  const float q_scale = 1.0f / sqrtf(static_cast<float>(dk));
  for (int i = 0; i < n; ++i) {
    const int64_t t = tb + i;
    __syncthreads();  // the previous token's q and k are consumed
    for (int r = threadIdx.x; r < dk; r += blockDim.x) {
      qs[r] = ToF(q[(t * nk + kh) * dk + r]);
      ks[r] = ToF(k[(t * nk + kh) * dk + r]);
    }
    __syncthreads();
    float qq = 0, kk = 0;
    for (int r = 0; r < dk; ++r) {
      qq += qs[r] * qs[r];
      kk += ks[r] * ks[r];
    }
    const float q_inv = 1.0f / sqrtf(qq + 1e-6f) * q_scale, k_inv = 1.0f / sqrtf(kk + 1e-6f);
    const float decay = expf(g[t * nv + h]), bt = beta[t * nv + h];
    if (!active) continue;
    float kv = 0;
    for (int r = 0; r < dk; ++r) {
      float sv = s[static_cast<int64_t>(r) * dv + c] * decay;
      s[static_cast<int64_t>(r) * dv + c] = sv;
      kv += sv * (ks[r] * k_inv);
    }
    const float delta = (ToF(v[(t * nv + h) * dv + c]) - kv) * bt;
    float o = 0;
    for (int r = 0; r < dk; ++r) {
      float sv = s[static_cast<int64_t>(r) * dv + c] + (ks[r] * k_inv) * delta;
      s[static_cast<int64_t>(r) * dv + c] = sv;
      o += sv * (qs[r] * q_inv);
    }
    out[(t * nv + h) * dv + c] = FromF<T>(o);
  }
}

template <typename T>
void DeltaRule(cudaStream_t s, DeviceLayout layout, const void* q, const void* k, const void* v, const float* g,
               const float* beta, float* state, int64_t slot_stride, int nk, int nv, int dk, int dv, int tiled,
               void* out) {
  const T* qt = static_cast<const T*>(q);
  const T* kt = static_cast<const T*>(k);
  const T* vt = static_cast<const T*>(v);
  T* ot = static_cast<T*>(out);
  if (dk <= kMaxKeyDim) {
    dim3 grid(static_cast<unsigned>(layout.n_seqs * nv * ((dv + kRuleCols - 1) / kRuleCols)));
    LaunchDependent(GatedDeltaRuleKernel<T, false>, grid, 32 * kRuleParts, 0, s, layout, qt, kt, vt, g, beta, state,
                    slot_stride, nk, nv, dk, dv, tiled, GdnDecodeFusion{}, ot);
  } else {
    dim3 grid(static_cast<unsigned>(layout.n_seqs * nv));
    int threads = (dv + 31) / 32 * 32;
    LaunchDependent(GatedDeltaRuleGlobalKernel<T>, grid, threads, 2 * sizeof(float) * dk, s, layout, qt, kt, vt, g,
                    beta, state, slot_stride, nk, nv, dk, dv, tiled, ot);
  }
}

}  // namespace

void LaunchCausalConv1d(cudaStream_t s, DeviceLayout layout, const void* x, const void* w, int w_dtype, float* state,
                        int64_t slot_stride, int32_t channels, int32_t kernel, void* out) {
  if (layout.n_seqs == 0) return;
  INFX_CHECK_MSG(kernel >= 1 && kernel <= kMaxConvKernel, "conv kernel {} (at most {})", kernel, kMaxConvKernel);
  const auto* xb = static_cast<const bf16*>(x);
  auto* ob = static_cast<bf16*>(out);
  if (layout.max_seq_tokens >= kConvParallelMinTokens) {
    dim3 grid(Blocks(layout.max_seq_tokens, kConvTokens), Blocks(channels, 128), static_cast<unsigned>(layout.n_seqs));
    CausalConv1dParallelKernel<<<grid, 128, 0, s>>>(layout, xb, w, w_dtype, state, slot_stride, channels, kernel, ob);
    INFX_CUDA_CHECK_LAUNCH();
    if (kernel > 1) {
      dim3 save_grid(Blocks(channels, 128), static_cast<unsigned>(layout.n_seqs));
      CausalConv1dSaveKernel<<<save_grid, 128, 0, s>>>(layout, xb, state, slot_stride, channels, kernel);
      INFX_CUDA_CHECK_LAUNCH();
    }
    return;
  }
  dim3 grid(static_cast<unsigned>(layout.n_seqs), Blocks(channels, 128));
  LaunchDependent(CausalConv1dKernel<bf16>, grid, 128, 0, s, layout, xb, w, w_dtype, state, slot_stride, channels,
                  kernel, ob);
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchGdnGates(cudaStream_t s, const void* a, const void* b, const void* a_log, int a_log_dtype,
                    const void* dt_bias, int dt_bias_dtype, float* g, float* beta, int64_t n, int64_t nv) {
  if (n * nv == 0) return;
  LaunchDependent(GdnGatesKernel<bf16>, Blocks(n * nv, 256), 256, 0, s, static_cast<const bf16*>(a),
                  static_cast<const bf16*>(b), a_log, a_log_dtype, dt_bias, dt_bias_dtype, g, beta, n, nv);
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchGatedDeltaRuleDecode(cudaStream_t s, DeviceLayout layout, const void* q, const void* k, const void* v,
                                float* state, int64_t slot_stride, int32_t nk, int32_t nv, int32_t dk, int32_t dv,
                                int32_t tiled, GdnDecodeFusion fusion, void* out) {
  if (layout.n_seqs == 0) return;
  INFX_CHECK_MSG(GdnDecodeFusionFits(layout.n_seqs, layout.max_seq_tokens, nv, dk, dv) && fusion.a != nullptr &&
                     (fusion.norm_out == nullptr || (fusion.ss != nullptr && fusion.counter != nullptr)),
                 "fused delta rule: {} sequences of up to {} tokens, nv {} dk {} dv {}", layout.n_seqs,
                 layout.max_seq_tokens, nv, dk, dv);
  dim3 grid(static_cast<unsigned>(layout.n_seqs * nv * ((dv + kRuleCols - 1) / kRuleCols)));
  auto launch = [&](auto kernel) {
    LaunchDependent(kernel, grid, 32 * kRuleParts, 0, s, layout, static_cast<const bf16*>(q),
                    static_cast<const bf16*>(k), static_cast<const bf16*>(v), static_cast<const float*>(nullptr),
                    static_cast<const float*>(nullptr), state, slot_stride, nk, nv, dk, dv, tiled, fusion,
                    static_cast<bf16*>(out));
  };
  if (dk == 128 && dv == 128) {
    launch(GatedDeltaRuleKernel<bf16, true, 128>);
  } else {
    launch(GatedDeltaRuleKernel<bf16, true>);
  }
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchGatedDeltaRule(cudaStream_t s, DeviceLayout layout, const void* q, const void* k, const void* v,
                          const float* g, const float* beta, float* state, int64_t slot_stride, int32_t nk,
                          int32_t nv, int32_t dk, int32_t dv, int32_t tiled, void* out) {
  if (layout.n_seqs == 0) return;
  INFX_CHECK_MSG(dv <= 1024, "GatedDeltaRule: v_head_dim {} > 1024", dv);
  DeltaRule<bf16>(s, layout, q, k, v, g, beta, state, slot_stride, nk, nv, dk, dv, tiled, out);
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
