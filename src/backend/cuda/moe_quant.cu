// The routed experts of a MoE layer with GGUF block-quantized weights (Qwen3-MoE / Qwen3-Next GGUF
// files): per token and selected expert, act = silu(gate_e x) * (up_e x), then out = sum_j w_j down_e act.
// The same two-kernel shape as moe.cu's, with each warp dotting a quantized row (quant_blocks.cuh): only
// the selected experts' weights are read.
#include "backend/cuda/quant_blocks.cuh"

namespace infernix::cuda {
namespace {

constexpr int kWarps = 8;

__device__ __forceinline__ float Silu(float v) { return v / (1.0f + __expf(-v)); }

template <int T>
__global__ void QuantMoeActKernel(const bf16* x, const int32_t* ids, int top_k, ExpertTable ex, float* act) {
  const int64_t tj = blockIdx.x;  // token * top_k + j
  const int64_t i = static_cast<int64_t>(blockIdx.y) * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  __shared__ uint2 stage[kWarps][QuantStepBytes<T>() / 8 + 1];
  if (i >= ex.inter) return;
  uint8_t* st = reinterpret_cast<uint8_t*>(stage[threadIdx.x >> 5]);
  const int e = ids[tj];
  const bf16* xt = x + (tj / top_k) * ex.hidden;
  const int64_t row_bytes = QuantRowBytes<T>(ex.hidden);
  const float g =
      WarpDotQuantRowStaged<T>(static_cast<const uint8_t*>(ex.gate[e]) + i * row_bytes, xt, ex.hidden, lane, st);
  const float u =
      WarpDotQuantRowStaged<T>(static_cast<const uint8_t*>(ex.up[e]) + i * row_bytes, xt, ex.hidden, lane, st);
  if (lane == 0) act[tj * ex.inter + i] = Silu(g) * u;
}

template <int T>
__global__ void QuantMoeDownKernel(const float* act, const float* weights, const int32_t* ids, int top_k,
                                   ExpertTable ex, bf16* out) {
  const int64_t t = blockIdx.x;
  const int64_t o = static_cast<int64_t>(blockIdx.y) * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  __shared__ uint2 stage[kWarps][QuantStepBytes<T>() / 8 + 1];
  if (o >= ex.hidden) return;
  uint8_t* st = reinterpret_cast<uint8_t*>(stage[threadIdx.x >> 5]);
  const int64_t row_bytes = QuantRowBytes<T>(ex.inter);
  float total = 0.0f;
  for (int j = 0; j < top_k; ++j) {
    const int e = ids[t * top_k + j];
    const float d = WarpDotQuantRowStaged<T>(static_cast<const uint8_t*>(ex.down[e]) + o * row_bytes,
                                             act + (t * top_k + j) * ex.inter, ex.inter, lane, st);
    total += weights[t * top_k + j] * d;
  }
  if (lane == 0) out[t * ex.hidden + o] = __float2bfloat16_rn(total);
}

template <int T>
void Run(cudaStream_t s, const void* x, const float* weights, const int32_t* ids, int64_t n, int top_k,
         ExpertTable ex, float* act, void* out) {
  dim3 act_grid(static_cast<unsigned>(n * top_k), static_cast<unsigned>((ex.inter + kWarps - 1) / kWarps));
  QuantMoeActKernel<T><<<act_grid, 32 * kWarps, 0, s>>>(static_cast<const bf16*>(x), ids, top_k, ex, act);
  INFX_CUDA_CHECK_LAUNCH();
  dim3 down_grid(static_cast<unsigned>(n), static_cast<unsigned>((ex.hidden + kWarps - 1) / kWarps));
  QuantMoeDownKernel<T><<<down_grid, 32 * kWarps, 0, s>>>(act, weights, ids, top_k, ex, static_cast<bf16*>(out));
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace

void LaunchQuantMoeExperts(cudaStream_t s, const void* x, const float* weights, const int32_t* ids, int64_t n,
                           int32_t top_k, ExpertTable ex, float* act, void* out) {
  if (n == 0) return;
  ByQuantType(ex.dtype, [&](auto tc) { Run<decltype(tc)::value>(s, x, weights, ids, n, top_k, ex, act, out); });
}

}  // namespace infernix::cuda
