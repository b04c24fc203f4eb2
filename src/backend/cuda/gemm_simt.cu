// Matrix products on CUDA cores: the fallback for any mix of dtypes (f32/f16 weights, f32 inputs), 16x16
// output tiles through shared memory, f32 accumulation in k order (correct, not fast: the bf16 paths,
// gemv.cu and cuBLASLt, carry most models); and the decode GEMV of f32 and f16 weights (GGUF routers,
// F32 / F16 files), a warp per output row streaming it with 16-byte loads, every product in f32.
#include "backend/cuda/device_util.cuh"

namespace infernix::cuda {
namespace {

__global__ void GemmSimtKernel(const void* x, int x_dtype, const void* w, int w_dtype, void* out, int out_dtype,
                               int64_t n, int64_t m, int64_t k) {
  __shared__ float xs[16][17], ws[16][17];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t token0 = static_cast<int64_t>(blockIdx.y) * 16, col0 = static_cast<int64_t>(blockIdx.x) * 16;
  float acc = 0;
  for (int64_t k0 = 0; k0 < k; k0 += 16) {
    bool kin = k0 + tx < k;
    xs[ty][tx] = token0 + ty < n && kin ? LoadF(x, x_dtype, (token0 + ty) * k + k0 + tx) : 0.0f;
    ws[ty][tx] = col0 + ty < m && kin ? LoadF(w, w_dtype, (col0 + ty) * k + k0 + tx) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) acc += xs[ty][kk] * ws[tx][kk];
    __syncthreads();
  }
  if (token0 + ty < n && col0 + tx < m) StoreF(out, out_dtype, (token0 + ty) * m + col0 + tx, acc);
}

constexpr int kFloatGemvWarps = 8;
constexpr int kFloatGemvUnroll = 8;  // steps of 8 weights per lane in flight (a 2048-value f32 row: one round)

// 8 consecutive weights as loaded (f32: 32 bytes, f16: 16 bytes; 16-byte aligned), and as f32.
struct Raw8F32 {
  float4 a, b;
};
__device__ __forceinline__ Raw8F32 LoadRaw8(const float* w) {
  return Raw8F32{__ldcs(reinterpret_cast<const float4*>(w)), __ldcs(reinterpret_cast<const float4*>(w) + 1)};
}
__device__ __forceinline__ uint4 LoadRaw8(const __half* w) { return __ldcs(reinterpret_cast<const uint4*>(w)); }
__device__ __forceinline__ void Widen8(const Raw8F32& r, float* v) {
  v[0] = r.a.x, v[1] = r.a.y, v[2] = r.a.z, v[3] = r.a.w, v[4] = r.b.x, v[5] = r.b.y, v[6] = r.b.z, v[7] = r.b.w;
}
__device__ __forceinline__ void Widen8(const uint4& r, float* v) {
  const __half2* h = reinterpret_cast<const __half2*>(&r);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}

// out [n, m] = x [n, k] (bf16) @ w [m, k]^T for n <= kFloatGemvMaxTokens: warp i of block b takes row
// b * 8 + i, its lanes 8 consecutive values each per step (256 a step), kFloatGemvUnroll steps of weight
// loads in flight; the n sums per row in f32, reduced over the warp in a fixed order. A programmatic
// dependent (the weights start streaming before x is ready).
template <typename W, int kN>
__global__ void __launch_bounds__(32 * kFloatGemvWarps)
    GemvFloatKernel(const bf16* x, const W* w, void* out, int out_dtype, int n, int64_t m, int64_t k) {
  AllowDependentLaunch();
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kFloatGemvWarps + (threadIdx.x >> 5);
  const bool active = row < m;
  const W* wr = w + (active ? row : 0) * k;
  const int64_t steps = k / 256 + (k % 256 != 0 ? 1 : 0);
  float acc[kN];
#pragma unroll
  for (int j = 0; j < kN; ++j) acc[j] = 0.0f;
  decltype(LoadRaw8(w)) raw[kFloatGemvUnroll];
  // Unconditional loads, kept as loaded until used (a chunk past the row loads the row's last one again, and
  // its x is zero): nothing between them, so that all of a round's loads are in flight at once.
  auto load = [&](int64_t s0) {
#pragma unroll
    for (int u = 0; u < kFloatGemvUnroll; ++u) raw[u] = LoadRaw8(wr + min((s0 + u) * 256 + lane * 8, k - 8));
  };
  load(0);
  WaitForPrevious();  // x comes from the kernels before
  for (int64_t s0 = 0; s0 < steps; s0 += kFloatGemvUnroll) {
    if (s0 != 0) load(s0);
#pragma unroll
    for (int u = 0; u < kFloatGemvUnroll; ++u) {
      const int64_t c = (s0 + u) * 256 + lane * 8;
      const bool in_row = c < k;
      float wv[8];
      Widen8(raw[u], wv);
#pragma unroll
      for (int j = 0; j < kN; ++j) {
        if (j < n) {
          float xv[8];
          Load8(x + j * k + (in_row ? c : 0), xv);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[j] += wv[e] * (in_row ? xv[e] : 0.0f);
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kN; ++j) {
    const float sum = WarpSum(acc[j]);
    if (active && lane == 0 && j < n) StoreF(out, out_dtype, j * m + row, sum);
  }
}

template <typename W>
void LaunchFloatGemv(cudaStream_t s, const void* x, const void* w, void* out, int out_dtype, int64_t n, int64_t m,
                     int64_t k) {
  const unsigned grid = Blocks(m, kFloatGemvWarps);
  const auto* xb = static_cast<const bf16*>(x);
  const auto* wt = static_cast<const W*>(w);
  const int nn = static_cast<int>(n);
  if (n <= 2) {
    LaunchDependent(GemvFloatKernel<W, 2>, grid, 32 * kFloatGemvWarps, 0, s, xb, wt, out, out_dtype, nn, m, k);
  } else {
    LaunchDependent(GemvFloatKernel<W, kFloatGemvMaxTokens>, grid, 32 * kFloatGemvWarps, 0, s, xb, wt, out, out_dtype,
                    nn, m, k);
  }
}

}  // namespace

bool FloatGemvFits(int w_dtype, int x_dtype, int64_t n, int64_t k, const void* x, const void* w) {
  const auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; };
  return (w_dtype == kF32 || w_dtype == kF16) && x_dtype == kBF16 && n >= 1 && n <= kFloatGemvMaxTokens &&
         k % 8 == 0 && aligned(x) && aligned(w);
}

void LaunchGemvFloat(cudaStream_t s, const void* x, const void* w, int w_dtype, void* out, int out_dtype, int64_t n,
                     int64_t m, int64_t k) {
  if (n <= 0 || m <= 0) return;
  INFX_CHECK(FloatGemvFits(w_dtype, kBF16, n, k, x, w));
  if (w_dtype == kF32) {
    LaunchFloatGemv<float>(s, x, w, out, out_dtype, n, m, k);
  } else {
    LaunchFloatGemv<__half>(s, x, w, out, out_dtype, n, m, k);
  }
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchGemmSimt(cudaStream_t s, const void* x, int x_dtype, const void* w, int w_dtype, void* out, int out_dtype,
                    int64_t n, int64_t m, int64_t k) {
  if (n <= 0 || m <= 0) return;
  dim3 grid(Blocks(m, 16), Blocks(n, 16));
  GemmSimtKernel<<<grid, dim3(16, 16), 0, s>>>(x, x_dtype, w, w_dtype, out, out_dtype, n, m, k);
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
