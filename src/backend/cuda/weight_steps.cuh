// Weight-streaming products on tensor cores, shared by the decode GEMV (gemv.cu) and the experts' decode
// kernels (moe_gemv.cu): TileProduct, the loop over a 16-row tile's steps that keeps a round of weight
// loads in flight, and F8Step, one step of FP8 rows: f8_e4m3_b128 in the device layout (f8_layout.h: a
// row's k E4M3 codes, then its k / 128 f32 block scales). An FP8 step is 64 values of k of two rows g and
// g + 8 of a 16-row tile, 16 per thread t of a quad (bytes 16 t .. 16 t + 15 of the step), and the same 16
// values of x; the codes convert exactly to bf16, four m16n8k16 products take them (thread t's values
// 4j .. 4j + 3 in the k-slots 2t, 2t + 1, 2t + 8, 2t + 9 of product j, x loaded with the same
// permutation), and the scale of the block the step lies in multiplies the step's products per row.
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

// acc (C fragment of one m16n8k16 tile) += rows [g, g + 8] of a 16-row weight tile . x over `steps` steps:
// load_step(s, &step) loads what a thread takes of the weights at step s (t picks its piece of the quad's),
// load_x(s) the matching values of x; use_x: whether this thread's column has a token (else x is zero);
// after_first_loads() runs once the first round of weight loads is out, before x is read (the shared
// expert's blocks wait for the kernel before there: its weights are known without the routing).
// Shaped like gemv.cu's loop (each group's weight loads issued before the loop or at the top of the next
// round, conditional loads instead of branches), which keeps all kU steps' loads in flight: a loop that
// loads and multiplies in one round compiles to loads interleaved with the products (40 registers instead
// of 102 in a test kernel), which then wait for each other.
// kW warps share the steps (warp w takes w, w + kW, ...); kAcc partial sums per thread: the u-th step of a
// round goes into acc[u % kAcc] (kU a multiple of kAcc), so that acc[a] of warp w sums the steps that warp
// w + kW a of a kernel with kW kAcc warps and one sum each would (the same products in the same order).
template <int kU, int kW, int kAcc, typename Step, typename LoadStep, typename LoadX, typename AfterFirstLoads>
__device__ __forceinline__ void TileProduct(int steps, int warp, bool use_x, LoadStep load_step, LoadX load_x,
                                            AfterFirstLoads after_first_loads, float (*acc)[4]) {
  static_assert(kU % kAcc == 0, "a round's steps must cycle through the partial sums");
  Step w[kU];
  auto load_weights = [&](int s0) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int s = s0 + u * kW;
      if (s < steps) {
        load_step(s, &w[u]);
      } else {
        w[u] = Step{};
      }
    }
  };
  load_weights(warp);
  after_first_loads();
  for (int s0 = warp; s0 < steps; s0 += kW * kU) {
    if (s0 != warp) load_weights(s0);
    typename Step::X xr[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int s = s0 + u * kW;
      xr[u] = use_x && s < steps ? load_x(s) : typename Step::X{};
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) Step::Mma(acc[u % kAcc], w[u], xr[u]);
  }
}

}  // namespace infernix::cuda
