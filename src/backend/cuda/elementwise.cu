// Elementwise kernels: the residual add, SiLU-and-multiply (also with its rows rounded to int8 for the
// quantized product that reads them), the sigmoid gate, and the sigmoid-gated accumulation of the shared
// expert. f32 math on bf16 or f32 activations, 8 elements per thread.
#include "backend/cuda/device_util.cuh"

namespace infernix::cuda {
namespace {

template <int kOp>
__device__ __forceinline__ float Apply(float a, float b) {
  if constexpr (kOp == kOpAdd) return a + b;
  if constexpr (kOp == kOpSiluMul) return SiluF(a) * b;
  return a * SigmoidF(b);
}

// Thread i handles elements [8i, 8i + 8); kVec: 16-byte aligned pointers, whole groups of 8.
template <typename T, int kOp, bool kVec>
__global__ void BinaryKernel(const T* a, const T* b, T* out, int64_t n) {
  AllowDependentLaunch();
  WaitForPrevious();
  int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i >= n) return;
  if (kVec && i + 8 <= n) {
    float va[8], vb[8];
    Load8(a + i, va);
    Load8(b + i, vb);
#pragma unroll
    for (int j = 0; j < 8; ++j) va[j] = Apply<kOp>(va[j], vb[j]);
    Store8(out + i, va);
  } else {
    for (int64_t j = i; j < n && j < i + 8; ++j) out[j] = FromF<T>(Apply<kOp>(ToF(a[j]), ToF(b[j])));
  }
}

template <typename T, int kOp>
void Binary(cudaStream_t s, const void* a, const void* b, void* out, int64_t n) {
  bool vec = Aligned16(a) && Aligned16(b) && Aligned16(out);
  unsigned blocks = Blocks((n + 7) / 8, 256);
  if (vec) {
    LaunchDependent(BinaryKernel<T, kOp, true>, blocks, 256, 0, s, static_cast<const T*>(a), static_cast<const T*>(b),
                    static_cast<T*>(out), n);
  } else {
    LaunchDependent(BinaryKernel<T, kOp, false>, blocks, 256, 0, s, static_cast<const T*>(a), static_cast<const T*>(b),
                    static_cast<T*>(out), n);
  }
}

template <typename T>
void BinaryOfType(cudaStream_t s, int op, const void* a, const void* b, void* out, int64_t n) {
  switch (op) {
    case kOpAdd: Binary<T, kOpAdd>(s, a, b, out, n); break;
    case kOpSiluMul: Binary<T, kOpSiluMul>(s, a, b, out, n); break;
    default: Binary<T, kOpSigmoidMul>(s, a, b, out, n); break;
  }
}

// SiLU(gate) * up of `rows` bf16 rows of d values (d % 256 == 0: a warp's 256 values lie in one row), each
// stored value as BinaryKernel stores it, and the stored rows rounded to int8 blocks of 32 into xq as the
// quantized product's prologue lays them out (StoreInt8x8: the product's own rounding, kGemvXInt8's layout).
template <int G>
__global__ void SiluMulInt8Kernel(const bf16* gate, const bf16* up, bf16* out, int64_t rows, int64_t d, int64_t block,
                                  uint8_t* xq) {
  AllowDependentLaunch();
  WaitForPrevious();
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i >= rows * d) return;  // whole warps: rows * d % 256 == 0
  float va[8], vb[8], stored[8];
  Load8(gate + i, va);
  Load8(up + i, vb);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    va[j] = Apply<kOpSiluMul>(va[j], vb[j]);
    stored[j] = RoundBf16(va[j]);
  }
  Store8(out + i, va);
  const int64_t row = i / d;
  StoreInt8x8<G>(stored, QuantXRowAt(xq, row, rows, d, G, block), i - row * d);
}

template <typename T>
__global__ void AddSigmoidGatedKernel(T* acc, const T* x, const float* gate_logit, int64_t rows, int64_t cols) {
  AllowDependentLaunch();
  WaitForPrevious();
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  float g = SigmoidF(gate_logit[i / cols]);
  acc[i] = FromF<T>(ToF(acc[i]) + g * ToF(x[i]));
}

}  // namespace

void LaunchBinary(cudaStream_t s, int op, int dtype, const void* a, const void* b, void* out, int64_t n) {
  if (n <= 0) return;
  if (dtype == kBF16) {
    BinaryOfType<bf16>(s, op, a, b, out, n);
  } else {
    BinaryOfType<float>(s, op, a, b, out, n);
  }
  INFX_CUDA_CHECK_LAUNCH();
}

bool SiluMulInt8Fits(const void* gate, const void* up, const void* out, int64_t rows, int64_t d) {
  return rows >= 1 && d > 0 && d % 256 == 0 && Aligned16(gate) && Aligned16(up) && Aligned16(out);
}

void LaunchSiluMulInt8(cudaStream_t s, const void* gate, const void* up, void* out, int64_t rows, int64_t d, int group,
                       int64_t block, void* xq) {
  INFX_CHECK(SiluMulInt8Fits(gate, up, out, rows, d) && (group == 16 || group == 32) && block >= 1 && xq != nullptr);
  const unsigned blocks = Blocks(rows * d / 8, 256);
  auto* kernel = group == 16 ? SiluMulInt8Kernel<16> : SiluMulInt8Kernel<32>;
  LaunchDependent(kernel, blocks, 256, 0, s, static_cast<const bf16*>(gate), static_cast<const bf16*>(up),
                  static_cast<bf16*>(out), rows, d, block, static_cast<uint8_t*>(xq));
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchAddSigmoidGated(cudaStream_t s, int dtype, void* acc, const void* x, const float* gate_logit, int64_t rows,
                           int64_t cols) {
  int64_t n = rows * cols;
  if (n <= 0) return;
  if (dtype == kBF16) {
    LaunchDependent(AddSigmoidGatedKernel<bf16>, Blocks(n, 256), 256, 0, s, static_cast<bf16*>(acc),
                    static_cast<const bf16*>(x), gate_logit, rows, cols);
  } else {
    LaunchDependent(AddSigmoidGatedKernel<float>, Blocks(n, 256), 256, 0, s, static_cast<float*>(acc),
                    static_cast<const float*>(x), gate_logit, rows, cols);
  }
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
