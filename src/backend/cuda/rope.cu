// Rotary position embedding, rotate-half pairing, in place; one block per token. Angles are
// pos * inv_freq in f32 (as transformers computes them), with full-range sincosf.
#include "backend/cuda/device_util.cuh"

namespace infernix::cuda {
namespace {

template <typename T>
__global__ void RopeKernel(T* x, const int32_t* token_pos, int64_t heads, int64_t d, const float* inv_freq,
                           int64_t half, float scale) {
  int64_t t = blockIdx.x;
  float pos = static_cast<float>(token_pos[t]);
  for (int64_t idx = threadIdx.x; idx < heads * half; idx += blockDim.x) {
    int64_t h = idx / half, i = idx % half;
    float angle = pos * inv_freq[i];
    float sn, cs;
    sincosf(angle, &sn, &cs);
    cs *= scale;
    sn *= scale;
    T* v = x + (t * heads + h) * d;
    float a = ToF(v[i]), c = ToF(v[i + half]);
    v[i] = FromF<T>(a * cs - c * sn);
    v[i + half] = FromF<T>(c * cs + a * sn);
  }
}

}  // namespace

void LaunchRope(cudaStream_t s, int dtype, void* x, const int32_t* token_pos, int64_t n, int64_t heads, int64_t d,
                const float* inv_freq, int64_t half, float scale) {
  if (n <= 0 || half <= 0) return;
  int threads = static_cast<int>(std::min<int64_t>(256, (heads * half + 31) / 32 * 32));
  if (dtype == kBF16) {
    RopeKernel<<<static_cast<unsigned>(n), threads, 0, s>>>(static_cast<bf16*>(x), token_pos, heads, d, inv_freq, half,
                                                            scale);
  } else {
    RopeKernel<<<static_cast<unsigned>(n), threads, 0, s>>>(static_cast<float*>(x), token_pos, heads, d, inv_freq, half,
                                                            scale);
  }
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
