// One step of a weight-streaming FP8 product on tensor cores, shared by the decode GEMV (gemv.cu) and the
// experts' decode kernels (moe_gemv.cu): f8_e4m3_b128 rows in the device layout (f8_layout.h: a row's k
// E4M3 codes, then its k / 128 f32 block scales). A step is 64 values of k of two rows g and g + 8 of a
// 16-row tile, 16 per thread t of a quad (bytes 16 t .. 16 t + 15 of the step), and the same 16 values of x;
// the codes convert exactly to bf16, four m16n8k16 products take them (thread t's values 4j .. 4j + 3 in the
// k-slots 2t, 2t + 1, 2t + 8, 2t + 9 of product j, x loaded with the same permutation), and the scale of
// the block the step lies in multiplies the step's products per row.
#pragma once

#include "backend/cuda/quant_mma.cuh"

namespace infernix::cuda {

struct F8Step {
  struct X {
    uint4 lo, hi;  // x at the thread's 16 codes
  };
  uint4 a, b;
  float sa, sb;
  static __device__ __forceinline__ void Mma(float* acc, const F8Step& w, const X& x) {
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const uint32_t wa[4] = {w.a.x, w.a.y, w.a.z, w.a.w}, wb[4] = {w.b.x, w.b.y, w.b.z, w.b.w};
    const uint32_t xv[8] = {x.lo.x, x.lo.y, x.lo.z, x.lo.w, x.hi.x, x.hi.y, x.hi.z, x.hi.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t a0, a1, a2, a3;
      qmma::E4m3x4ToBf16(wa[j], &a0, &a2);
      qmma::E4m3x4ToBf16(wb[j], &a1, &a3);
      MmaBf16(c, a0, a1, a2, a3, xv[2 * j], xv[2 * j + 1]);
    }
    acc[0] += w.sa * c[0];
    acc[1] += w.sa * c[1];
    acc[2] += w.sb * c[2];
    acc[3] += w.sb * c[3];
  }
};

// Step s of an FP8 row of k values: thread t's 16 codes, in one 16-byte load (kVec 16: the row is 16-byte
// aligned, k a multiple of 512) or two of 8, and the scale of their block.
template <int kVec>
__device__ __forceinline__ void LoadF8(const uint8_t* row, int s, int t, int k, uint4* q, float* scale) {
  const uint8_t* p = row + s * 64 + 16 * t;
  if constexpr (kVec == 16) {
    *q = __ldcs(reinterpret_cast<const uint4*>(p));
  } else {
    const uint2 lo = __ldcs(reinterpret_cast<const uint2*>(p)), hi = __ldcs(reinterpret_cast<const uint2*>(p) + 1);
    *q = make_uint4(lo.x, lo.y, hi.x, hi.y);
  }
  *scale = __ldg(reinterpret_cast<const float*>(row + k) + (s >> 1));
}

// x's 16 values at thread t's codes of step s, from a bf16 row.
__device__ __forceinline__ F8Step::X LoadF8StepX(const bf16* x, int64_t s, int t) {
  const uint4* p = reinterpret_cast<const uint4*>(x) + s * 8 + 2 * t;
  return F8Step::X{__ldg(p), __ldg(p + 1)};
}

}  // namespace infernix::cuda
