// Device-side helpers shared by the kernels: dtype-generic loads and stores, warp and block
// reductions, and 16-byte vectors of bf16. Included by .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/check.h"
#include "backend/cuda/kernels.h"

namespace infernix::cuda {

using bf16 = __nv_bfloat16;

// Element i of a float tensor of dtype code dt, as f32.
__device__ __forceinline__ float LoadF(const void* p, int dt, int64_t i) {
  if (dt == kBF16) return __bfloat162float(static_cast<const bf16*>(p)[i]);
  if (dt == kF32) return static_cast<const float*>(p)[i];
  return __half2float(static_cast<const __half*>(p)[i]);
}

__device__ __forceinline__ void StoreF(void* p, int dt, int64_t i, float v) {
  if (dt == kBF16) {
    static_cast<bf16*>(p)[i] = __float2bfloat16_rn(v);
  } else if (dt == kF32) {
    static_cast<float*>(p)[i] = v;
  } else {
    static_cast<__half*>(p)[i] = __float2half_rn(v);
  }
}

// The key head that Gated DeltaNet value head h reads (ops.h GdnHeadMapping: tiled or grouped).
__device__ __forceinline__ int GdnKeyHead(int h, int nk, int nv, int tiled) { return tiled ? h % nk : h / (nv / nk); }

// Typed conversions for kernels templated on the activation type (float or bf16).
__device__ __forceinline__ float ToF(float v) { return v; }
__device__ __forceinline__ float ToF(bf16 v) { return __bfloat162float(v); }
template <typename T>
__device__ __forceinline__ T FromF(float v);
template <>
__device__ __forceinline__ float FromF<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 FromF<bf16>(float v) {
  return __float2bfloat16_rn(v);
}

// 8 consecutive elements as f32, and back (16 bytes of bf16, or 32 of f32); p 16-byte aligned.
__device__ __forceinline__ void Load8(const bf16* p, float* v) {
  uint4 u = *reinterpret_cast<const uint4*>(p);
  const bf16* e = reinterpret_cast<const bf16*>(&u);
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = __bfloat162float(e[i]);
}
__device__ __forceinline__ void Load8(const float* p, float* v) {
  float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  v[0] = a.x;
  v[1] = a.y;
  v[2] = a.z;
  v[3] = a.w;
  v[4] = b.x;
  v[5] = b.y;
  v[6] = b.z;
  v[7] = b.w;
}
// 8 values rounded to bf16, as the 16 bytes Store8 writes.
__device__ __forceinline__ uint4 Pack8(const float* v) {
  uint4 u;
  bf16* e = reinterpret_cast<bf16*>(&u);
#pragma unroll
  for (int i = 0; i < 8; ++i) e[i] = __float2bfloat16_rn(v[i]);
  return u;
}
__device__ __forceinline__ void Store8(bf16* p, const float* v) { *reinterpret_cast<uint4*>(p) = Pack8(v); }
__device__ __forceinline__ void Store8(float* p, const float* v) {
  reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Inclusive prefix sum over the warp's lanes in lane order (lane l gets v of lanes 0..l, added from the
// nearest lanes out: the same order on every call).
template <typename T>
__device__ __forceinline__ T WarpInclusiveSum(T v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T y = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += y;
  }
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
// `shared` holds 32 floats; the call contains __syncthreads.
__device__ __forceinline__ float BlockSum(float v, float* shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = WarpSum(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float total = 0;
  for (int i = 0; i < warps; ++i) total += shared[i];
  return total;
}

// The last block of a grid to arrive, for work that needs every block's results: called by every thread
// of each of `blocks` blocks once the block has written what the last one reads (and read what it
// overwrites); true in the last block, which then sees all of it. counter is zero before the launch and
// is set back to zero once the last block has arrived. One thread per block orders the block's
// accesses, as a grid barrier does: the barrier puts them before its acquire-release add, and the add's
// acquire puts the other blocks' before what the last block does next (cheaper than a sequentially
// consistent __threadfence in every thread).
__device__ __forceinline__ bool LastBlockToArrive(int32_t* counter, int blocks) {
  __shared__ int last;
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t before = 0;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;\n" : "=r"(before) : "l"(counter) : "memory");
    last = before == blocks - 1;
    if (last) *counter = 0;  // every block has counted itself in
  }
  __syncthreads();
  return last != 0;
}

// A flag between kernels that may run at the same time (programmatic launches): the store publishes every
// write this thread has seen before it (a release at GPU scope), and a load that returns it makes them
// visible to the loading thread (an acquire).
__device__ __forceinline__ void StoreRelease(int32_t* p, int32_t v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int32_t LoadAcquire(const int32_t* p) {
  int32_t v = 0;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Lets the next kernel, when launched as a programmatic dependent (LaunchDependent, the GEMVs), start
// early; it waits for this one's results itself (WaitForPrevious). No-op before sm_90.
__device__ __forceinline__ void AllowDependentLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Waits until the kernels before this one in the stream have finished and their writes are visible
// (griddepcontrol.wait). A kernel started by LaunchDependent must call it before it touches memory that
// earlier kernels write or read; it may read what only the host or earlier copies wrote (layouts, page
// tables, weights) before. No-op before sm_90 and for plain launches.
__device__ __forceinline__ void WaitForPrevious() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// One bf16 tensor-core step: c (f32 16x8) += a (bf16 16x16, row) @ b (bf16 16x8, col), the
// mma.sync.m16n8k16 fragment layout (a0/a1: rows g / g+8 at k 2t..2t+1; a2/a3 the same at k + 8).
__device__ __forceinline__ void MmaBf16(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The same step with f16 operands.
__device__ __forceinline__ void MmaF16(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// 4 E4M3 codes (bytes 0-3 of v) as two f16 pairs (exact): codes 0 and 1 into lo, 2 and 3 into hi, the
// lower code in the lower half. One instruction per pair on sm_89 and later.
__device__ __forceinline__ void E4m3x4ToHalf(uint32_t v, uint32_t* lo, uint32_t* hi) {
  const __half2_raw h0 = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v & 0xFFFFu), __NV_E4M3);
  const __half2_raw h1 = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v >> 16), __NV_E4M3);
  *lo = static_cast<uint32_t>(h0.x) | (static_cast<uint32_t>(h0.y) << 16);
  *hi = static_cast<uint32_t>(h1.x) | (static_cast<uint32_t>(h1.y) << 16);
}

// The transpose of an 8 x 8 matrix of 16-bit values held as an mma fragment (lane 4 r + c holds row r,
// columns 2 c and 2 c + 1; the result in the same layout), in registers (sm_75 and later).
__device__ __forceinline__ uint32_t MovMatrixTrans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// Two floats as the f16 pair of an mma fragment register (lo in the low half).
__device__ __forceinline__ uint32_t PackHalf(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// Two floats as the bf16 pair of an mma fragment register (lo in the low half).
__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// One online-softmax step over a warp's tile of attention scores in the mma accumulator layout (s[nt][e]
// and s[nt][2 + e]: the key nt * 8 + 2 * (lane % 4) + e of rows g and g + 8, g = lane / 4), shared by the
// flash and the decode kernels: keep(nt, e, row_b) says whether a score counts; kept ones are scaled by
// scale_log2 (base-2 exponents), the others become -inf. Updates the two rows' running max m_run and this
// thread's partial sums l_run (reduced over the lane quad at the end), turns s into the unnormalised
// probabilities and rescales the output accumulators o. kSkipUnit: the whole warp skips the rescale when
// no row's factor differs from 1, as it does once the running maxima settle (most tiles of a long
// context; multiplying by 1 changes nothing, so the skip is exact). The vote costs registers (8 in the
// bf16 decode kernel at head_dim 128, a block per SM fewer), so kernels whose residency is bound by
// registers go without it.
template <bool kSkipUnit = false, int NT, int NO, typename Keep>
__device__ __forceinline__ void OnlineSoftmaxStep(float (&s)[NT][4], float (&o)[NO][4], float (&m_run)[2],
                                                  float (&l_run)[2], float scale_log2, Keep keep) {
  float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const bool keep_a = keep(nt, e, false), keep_b = keep(nt, e, true);
      s[nt][e] = keep_a ? s[nt][e] * scale_log2 : -INFINITY;
      s[nt][2 + e] = keep_b ? s[nt][2 + e] * scale_log2 : -INFINITY;
      mx_a = fmaxf(mx_a, s[nt][e]);
      mx_b = fmaxf(mx_b, s[nt][2 + e]);
    }
  }
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, off));
    mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, off));
  }
  const float new_a = fmaxf(m_run[0], mx_a), new_b = fmaxf(m_run[1], mx_b);
  const float use_a = new_a == -INFINITY ? 0.0f : new_a, use_b = new_b == -INFINITY ? 0.0f : new_b;
  const float alpha_a = exp2f(m_run[0] - use_a), alpha_b = exp2f(m_run[1] - use_b);
  m_run[0] = new_a;
  m_run[1] = new_b;
  float sum_a = 0, sum_b = 0;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    s[nt][0] = exp2f(s[nt][0] - use_a);
    s[nt][1] = exp2f(s[nt][1] - use_a);
    s[nt][2] = exp2f(s[nt][2] - use_b);
    s[nt][3] = exp2f(s[nt][3] - use_b);
    sum_a += s[nt][0] + s[nt][1];
    sum_b += s[nt][2] + s[nt][3];
  }
  l_run[0] = l_run[0] * alpha_a + sum_a;
  l_run[1] = l_run[1] * alpha_b + sum_b;
  if (!kSkipUnit || __any_sync(0xffffffffu, alpha_a != 1.0f || alpha_b != 1.0f)) {
#pragma unroll
    for (int i = 0; i < NO; ++i) {
      o[i][0] *= alpha_a;
      o[i][1] *= alpha_a;
      o[i][2] *= alpha_b;
      o[i][3] *= alpha_b;
    }
  }
}

// ---- cp.async and ldmatrix (sm_80+), shared by the tensor-core kernels ----
// 16 bytes global -> shared, asynchronously; the Zfill form writes zeros instead when !valid (gmem is then
// not read, but must be a valid address expression).
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void CpAsync8(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void CpAsync16Zfill(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes) : "memory");
}
__device__ __forceinline__ void CpAsync8Zfill(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = valid ? 8 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes) : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most kPending committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void LdMatrixX4(uint32_t* r, const void* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void LdMatrixX2(uint32_t* r, const void* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
}
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t* r, const void* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// Blocks of a persistent kernel (each loops over tiles): as many as are resident on the device at once
// with `threads` and `smem` bytes of dynamic shared memory, at most `tiles`.
template <typename... Params>
unsigned PersistentBlocks(void (*kernel)(Params...), int threads, size_t smem, int64_t tiles) {
  int device = 0, sms = 0, per_sm = 0;
  INFX_CUDA_CHECK(cudaGetDevice(&device));
  INFX_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  INFX_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  return static_cast<unsigned>(std::min<int64_t>(tiles, std::max(1, per_sm) * static_cast<int64_t>(sms)));
}

// The shared-memory carveout (percent of an SM's shared memory) that holds just `blocks_per_sm` blocks of
// `kernel` with `smem` bytes of dynamic shared memory each, the rest of the SM's unified L1 / shared memory
// staying L1. Without one the driver splits it for the kernel's highest occupancy, and (as the
// measurements read) an SM changes the split only when idle: the kernels launched after it as programmatic
// dependents start on SMs split that way, and the decode GEMVs, whose weight loads in flight land in L1,
// then stream more slowly (docs/cuda.md: the decode attention).
template <typename... Params>
int SharedCarveoutPercent(void (*kernel)(Params...), size_t smem, int64_t blocks_per_sm) {
  int device = 0, per_sm = 0, reserved = 0;
  INFX_CUDA_CHECK(cudaGetDevice(&device));
  INFX_CUDA_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  INFX_CUDA_CHECK(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device));
  cudaFuncAttributes attr{};
  INFX_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  const size_t need = static_cast<size_t>(std::max<int64_t>(1, blocks_per_sm)) *
                      (attr.sharedSizeBytes + smem + static_cast<size_t>(reserved));
  const size_t total = static_cast<size_t>(std::max(1, per_sm));
  return static_cast<int>(std::min<size_t>(100, (need * 100 + total - 1) / total));
}

// Launches `kernel` as a programmatic dependent of the stream's previous kernel (sm_90 and later): it may
// start while that kernel finishes, so its launch latency and its independent prologue overlap the
// other's tail. The kernel must call WaitForPrevious (above). A plain launch on older GPUs.
// With carveout >= 0, the launch also asks for that shared-memory carveout (SharedCarveoutPercent; sm_90
// and later, where launches overlap: before, every SM drains between kernels).
template <typename... Params, typename... Args>
void LaunchDependentWithCarveout(int carveout, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                                 cudaStream_t s, Args... args) {
  int device = 0, major = 0;
  INFX_CUDA_CHECK(cudaGetDevice(&device));
  INFX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[2]{};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributePreferredSharedMemoryCarveout;
  attr[1].val.sharedMemCarveout = static_cast<unsigned>(std::max(0, carveout));
  if (major >= 9) {
    cfg.attrs = attr;
    cfg.numAttrs = carveout >= 0 ? 2 : 1;
  }
  INFX_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...));
}
template <typename... Params, typename... Args>
void LaunchDependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, Args... args) {
  LaunchDependentWithCarveout(-1, kernel, grid, block, smem, s, args...);
}

// 8 consecutive weights (any float dtype) as f32; the bf16 path needs 16-byte alignment of w + i.
__device__ __forceinline__ void Load8W(const void* w, int dt, int64_t i, float* v) {
  if (dt == kBF16) {
    Load8(static_cast<const bf16*>(w) + i, v);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = LoadF(w, dt, i + j);
  }
}

// RMSNorm's arithmetic, one definition for every kernel that normalises (norm.cu, gemv.cu): the factor
// 1 / rms from the sum of squares of d values, and a value v scaled by it and by its weight w + offset.
__device__ __forceinline__ float RmsInv(float sum_sq, int64_t d, float eps) {
  return 1.0f / sqrtf(sum_sq / static_cast<float>(d) + eps);
}
__device__ __forceinline__ float RmsScale(float v, float inv, float w, float w_offset) {
  return v * inv * (w + w_offset);
}
// v rounded to bf16 (as a bf16 store and load would leave it).
__device__ __forceinline__ float RoundBf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
// a + b rounded to bf16, as the residual add stores it (the sum the norm after it reads).
__device__ __forceinline__ float AddBf16(float a, float b) { return RoundBf16(a + b); }

__device__ __forceinline__ float SiluF(float x) { return x / (1.0f + expf(-x)); }

// 8 consecutive values of a 32-value block rounded to int8 as llama.cpp's q8_1 rounds activations: the 4 lanes
// that hold the block (lanes 4i .. 4i + 3, 8 values each, in order) share max |v| (code = round(v 127 / max)).
// Returns the 8 codes packed little-endian in two words; *dx = max / 127, *sum = the codes' sum over the G
// values of the scale group (16: this lane and the next, 32: the 4 lanes). Every lane of the warp calls it.
// quant_mma.cuh's QuantizeActivations and the norm that rounds its rows for a quantized product (norm.cu) use
// it alike, so both give the same codes for the same x.
template <int G>
__device__ __forceinline__ uint2 RoundInt8x8(const float* v, float* dx, int* sum) {
  static_assert(G == 16 || G == 32, "scale groups of 16 or 32 values");
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(v[i]));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  uint32_t packed[2] = {0, 0};
  int s = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int q = __float2int_rn(v[i] * inv);
    s += q;
    packed[i / 4] |= (static_cast<uint32_t>(q) & 0xFFu) << (8 * (i % 4));
  }
  s += __shfl_xor_sync(0xffffffffu, s, 1);
  if constexpr (G == 32) s += __shfl_xor_sync(0xffffffffu, s, 2);
  *sum = s;
  *dx = amax / 127.0f;
  return make_uint2(packed[0], packed[1]);
}

// Where row `row` of x (`rows` rows of d values in kGemvXInt8's layout, QuantXBytes, in blocks of `block`
// rows) keeps its codes and its group factors (scale groups of g values).
struct QuantXRow {
  uint8_t* codes;
  float2* factors;
};
__device__ __forceinline__ QuantXRow QuantXRowAt(void* xq, int64_t row, int64_t rows, int64_t d, int g,
                                                 int64_t block) {
  const int64_t b = row / block, r = row - b * block, n = min(block, rows - b * block);
  uint8_t* base = static_cast<uint8_t*>(xq) + QuantXBytes<int64_t>(b * block, d, g);
  return {base + r * (d + 16), reinterpret_cast<float2*>(base + n * (d + 16)) + r * (d / g)};
}

// Columns col .. col + 7 of a row, as stored (bf16 values), rounded to int8 (RoundInt8x8) into that row's
// place in kGemvXInt8's layout: the norm and SiLU-and-multiply that round x for a quantized product. Every
// lane of the warp calls it.
template <int G>
__device__ __forceinline__ void StoreInt8x8(const float* stored, const QuantXRow& at, int64_t col) {
  float dx;
  int codes_sum;
  const uint2 codes = RoundInt8x8<G>(stored, &dx, &codes_sum);
  *reinterpret_cast<uint2*>(at.codes + col) = codes;
  if ((threadIdx.x & (G / 8 - 1)) == 0) at.factors[col / G] = make_float2(dx, dx * static_cast<float>(codes_sum));
}

// RoundInt8x8 for a block of 32 consecutive values of a row held one a lane (lane i: value i of the block):
// the same codes and factors, bit for bit (the maximum and the sums do not depend on the order). Returns the
// lane's code; *dx = max / 127, *sum = the codes' sum over the lane's scale group of G values. Every lane of
// the warp calls it.
template <int G>
__device__ __forceinline__ int RoundInt8Lane(float v, float* dx, int* sum) {
  static_assert(G == 16 || G == 32, "scale groups of 16 or 32 values");
  float amax = fabsf(v);
#pragma unroll
  for (int off = 16; off >= 1; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  const int q = __float2int_rn(v * inv);
  int s = q;
#pragma unroll
  for (int off = G / 2; off >= 1; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  *sum = s;
  *dx = amax / 127.0f;
  return q;
}

// Column col of a row, as stored, held one a lane (32 consecutive columns a warp), rounded to int8
// (RoundInt8Lane) into that row's place in kGemvXInt8's layout: the fused decode attention's output. The first
// lane of each scale group stores the group's factors. Every lane of the warp calls it.
template <int G>
__device__ __forceinline__ void StoreInt8Lane(float stored, const QuantXRow& at, int64_t col) {
  float dx;
  int codes_sum;
  at.codes[col] = static_cast<uint8_t>(RoundInt8Lane<G>(stored, &dx, &codes_sum));
  if ((threadIdx.x & (G - 1)) == 0) at.factors[col / G] = make_float2(dx, dx * static_cast<float>(codes_sum));
}

// The SiLU-and-multiply epilogue of a gate / up pair of GEMV tiles (bf16 outputs), element i of both: the
// gate tile's pass (up == false) rounds its sum as stored and keeps it in `gate`; the up tile's pass (the
// same thread and element, later) writes up and SiLU(gate) * up as the SiLU-and-multiply op rounds it. A
// product whose output is silu_out itself is not written.
__device__ __forceinline__ void StoreGateUpPair(bool up, void* out, void* silu_out, int64_t i, float sum, float& gate) {
  if (!up) {
    gate = RoundBf16(sum);
    if (out != silu_out) StoreF(out, kBF16, i, gate);
  } else {
    const float u = RoundBf16(sum);
    if (out != silu_out) StoreF(out, kBF16, i, u);
    StoreF(silu_out, kBF16, i, SiluF(gate) * u);
  }
}
__device__ __forceinline__ float SigmoidF(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ __forceinline__ bool Aligned16Dev(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

__device__ __forceinline__ float ToWeight(float v) { return v; }
__device__ __forceinline__ float ToWeight(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float ToWeight(__half v) { return __half2float(v); }

inline bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

inline unsigned Blocks(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace infernix::cuda
