// RMSNorm (plain weight or 1 + w), and the gated RMSNorm of Gated DeltaNet: one warp per row, the
// sum of squares in f32, then a second pass over the row (from L1) that scales and stores.
#include "backend/cuda/device_util.cuh"

namespace infernix::cuda {
namespace {

constexpr int kRowsPerBlock = 4;

template <typename T, bool kVec, bool kGated>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    RmsNormKernel(const T* x, const T* z, const void* w, int w_dtype, float eps, float w_offset, T* out, int64_t rows,
                  int64_t d) {
  AllowDependentLaunch();
  WaitForPrevious();
  int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const T* xr = x + row * d;
  const T* zr = kGated ? z + row * d : nullptr;
  T* yr = out + row * d;
  float ss = 0;
  if constexpr (kVec) {
    for (int64_t i = lane * 8; i < d; i += 256) {
      float v[8];
      Load8(xr + i, v);
#pragma unroll
      for (int j = 0; j < 8; ++j) ss += v[j] * v[j];
    }
  } else {
    for (int64_t i = lane; i < d; i += 32) {
      float v = ToF(xr[i]);
      ss += v * v;
    }
  }
  ss = WarpSum(ss);
  const float inv = RmsInv(ss, d, eps);
  if constexpr (kVec) {
    for (int64_t i = lane * 8; i < d; i += 256) {
      float v[8], zv[8];
      Load8(xr + i, v);
      if constexpr (kGated) Load8(zr + i, zv);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float wv = LoadF(w, w_dtype, i + j) + w_offset;
        v[j] = kGated ? wv * (v[j] * inv) * SiluF(zv[j]) : v[j] * inv * wv;
      }
      Store8(yr + i, v);
    }
  } else {
    for (int64_t i = lane; i < d; i += 32) {
      float v = ToF(xr[i]);
      float wv = LoadF(w, w_dtype, i) + w_offset;
      yr[i] = FromF<T>(kGated ? wv * (v * inv) * SiluF(ToF(zr[i])) : v * inv * wv);
    }
  }
}

// sum = a + b (rounded to T and stored), then the norm of the stored row, one warp per row.
template <typename T, bool kVec>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    AddRmsNormKernel(const T* a, const T* b, T* sum, const void* w, int w_dtype, float eps, float w_offset, T* out,
                     int64_t rows, int64_t d) {
  AllowDependentLaunch();
  WaitForPrevious();
  int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const T* ar = a + row * d;
  const T* br = b + row * d;
  T* sr = sum + row * d;
  T* yr = out + row * d;
  float ss = 0;
  if constexpr (kVec) {
    for (int64_t i = lane * 8; i < d; i += 256) {
      float va[8], vb[8];
      Load8(ar + i, va);
      Load8(br + i, vb);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        va[j] = ToF(FromF<T>(va[j] + vb[j]));
        ss += va[j] * va[j];
      }
      Store8(sr + i, va);
    }
  } else {
    for (int64_t i = lane; i < d; i += 32) {
      float v = ToF(FromF<T>(ToF(ar[i]) + ToF(br[i])));
      sr[i] = FromF<T>(v);
      ss += v * v;
    }
  }
  ss = WarpSum(ss);
  const float inv = RmsInv(ss, d, eps);
  if constexpr (kVec) {
    for (int64_t i = lane * 8; i < d; i += 256) {
      float v[8];
      Load8(sr + i, v);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = RmsScale(v[j], inv, LoadF(w, w_dtype, i + j), w_offset);
      Store8(yr + i, v);
    }
  } else {
    for (int64_t i = lane; i < d; i += 32) yr[i] = FromF<T>(RmsScale(ToF(sr[i]), inv, LoadF(w, w_dtype, i), w_offset));
  }
}

template <typename T>
void LaunchAdd(cudaStream_t s, const void* a, const void* b, void* sum, const void* w, int w_dtype, float eps,
               float w_offset, void* out, int64_t rows, int64_t d) {
  unsigned blocks = Blocks(rows, kRowsPerBlock);
  bool vec = d % 8 == 0 && Aligned16(a) && Aligned16(b) && Aligned16(sum) && Aligned16(out);
  auto at = static_cast<const T*>(a);
  auto bt = static_cast<const T*>(b);
  auto st = static_cast<T*>(sum);
  auto ot = static_cast<T*>(out);
  if (vec) {
    LaunchDependent(AddRmsNormKernel<T, true>, blocks, 32 * kRowsPerBlock, 0, s, at, bt, st, w, w_dtype, eps, w_offset,
                    ot, rows, d);
  } else {
    LaunchDependent(AddRmsNormKernel<T, false>, blocks, 32 * kRowsPerBlock, 0, s, at, bt, st, w, w_dtype, eps, w_offset,
                    ot, rows, d);
  }
  INFX_CUDA_CHECK_LAUNCH();
}

// Block per row for few rows (decode): each thread keeps up to kMaxChunks groups of 8 values in
// registers, so the row is read once; bf16, d % 8 == 0, 16-byte aligned rows and weights.
constexpr int kRowThreads = 512, kMaxChunks = 4;

// G (16 or 32): the normalised rows are also rounded to int8 blocks for a quantized product (LaunchRmsNormInt8):
// the codes of the stored bf16 values, as that product's own prologue would round them, in blocks of `block`
// rows.
template <bool kAdd, int G = 0>
__global__ void __launch_bounds__(kRowThreads)
    RowNormKernel(const bf16* a, const bf16* b, bf16* sum, const void* w, int w_dtype, float eps, float w_offset,
                  bf16* out, int64_t d, uint8_t* xq, int64_t block) {
  AllowDependentLaunch();
  const int64_t row = blockIdx.x, chunks = d / 8;
  // The norm's weight is the model's: loaded before the wait, so that only x's loads stand between the wait
  // and the sum of squares, and nothing between that and the stores.
  float wv[kMaxChunks][8];
#pragma unroll
  for (int q = 0; q < kMaxChunks; ++q) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(q) * blockDim.x;
    if (c < chunks) Load8W(w, w_dtype, c * 8, wv[q]);
  }
  WaitForPrevious();
  __shared__ float red[32];
  float v[kMaxChunks][8];
  float ss = 0;
#pragma unroll
  for (int q = 0; q < kMaxChunks; ++q) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(q) * blockDim.x;
    if (c < chunks) {
      Load8(a + row * d + c * 8, v[q]);
      if constexpr (kAdd) {
        float vb[8];
        Load8(b + row * d + c * 8, vb);
#pragma unroll
        for (int j = 0; j < 8; ++j) v[q][j] = AddBf16(v[q][j], vb[j]);
        Store8(sum + row * d + c * 8, v[q]);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) ss += v[q][j] * v[q][j];
    }
  }
  ss = BlockSum(ss, red);
  const float inv = RmsInv(ss, d, eps);
#pragma unroll
  for (int q = 0; q < kMaxChunks; ++q) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(q) * blockDim.x;
    if (c < chunks) {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[q][j] = RmsScale(v[q][j], inv, wv[q][j], w_offset);
      Store8(out + row * d + c * 8, v[q]);
      if constexpr (G != 0) {  // c < chunks is the same for the whole warp here: d % 256 == 0
        float stored[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) stored[j] = RoundBf16(v[q][j]);
        StoreInt8x8<G>(stored, QuantXRowAt(xq, row, gridDim.x, d, G, block), c * 8);
      }
    }
  }
}

// The threads of RowNormKernel for rows of d values: a chunk of 8 values each, whole warps, at most kRowThreads.
int RowThreads(int64_t d) {
  return static_cast<int>(std::min<int64_t>(kRowThreads, (std::min<int64_t>(d / 8, kRowThreads) + 31) / 32 * 32));
}

// Whether RowNormKernel takes these rows: bf16, up to 64 rows of at most kRowThreads * kMaxChunks chunks of 8
// values, 16-byte aligned rows (and a bf16 weight).
bool RowNormFits(int dtype, const void* a, const void* b, const void* sum, const void* w, int w_dtype, const void* out,
                 int64_t rows, int64_t d) {
  return dtype == kBF16 && rows <= 64 && d % 8 == 0 && d / 8 <= static_cast<int64_t>(kRowThreads) * kMaxChunks &&
         (w_dtype != kBF16 || Aligned16(w)) && Aligned16(a) && Aligned16(out) &&
         (b == nullptr || (Aligned16(b) && Aligned16(sum)));
}

// RowNormKernel<b != nullptr, G> over `rows` rows (G, xq: LaunchRmsNormInt8's rounding; 0, null: none).
template <int G>
void LaunchRow(cudaStream_t s, const void* a, const void* b, void* sum, const void* w, int w_dtype, float eps,
               float w_offset, void* out, int64_t rows, int64_t d, int64_t block, void* xq) {
  const bf16* at = static_cast<const bf16*>(a);
  const auto blocks = static_cast<unsigned>(rows);
  if (b != nullptr) {
    LaunchDependent(RowNormKernel<true, G>, blocks, RowThreads(d), 0, s, at, static_cast<const bf16*>(b),
                    static_cast<bf16*>(sum), w, w_dtype, eps, w_offset, static_cast<bf16*>(out), d,
                    static_cast<uint8_t*>(xq), block);
  } else {
    LaunchDependent(RowNormKernel<false, G>, blocks, RowThreads(d), 0, s, at, nullptr, nullptr, w, w_dtype, eps,
                    w_offset, static_cast<bf16*>(out), d, static_cast<uint8_t*>(xq), block);
  }
}

// Whether RowNormKernel serves this call; then launches it.
bool TryRowNorm(cudaStream_t s, int dtype, const void* a, const void* b, void* sum, const void* w, int w_dtype, float eps,
                float w_offset, void* out, int64_t rows, int64_t d) {
  if (!RowNormFits(dtype, a, b, sum, w, w_dtype, out, rows, d)) return false;
  LaunchRow<0>(s, a, b, sum, w, w_dtype, eps, w_offset, out, rows, d, 1, nullptr);
  INFX_CUDA_CHECK_LAUNCH();
  return true;
}

template <typename T, bool kGated>
void Launch(cudaStream_t s, const void* x, const void* z, const void* w, int w_dtype, float eps, float w_offset,
            void* out, int64_t rows, int64_t d) {
  unsigned blocks = Blocks(rows, kRowsPerBlock);
  bool vec = d % 8 == 0 && Aligned16(x) && Aligned16(out) && (!kGated || Aligned16(z));
  const T* xt = static_cast<const T*>(x);
  const T* zt = static_cast<const T*>(z);
  T* ot = static_cast<T*>(out);
  if (vec) {
    LaunchDependent(RmsNormKernel<T, true, kGated>, blocks, 32 * kRowsPerBlock, 0, s, xt, zt, w, w_dtype, eps, w_offset,
                    ot, rows, d);
  } else {
    LaunchDependent(RmsNormKernel<T, false, kGated>, blocks, 32 * kRowsPerBlock, 0, s, xt, zt, w, w_dtype, eps, w_offset,
                    ot, rows, d);
  }
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace

void LaunchRmsNorm(cudaStream_t s, int dtype, const void* x, const void* w, int w_dtype, float eps, float w_offset,
                   void* out, int64_t rows, int64_t d) {
  if (rows <= 0) return;
  if (TryRowNorm(s, dtype, x, nullptr, nullptr, w, w_dtype, eps, w_offset, out, rows, d)) return;
  if (dtype == kBF16) {
    Launch<bf16, false>(s, x, nullptr, w, w_dtype, eps, w_offset, out, rows, d);
  } else {
    Launch<float, false>(s, x, nullptr, w, w_dtype, eps, w_offset, out, rows, d);
  }
}

void LaunchAddRmsNorm(cudaStream_t s, int dtype, const void* a, const void* b, void* sum, const void* w, int w_dtype,
                      float eps, float w_offset, void* out, int64_t rows, int64_t d) {
  if (rows <= 0) return;
  if (TryRowNorm(s, dtype, a, b, sum, w, w_dtype, eps, w_offset, out, rows, d)) return;
  if (dtype == kBF16) {
    LaunchAdd<bf16>(s, a, b, sum, w, w_dtype, eps, w_offset, out, rows, d);
  } else {
    LaunchAdd<float>(s, a, b, sum, w, w_dtype, eps, w_offset, out, rows, d);
  }
}

bool RmsNormInt8Fits(const void* a, const void* b, const void* sum, const void* w, int w_dtype, const void* out,
                     int64_t rows, int64_t d) {
  return rows >= 1 && rows <= kQuantGemvWideMaxTokens && d % 256 == 0 &&
         RowNormFits(kBF16, a, b, sum, w, w_dtype, out, rows, d);
}

void LaunchRmsNormInt8(cudaStream_t s, const void* a, const void* b, void* sum, const void* w, int w_dtype, float eps,
                       float w_offset, void* out, int64_t rows, int64_t d, int group, int64_t block, void* xq) {
  INFX_CHECK(RmsNormInt8Fits(a, b, sum, w, w_dtype, out, rows, d) && (group == 16 || group == 32) && block >= 1 &&
             xq != nullptr);
  const auto launch = group == 16 ? LaunchRow<16> : LaunchRow<32>;
  launch(s, a, b, sum, w, w_dtype, eps, w_offset, out, rows, d, block, xq);
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchGatedRmsNorm(cudaStream_t s, int dtype, const void* x, const void* z, const void* w, int w_dtype, float eps,
                        void* out, int64_t rows, int64_t d) {
  if (rows <= 0) return;
  if (dtype == kBF16) {
    Launch<bf16, true>(s, x, z, w, w_dtype, eps, 0.0f, out, rows, d);
  } else {
    Launch<float, true>(s, x, z, w, w_dtype, eps, 0.0f, out, rows, d);
  }
}

}  // namespace infernix::cuda
