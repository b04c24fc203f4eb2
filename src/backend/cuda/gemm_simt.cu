// The fallback matrix product on CUDA cores, for any mix of dtypes (f32/f16 weights, f32 inputs):
// 16x16 output tiles through shared memory, f32 accumulation in k order. Correct, not fast; the bf16
// paths (gemv.cu, cuBLASLt) carry real models.
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

}  // namespace

void LaunchGemmSimt(cudaStream_t s, const void* x, int x_dtype, const void* w, int w_dtype, void* out, int out_dtype,
                    int64_t n, int64_t m, int64_t k) {
  if (n <= 0 || m <= 0) return;
  dim3 grid(Blocks(m, 16), Blocks(n, 16));
  GemmSimtKernel<<<grid, dim3(16, 16), 0, s>>>(x, x_dtype, w, w_dtype, out, out_dtype, n, m, k);
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
