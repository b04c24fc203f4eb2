// Gated DeltaNet: the gated delta rule in chunked form, for prefill (the recurrent kernel in gdn.cu
// serves decode and short inputs). Same contract as LaunchGatedDeltaRule (ops.h GatedDeltaRule).
//
// The math. A (sequence, value head) is cut into chunks of C = 64 tokens (the last one may be shorter:
// L tokens). With S0 [dk, dv] the state before a chunk, its rows i, j = 0..L-1, q_i and k_i
// L2-normalised (q_i also scaled by 1/sqrt(dk)), G_i = g_0 + ... + g_i (cumulative within the chunk)
// and gamma_i = exp(G_i):
//   A_ij  = beta_i exp(G_i - G_j) (k_i . k_j) for j < i, else 0;  T = (I + A)^-1 (unit lower triangular)
//   W     = T diag(beta gamma) K [L, dk],  U = T diag(beta) V [L, dv],  Delta = U - W S0 [L, dv]
//   O_i   = gamma_i q_i^T S0 + sum_{j <= i} P_ij Delta_j,  P_ij = exp(G_i - G_j) (q_i . k_j)
//   S_new = gamma_{L-1} S0 + sum_j exp(G_{L-1} - G_j) k_j Delta_j^T
// Delta_i is exactly the recurrent form's delta of token i, beta_i (v_i - (exp(g_i) S_{i-1})^T k_i):
// substituting S_{i-1} = gamma_{i-1} S0 + sum_{j<i} exp(G_{i-1} - G_j) k_j Delta_j^T gives
// (I + A) Delta = diag(beta) V - diag(beta gamma) K S0. So the outputs and the final state equal the
// recurrent kernel's up to rounding. Every exponent used is <= 0 (G falls within a chunk): nothing
// overflows, long decays underflow to 0 as they should. All arithmetic is f32.
//
// Two kernels (256 threads each):
// 1. GdnChunkPrepKernel, a block per (chunk, value head, sequence), every chunk at once. Shared memory
//    holds the chunk's K and Q (normalised), then K and V: it computes A and P (4x4 outputs per thread),
//    then solves (I + A) [W | U] = [diag(beta gamma) K | diag(beta) V] by forward substitution, one
//    thread per column of [W | U] with the column in registers (the solve needs no synchronisation: a
//    column depends only on itself and A). It writes W, U, P and four per-token coefficients to scratch
//    (kernels.h GdnChunkScratch). Shared memory: 4 * (64 * (dk + max(dk, dv) + 1) + 64 * 68 + 256) bytes,
//    84 KB at dk = dv = 128.
// 2. GdnChunkStateKernel, a block per (32-column slice of dv, value head, sequence): the columns of S are
//    independent in every formula above (A, T, W and P do not involve V), so slices never communicate.
//    The block walks its sequence's chunks in order with its [dk, 32] slice of S in shared memory:
//    Delta = U - W S, then O = diag(gamma) Q S + P Delta (written out as bf16), then
//    S = gamma_{L-1} S + (diag(exp(G_{L-1} - G)) K)^T Delta. W, Q and the scaled K pass through one
//    [64, dk] buffer in turn. Shared memory: 4 * (dk * 32 + 64 * dk + 64 * 32 + 64 * 64 + 256) bytes,
//    73 KB at dk = 128. Thread (warp w, lane l) owns column l of the slice: rows w + 8 m of Delta and O,
//    rows 16 w .. 16 w + 15 of S.
// Both fit the 99 KB that sm_86/sm_89 allow a block, so they run on every GPU from sm_80 up.
// Products run on the CUDA cores in f32. The state kernel's tensor-core form (gdn_chunked_mma.cu) takes
// dk 16, 32, 64 or 128 with dv a multiple of 16 where a block may have its shared memory (224 KB at dk
// 128: sm_90, sm_100); this one serves the other shapes and GPUs (sm_80's 163 KB, sm_86 / 89 / 120's 99).
#include <algorithm>

#include "backend/cuda/device_util.cuh"

namespace infernix::cuda {
namespace {

constexpr int kChunk = kGdnChunk;
constexpr int kMaxDim = kGdnChunkedMaxDim;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kCols = 32;         // columns of S per state block
constexpr int kLdA = kChunk + 4;  // row stride of A in shared memory (rows 16-byte aligned)
static_assert(kChunk == 2 * 32 && kThreads == 256 && kWarps * 16 >= kMaxDim && kThreads >= 2 * kMaxDim,
              "the thread layouts below");

size_t PrepSmemBytes(int dk, int dv) {
  const size_t ldb = static_cast<size_t>(dk + std::max(dk, dv) + 1);
  return sizeof(float) * (kChunk * ldb + kChunk * kLdA + 4 * kChunk);
}

size_t StateSmemBytes(int dk) {
  const size_t dkp = static_cast<size_t>((dk + 3) / 4 * 4);
  return sizeof(float) * (dkp * kCols + kChunk * dkp + kChunk * kCols + kChunk * kChunk + 4 * kChunk);
}

// ---- kernel 1: per chunk, W, U, P and the coefficients ----
__global__ void __launch_bounds__(kThreads)
    GdnChunkPrepKernel(DeviceLayout layout, const bf16* q, const bf16* k, const bf16* v, const float* g,
                       const float* beta, int nk, int nv, int dk, int dv, int tiled, GdnChunkScratch ws) {
  extern __shared__ __align__(16) float sh[];
  const int h = blockIdx.y, seq = blockIdx.z;
  const int tb = layout.seq_info[seq * 4 + 1], n = layout.seq_info[seq * 4 + 2];
  const int i0 = blockIdx.x * kChunk;
  if (i0 >= n) return;
  const int len = min(kChunk, n - i0);
  const int kh = GdnKeyHead(h, nk, nv, tiled);
  const int ldb = dk + max(dk, dv) + 1;  // odd: the A/P loop reads 16 rows at one column without conflicts
  float* bm = sh;                        // [kChunk, ldb]: K in [0, dk); Q in [dk, 2 dk), later V in [dk, dk + dv)
  float* am = bm + kChunk * ldb;         // [kChunk, kLdA]: A, zeros on and above the diagonal
  float* gc = am + kChunk * kLdA;        // [kChunk]: G
  float* bt = gc + kChunk;               // [kChunk]: beta
  float* qf = bt + kChunk;               // [kChunk]: q's normalising factor, with 1/sqrt(dk)
  float* kf = qf + kChunk;               // [kChunk]: k's
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t t0 = tb + i0;

  // Raw rows; rows at or past len are zeros (beta 0, g 0) and stay inert throughout.
  for (int i = warp; i < kChunk; i += kWarps) {
    const bool in = i < len;
    const int64_t base = ((t0 + i) * nk + kh) * dk;
    for (int r = lane; r < dk; r += 32) {
      bm[i * ldb + r] = in ? ToF(k[base + r]) : 0.0f;
      bm[i * ldb + dk + r] = in ? ToF(q[base + r]) : 0.0f;
    }
  }
  if (tid < kChunk) {
    const bool in = tid < len;
    gc[tid] = in ? g[(t0 + tid) * nv + h] : 0.0f;
    bt[tid] = in ? beta[(t0 + tid) * nv + h] : 0.0f;
  }
  __syncthreads();

  // Norms, a warp per row (as the recurrent kernel: x / sqrt(sum x^2 + 1e-6)); warp 0 then turns g into
  // its inclusive prefix sum G (two entries per lane).
  const float q_scale = 1.0f / sqrtf(static_cast<float>(dk));
  for (int i = warp; i < kChunk; i += kWarps) {
    float qq = 0, kk = 0;
    for (int r = lane; r < dk; r += 32) {
      const float a = bm[i * ldb + r], b = bm[i * ldb + dk + r];
      kk += a * a;
      qq += b * b;
    }
    qq = WarpSum(qq);
    kk = WarpSum(kk);
    if (lane == 0) {
      qf[i] = 1.0f / sqrtf(qq + 1e-6f) * q_scale;
      kf[i] = 1.0f / sqrtf(kk + 1e-6f);
    }
  }
  if (warp == 0) {
    const float a = gc[2 * lane], pair = a + gc[2 * lane + 1];
    const float s = WarpInclusiveSum(pair);
    __syncwarp();
    gc[2 * lane] = s - pair + a;
    gc[2 * lane + 1] = s;
  }
  __syncthreads();

  // Normalise in place; per-token coefficients for the state kernel, which reads raw q and k again.
  for (int i = warp; i < kChunk; i += kWarps) {
    for (int r = lane; r < dk; r += 32) {
      bm[i * ldb + r] *= kf[i];
      bm[i * ldb + dk + r] *= qf[i];
    }
  }
  if (tid < len) {
    const float g_last = gc[len - 1], gamma = expf(gc[tid]);
    reinterpret_cast<float4*>(ws.coef)[(t0 + tid) * nv + h] =
        make_float4(qf[tid] * gamma, kf[tid] * expf(g_last - gc[tid]), gc[tid], gamma);
  }
  __syncthreads();

  // A = K K^T and P = Q K^T with their decays and masks: thread (ti, tj) computes rows ti + 16 a and
  // columns tj + 16 b, a, b < 4.
  {
    const int ti = tid >> 4, tj = tid & 15;
    float kk[4][4] = {}, qk[4][4] = {};
    for (int r = 0; r < dk; ++r) {
      float ki[4], qi[4], kj[4];
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        ki[a] = bm[(ti + 16 * a) * ldb + r];
        qi[a] = bm[(ti + 16 * a) * ldb + dk + r];
        kj[a] = bm[(tj + 16 * a) * ldb + r];
      }
#pragma unroll
      for (int a = 0; a < 4; ++a) {
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          kk[a][b] = fmaf(ki[a], kj[b], kk[a][b]);
          qk[a][b] = fmaf(qi[a], kj[b], qk[a][b]);
        }
      }
    }
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const int i = ti + 16 * a;
      float* p_row = ws.p + ((t0 + i) * nv + h) * kChunk;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int j = tj + 16 * b;
        const float decay = j <= i ? expf(gc[i] - gc[j]) : 0.0f;
        am[i * kLdA + j] = j < i ? bt[i] * decay * kk[a][b] : 0.0f;
        if (i < len) p_row[j] = decay * qk[a][b];  // zero for j > i; j <= i < len is a valid token
      }
    }
  }
  __syncthreads();  // A is complete, and nothing reads Q any more

  // Right-hand sides: beta_i gamma_i k_i and beta_i v_i.
  for (int i = warp; i < kChunk; i += kWarps) {
    const float sk = bt[i] * expf(gc[i]);
    const int64_t vbase = ((t0 + i) * nv + h) * dv;
    for (int r = lane; r < dk; r += 32) bm[i * ldb + r] *= sk;
    for (int c = lane; c < dv; c += 32) bm[i * ldb + dk + c] = i < len ? bt[i] * ToF(v[vbase + c]) : 0.0f;
  }
  __syncthreads();

  // Forward substitution, thread `col` solving column col of [W | U]: x_i = b_i - sum_{j<i} A_ij x_j.
  const int col = tid;
  if (col >= dk + dv) return;
  float x[kChunk];
#pragma unroll
  for (int i = 0; i < kChunk; ++i) x[i] = bm[i * ldb + col];
#pragma unroll
  for (int i = 1; i < kChunk; ++i) {
    float even = x[i], odd = 0.0f;  // two chains of dependent FMAs instead of one
#pragma unroll
    for (int j4 = 0; j4 < (i + 3) / 4; ++j4) {
      const float4 a = *reinterpret_cast<const float4*>(am + i * kLdA + 4 * j4);
      float& acc = (j4 & 1) ? odd : even;
      acc = fmaf(-a.x, x[4 * j4], acc);
      if (4 * j4 + 1 < i) acc = fmaf(-a.y, x[4 * j4 + 1], acc);
      if (4 * j4 + 2 < i) acc = fmaf(-a.z, x[4 * j4 + 2], acc);
      if (4 * j4 + 3 < i) acc = fmaf(-a.w, x[4 * j4 + 3], acc);
    }
    x[i] = even + odd;
  }
  const bool is_w = col < dk;
  float* dst = is_w ? ws.w + (t0 * nv + h) * dk + col : ws.u + (t0 * nv + h) * dv + (col - dk);
  const int64_t row_stride = static_cast<int64_t>(nv) * (is_w ? dk : dv);
#pragma unroll
  for (int i = 0; i < kChunk; ++i)
    if (i < len) dst[i * row_stride] = x[i];
}

// ---- kernel 2: the sequential pass over chunks, per 32-column slice of S ----

// acc[m] += sum_r xs[(warp + 8 m) * dkp + r] * ss[r * kCols + lane], r < dkp (a multiple of 4).
__device__ __forceinline__ void RowsTimesState(const float* xs, const float* ss, int dkp, int warp, int lane,
                                               float (&acc)[8]) {
  for (int r = 0; r < dkp; r += 4) {
    const float s0 = ss[r * kCols + lane], s1 = ss[(r + 1) * kCols + lane];
    const float s2 = ss[(r + 2) * kCols + lane], s3 = ss[(r + 3) * kCols + lane];
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const float4 a = *reinterpret_cast<const float4*>(xs + (warp + 8 * m) * dkp + r);
      acc[m] = fmaf(a.x, s0, acc[m]);
      acc[m] = fmaf(a.y, s1, acc[m]);
      acc[m] = fmaf(a.z, s2, acc[m]);
      acc[m] = fmaf(a.w, s3, acc[m]);
    }
  }
}

// xs[i, r] = x[token t0 + i, key head kh, r] * coef[i] for i < len (zeros elsewhere, and for r >= dk).
__device__ __forceinline__ void LoadScaledRows(float* xs, const bf16* x, const float* coef, int64_t t0, int len, int nk,
                                               int kh, int dk, int dkp, int warp, int lane) {
  for (int i = warp; i < kChunk; i += kWarps) {
    const bool in = i < len;
    const float c = in ? coef[i] : 0.0f;
    const bf16* row = x + ((t0 + i) * nk + kh) * dk;
    for (int r = lane; r < dkp; r += 32) xs[i * dkp + r] = in && r < dk ? ToF(row[r]) * c : 0.0f;
  }
}

__global__ void __launch_bounds__(kThreads)
    GdnChunkStateKernel(DeviceLayout layout, const bf16* q, const bf16* k, GdnChunkScratch ws, float* state,
                        int64_t slot_stride, int nk, int nv, int dk, int dv, int tiled, bf16* out) {
  extern __shared__ __align__(16) float sh[];
  const int h = blockIdx.y, seq = blockIdx.z;
  const int slot = layout.seq_info[seq * 4], tb = layout.seq_info[seq * 4 + 1], n = layout.seq_info[seq * 4 + 2];
  if (n == 0) return;
  const int kh = GdnKeyHead(h, nk, nv, tiled);
  const int dkp = (dk + 3) / 4 * 4;  // rows padded with zeros to whole float4s
  float* ss = sh;                    // [dkp, kCols]: this block's columns of S
  float* xs = ss + dkp * kCols;      // [kChunk, dkp]: W, then diag(gamma) Q, then diag(exp(G_last - G)) K
  float* ds = xs + kChunk * dkp;     // [kChunk, kCols]: Delta
  float* ps = ds + kChunk * kCols;   // [kChunk, kChunk]: P
  float* qc = ps + kChunk * kChunk;  // [kChunk]: q coefficients (normaliser * gamma)
  float* kc = qc + kChunk;           // [kChunk]: k coefficients (normaliser * exp(G_last - G))
  float* gm = kc + kChunk;           // [kChunk]: gamma
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int c = blockIdx.x * kCols + lane;
  const bool col_ok = c < dv;
  float* st = state + slot * slot_stride + static_cast<int64_t>(h) * dk * dv;  // [dk, dv]
  for (int r = warp; r < dkp; r += kWarps)
    ss[r * kCols + lane] = r < dk && col_ok ? st[static_cast<int64_t>(r) * dv + c] : 0.0f;

  const float4* coef = reinterpret_cast<const float4*>(ws.coef);
  for (int i0 = 0; i0 < n; i0 += kChunk) {
    const int len = min(kChunk, n - i0);
    const int64_t t0 = tb + i0;
    // W, P and the coefficients of this chunk; U into registers.
    for (int i = warp; i < kChunk; i += kWarps) {
      const bool in = i < len;
      const float* w_row = ws.w + ((t0 + i) * nv + h) * dk;
      const float* p_row = ws.p + ((t0 + i) * nv + h) * kChunk;
      for (int r = lane; r < dkp; r += 32) xs[i * dkp + r] = in && r < dk ? w_row[r] : 0.0f;
      for (int j = lane; j < kChunk; j += 32) ps[i * kChunk + j] = in ? p_row[j] : 0.0f;
    }
    if (tid < kChunk) {
      const float4 cf = tid < len ? coef[(t0 + tid) * nv + h] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      qc[tid] = cf.x;
      kc[tid] = cf.y;
      gm[tid] = cf.w;
    }
    float u[8];
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const int i = warp + 8 * m;
      u[m] = i < len && col_ok ? ws.u[((t0 + i) * nv + h) * dv + c] : 0.0f;
    }
    __syncthreads();

    // Delta = U - W S.
    float acc[8] = {};
    RowsTimesState(xs, ss, dkp, warp, lane, acc);
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const int i = warp + 8 * m;
      ds[i * kCols + lane] = i < len ? u[m] - acc[m] : 0.0f;
    }
    __syncthreads();

    // O = diag(gamma) Q S + P Delta (P is zero above the diagonal and past len).
    LoadScaledRows(xs, q, qc, t0, len, nk, kh, dk, dkp, warp, lane);
    __syncthreads();
#pragma unroll
    for (int m = 0; m < 8; ++m) acc[m] = 0.0f;
    RowsTimesState(xs, ss, dkp, warp, lane, acc);
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const int i = warp + 8 * m;
      if (i >= len) continue;  // the same for the whole warp
      float o = acc[m];
      for (int j = 0; j <= i; j += 4) {
        const float4 p = *reinterpret_cast<const float4*>(ps + i * kChunk + j);
        o = fmaf(p.x, ds[j * kCols + lane], o);
        o = fmaf(p.y, ds[(j + 1) * kCols + lane], o);
        o = fmaf(p.z, ds[(j + 2) * kCols + lane], o);
        o = fmaf(p.w, ds[(j + 3) * kCols + lane], o);
      }
      if (col_ok) out[((t0 + i) * nv + h) * dv + c] = __float2bfloat16_rn(o);
    }
    __syncthreads();

    // S = gamma_last S + (diag(exp(G_last - G)) K)^T Delta.
    LoadScaledRows(xs, k, kc, t0, len, nk, kh, dk, dkp, warp, lane);
    __syncthreads();
    const float gamma_last = gm[len - 1];
    const int r0 = 16 * warp;
    float sacc[16];
#pragma unroll
    for (int m = 0; m < 16; ++m) sacc[m] = r0 + m < dkp ? ss[(r0 + m) * kCols + lane] * gamma_last : 0.0f;
    if (r0 < dkp) {
      for (int j = 0; j < len; ++j) {
        const float d = ds[j * kCols + lane];
#pragma unroll
        for (int m4 = 0; m4 < 4; ++m4) {
          if (r0 + 4 * m4 >= dkp) break;
          const float4 kx = *reinterpret_cast<const float4*>(xs + j * dkp + r0 + 4 * m4);
          sacc[4 * m4] = fmaf(kx.x, d, sacc[4 * m4]);
          sacc[4 * m4 + 1] = fmaf(kx.y, d, sacc[4 * m4 + 1]);
          sacc[4 * m4 + 2] = fmaf(kx.z, d, sacc[4 * m4 + 2]);
          sacc[4 * m4 + 3] = fmaf(kx.w, d, sacc[4 * m4 + 3]);
        }
      }
    }
#pragma unroll
    for (int m = 0; m < 16; ++m)
      if (r0 + m < dkp) ss[(r0 + m) * kCols + lane] = sacc[m];
    __syncthreads();
  }

  for (int r = warp; r < dk; r += kWarps)
    if (col_ok) st[static_cast<int64_t>(r) * dv + c] = ss[r * kCols + lane];
}

}  // namespace

bool GdnChunkedFits(int dk, int dv, size_t max_smem_optin) {
  return dk >= 1 && dv >= 1 && dk <= kMaxDim && dv <= kMaxDim && PrepSmemBytes(dk, dv) <= max_smem_optin &&
         StateSmemBytes(dk) <= max_smem_optin;
}

void ConfigureGdnKernels(size_t max_smem_optin) {
  const size_t prep = std::min(PrepSmemBytes(kMaxDim, kMaxDim), max_smem_optin);
  const size_t state = std::min(StateSmemBytes(kMaxDim), max_smem_optin);
  INFX_CUDA_CHECK(
      cudaFuncSetAttribute(GdnChunkPrepKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(prep)));
  INFX_CUDA_CHECK(
      cudaFuncSetAttribute(GdnChunkStateKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(state)));
  ConfigureGdnChunkStateMma(max_smem_optin);
}

void LaunchGatedDeltaRuleChunked(cudaStream_t s, DeviceLayout layout, const void* q, const void* k, const void* v,
                                 const float* g, const float* beta, float* state, int64_t slot_stride, int32_t nk,
                                 int32_t nv, int32_t dk, int32_t dv, int32_t tiled, GdnChunkScratch ws, void* out,
                                 size_t max_smem_optin) {
  if (layout.n_seqs == 0 || layout.max_seq_tokens == 0) return;
  INFX_CHECK_MSG(dk >= 1 && dv >= 1 && dk <= kMaxDim && dv <= kMaxDim && nk >= 1 && nv % nk == 0,
                 "chunked GatedDeltaRule: dk {} dv {} nk {} nv {}", dk, dv, nk, nv);
  const auto* qb = static_cast<const bf16*>(q);
  const auto* kb = static_cast<const bf16*>(k);
  const unsigned chunks = static_cast<unsigned>((layout.max_seq_tokens + kChunk - 1) / kChunk);
  dim3 prep_grid(chunks, static_cast<unsigned>(nv), static_cast<unsigned>(layout.n_seqs));
  GdnChunkPrepKernel<<<prep_grid, kThreads, PrepSmemBytes(dk, dv), s>>>(layout, qb, kb, static_cast<const bf16*>(v), g,
                                                                        beta, nk, nv, dk, dv, tiled, ws);
  INFX_CUDA_CHECK_LAUNCH();
  const bool aligned = ((reinterpret_cast<uintptr_t>(q) | reinterpret_cast<uintptr_t>(k)) & 15u) == 0;
  if (aligned && GdnChunkStateMmaFits(dk, dv, max_smem_optin)) {
    LaunchGdnChunkStateMma(s, layout, q, k, ws, state, slot_stride, nk, nv, dk, dv, tiled, out);
    return;
  }
  dim3 state_grid(static_cast<unsigned>((dv + kCols - 1) / kCols), static_cast<unsigned>(nv),
                  static_cast<unsigned>(layout.n_seqs));
  GdnChunkStateKernel<<<state_grid, kThreads, StateSmemBytes(dk), s>>>(layout, qb, kb, ws, state, slot_stride, nk, nv,
                                                                       dk, dv, tiled, static_cast<bf16*>(out));
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
