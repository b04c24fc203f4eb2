// Mixture of experts: softmax top-k routing (one warp per token), and the routed experts' SwiGLU
// MLPs as two warp-per-output-row passes that read only the chosen experts' weights. Simple kernels:
// a token's experts are read once per token (grouped expert GEMMs are the next step).
#include <cmath>

#include "backend/cuda/moe_routing.cuh"

namespace infernix::cuda {
namespace {

constexpr int kMaxTopK = kRouteMaxTopK;

// Softmax top-k routing, a warp per token with the token's probabilities in registers (moe_routing.cuh).
template <int kPer>
__global__ void MoeRoutingRegKernel(const float* logits, int64_t n, int n_experts, int top_k, int normalize,
                                    float* weights, int32_t* ids) {
  AllowDependentLaunch();
  WaitForPrevious();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (t >= n) return;
  RouteToken<kPer>(logits + t * n_experts, n_experts, top_k, normalize, weights + t * top_k, ids + t * top_k,
                   static_cast<int>(threadIdx.x & 31));
}

// The same for more experts than the register version holds: probabilities recomputed each round.
__global__ void MoeRoutingKernel(const float* logits, int64_t n, int n_experts, int top_k, int normalize,
                                 float* weights, int32_t* ids) {
  AllowDependentLaunch();
  WaitForPrevious();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (t >= n) return;
  const float* l = logits + t * n_experts;
  float mx = -INFINITY;
  for (int e = lane; e < n_experts; e += 32) mx = fmaxf(mx, l[e]);
  mx = WarpMax(mx);
  float sum = 0;
  for (int e = lane; e < n_experts; e += 32) sum += expf(l[e] - mx);
  sum = WarpSum(sum);
  const float inv = 1.0f / sum;
  int chosen[kMaxTopK];
  float chosen_p[kMaxTopK];
  float chosen_sum = 0;
#pragma unroll 1
  for (int j = 0; j < top_k; ++j) {
    float best = -1.0f;
    int best_id = n_experts;
    for (int e = lane; e < n_experts; e += 32) {
      bool taken = false;
      for (int i = 0; i < j; ++i) taken |= chosen[i] == e;
      float p = expf(l[e] - mx) * inv;
      if (!taken && (p > best || (p == best && e < best_id))) {
        best = p;
        best_id = e;
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      float ob = __shfl_xor_sync(0xffffffffu, best, off);
      int oi = __shfl_xor_sync(0xffffffffu, best_id, off);
      if (ob > best || (ob == best && oi < best_id)) {
        best = ob;
        best_id = oi;
      }
    }
    chosen[j] = best_id;
    chosen_p[j] = best;
    chosen_sum += best;
  }
  if (lane == 0) {
    for (int j = 0; j < top_k; ++j) {
      weights[t * top_k + j] = normalize ? chosen_p[j] / chosen_sum : chosen_p[j];
      ids[t * top_k + j] = chosen[j];
    }
  }
}

// Dot product of an activation row (bf16) with a weight row, over a warp; every lane gets the sum.
template <typename W>
__device__ __forceinline__ float WarpDotRow(const bf16* x, const W* w, int64_t len, int lane) {
  float acc = 0;
  if constexpr (sizeof(W) == 2 && std::is_same_v<W, bf16>) {
    if (len % 8 == 0 && Aligned16Dev(x) && Aligned16Dev(w)) {
      for (int64_t i = lane * 8; i < len; i += 256) {
        float a[8], b[8];
        Load8(x + i, a);
        Load8(w + i, b);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc += a[j] * b[j];
      }
      return WarpSum(acc);
    }
  }
  for (int64_t i = lane; i < len; i += 32) acc += __bfloat162float(x[i]) * ToWeight(w[i]);
  return WarpSum(acc);
}

// act[t, j, i] = silu(gate_e[i] . x[t]) * (up_e[i] . x[t]), e = ids[t, j]; one warp per i.
template <typename W>
__global__ void MoeActKernel(const bf16* x, const int32_t* ids, int top_k, ExpertTable ex, float* act) {
  const int64_t tj = blockIdx.x;  // token * top_k + j
  const int64_t i = static_cast<int64_t>(blockIdx.y) * (blockDim.x / 32) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (i >= ex.inter) return;
  const int e = ids[tj];
  const bf16* xt = x + (tj / top_k) * ex.hidden;
  const W* gate = static_cast<const W*>(ex.gate[e]) + i * ex.hidden;
  const W* up = static_cast<const W*>(ex.up[e]) + i * ex.hidden;
  float gv = WarpDotRow(xt, gate, ex.hidden, lane);
  float uv = WarpDotRow(xt, up, ex.hidden, lane);
  if (lane == 0) act[tj * ex.inter + i] = SiluF(gv) * uv;
}

// out[t, o] = sum_j weights[t, j] * (down_e[o] . act[t, j]), in routing order; one warp per o.
template <typename W>
__global__ void MoeDownKernel(const float* act, const float* weights, const int32_t* ids, int top_k, ExpertTable ex,
                              bf16* out) {
  const int64_t t = blockIdx.x;
  const int64_t o = static_cast<int64_t>(blockIdx.y) * (blockDim.x / 32) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (o >= ex.hidden) return;
  float total = 0;
  for (int j = 0; j < top_k; ++j) {
    const int e = ids[t * top_k + j];
    const W* down = static_cast<const W*>(ex.down[e]) + o * ex.inter;
    const float* a = act + (t * top_k + j) * ex.inter;
    float acc = 0;
    for (int64_t i = lane; i < ex.inter; i += 32) acc += a[i] * ToWeight(down[i]);
    total += weights[t * top_k + j] * WarpSum(acc);
  }
  if (lane == 0) out[t * ex.hidden + o] = __float2bfloat16_rn(total);
}

template <typename W>
void Experts(cudaStream_t s, const void* x, const float* weights, const int32_t* ids, int64_t n, int top_k,
             ExpertTable ex, float* act, void* out) {
  constexpr int kWarps = 8;
  dim3 act_grid(static_cast<unsigned>(n * top_k), Blocks(ex.inter, kWarps));
  MoeActKernel<W><<<act_grid, 32 * kWarps, 0, s>>>(static_cast<const bf16*>(x), ids, top_k, ex, act);
  INFX_CUDA_CHECK_LAUNCH();
  dim3 down_grid(static_cast<unsigned>(n), Blocks(ex.hidden, kWarps));
  MoeDownKernel<W><<<down_grid, 32 * kWarps, 0, s>>>(act, weights, ids, top_k, ex, static_cast<bf16*>(out));
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace

void LaunchMoeRouting(cudaStream_t s, const float* logits, int64_t n, int32_t n_experts, int32_t top_k,
                      int32_t normalize, float* weights, int32_t* ids) {
  if (n == 0) return;
  INFX_CHECK_MSG(top_k >= 1 && top_k <= kMaxTopK && top_k <= n_experts, "top_k {} of {} experts (at most {})", top_k,
                 n_experts, kMaxTopK);
  const unsigned blocks = Blocks(n, 4);
  const int per_lane = (n_experts + 31) / 32;
  if (per_lane <= 4) {
    LaunchDependent(MoeRoutingRegKernel<4>, blocks, 128, 0, s, logits, n, n_experts, top_k, normalize, weights, ids);
  } else if (per_lane <= 8) {
    LaunchDependent(MoeRoutingRegKernel<8>, blocks, 128, 0, s, logits, n, n_experts, top_k, normalize, weights, ids);
  } else if (per_lane <= 16) {
    LaunchDependent(MoeRoutingRegKernel<16>, blocks, 128, 0, s, logits, n, n_experts, top_k, normalize, weights, ids);
  } else {
    LaunchDependent(MoeRoutingKernel, blocks, 128, 0, s, logits, n, n_experts, top_k, normalize, weights, ids);
  }
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchMoeExperts(cudaStream_t s, const void* x, const float* weights, const int32_t* ids, int64_t n,
                      int32_t top_k, ExpertTable experts, float* act, void* out) {
  if (n == 0) return;
  switch (experts.dtype) {
    case kBF16: Experts<bf16>(s, x, weights, ids, n, top_k, experts, act, out); break;
    case kF16: Experts<__half>(s, x, weights, ids, n, top_k, experts, act, out); break;
    default: Experts<float>(s, x, weights, ids, n, top_k, experts, act, out); break;
  }
}

}  // namespace infernix::cuda
