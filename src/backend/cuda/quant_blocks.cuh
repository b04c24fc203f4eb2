// Device-side decoding of GGUF block types, shared by the quantized GEMV (quant.cu) and the quantized
// MoE experts (moe_quant.cu): LoadSub<T> gives the 32 values of one sub-block of a row (a legacy block,
// or an eighth of a K-quant super-block), computed in the same order as src/quant's CPU decoders.
#pragma once

#include <cuda_fp8.h>

#include "backend/cuda/device_util.cuh"

namespace infernix::cuda {

__device__ __forceinline__ float Half(const uint8_t* p) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(p[0] | (p[1] << 8))));
}

// The 6-bit scale and min of sub-block j of a Q4_K / Q5_K super-block (12 packed bytes).
__device__ __forceinline__ void ScaleMinK4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// The 32 values of sub-block `s` of a row of type T starting at `row`.
template <int T>
__device__ __forceinline__ void LoadSub(const uint8_t* row, int64_t s, float* v) {
  if constexpr (T == kQ8_0) {
    const uint8_t* b = row + s * 34;
    const float d = Half(b);
    const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = d * static_cast<float>(q[i]);
  } else if constexpr (T == kQ4_0) {
    const uint8_t* b = row + s * 18;
    const float d = Half(b);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      v[i] = d * static_cast<float>((b[2 + i] & 0xF) - 8);
      v[i + 16] = d * static_cast<float>((b[2 + i] >> 4) - 8);
    }
  } else if constexpr (T == kQ4_K) {
    const uint8_t* b = row + (s / 8) * 144;
    const int j = static_cast<int>(s % 8);
    int sc, m;
    ScaleMinK4(j, b + 4, &sc, &m);
    const float d = Half(b) * static_cast<float>(sc), mn = Half(b + 2) * static_cast<float>(m);
    const uint8_t* q = b + 16 + (j / 2) * 32;
    const int shift = (j & 1) * 4;
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = d * static_cast<float>((q[i] >> shift) & 0xF) - mn;
  } else if constexpr (T == kQ5_K) {
    const uint8_t* b = row + (s / 8) * 176;
    const int j = static_cast<int>(s % 8);
    int sc, m;
    ScaleMinK4(j, b + 4, &sc, &m);
    const float d = Half(b) * static_cast<float>(sc), mn = Half(b + 2) * static_cast<float>(m);
    const uint8_t* qh = b + 16;
    const uint8_t* q = b + 48 + (j / 2) * 32;
    const int shift = (j & 1) * 4;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      int hi = (qh[i] >> j) & 1;
      v[i] = d * static_cast<float>(((q[i] >> shift) & 0xF) + 16 * hi) - mn;
    }
  } else if constexpr (T == kQ3_K) {  // hmask[32], qs[64], 12 bytes of 6-bit scales, f16 d
    const uint8_t* b = row + (s / 8) * 110;
    const int j = static_cast<int>(s % 8), half = j / 4, pair = j % 4;
    const float d_all = Half(b + 108);
    const uint8_t* sc = b + 96;
    const uint8_t* q = b + 32 + 32 * half;
    const int shift = 2 * pair, hbit = 4 * half + pair;
#pragma unroll
    for (int h16 = 0; h16 < 2; ++h16) {
      // Scale index is = 8 * half + 2 * pair + h16: low 4 bits from byte is % 8 (low or high nibble),
      // high 2 bits from byte 8 + is % 4 (bit pair is / 4), minus 32.
      const int is = 8 * half + 2 * pair + h16;
      const int low = (is < 8 ? sc[is] : sc[is - 8] >> 4) & 0xF;
      const int high = (sc[8 + is % 4] >> (2 * (is / 4))) & 3;
      const float dl = d_all * static_cast<float>((low | (high << 4)) - 32);
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const int l = 16 * h16 + i;
        const int qv = ((q[l] >> shift) & 3) - (((b[l] >> hbit) & 1) ? 0 : 4);
        v[l] = dl * static_cast<float>(qv);
      }
    }
  } else if constexpr (T == kF8E4M3B128) {  // f32 scale, 128 E4M3 values (an FP8 checkpoint's block)
    const uint8_t* b = row + (s / 4) * 132;
    const float d = *reinterpret_cast<const float*>(b);
    const uint8_t* q = b + 4 + (s % 4) * 32;
#pragma unroll
    for (int i = 0; i < 32; ++i)
      v[i] = d * __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(q[i]), __NV_E4M3)));
  } else {  // kQ6_K: ql[128], qh[64], int8 scales[16], f16 d
    const uint8_t* b = row + (s / 8) * 210;
    const int j = static_cast<int>(s % 8), half = j / 4, quarter = j % 4;
    const uint8_t* ql = b + half * 64 + (quarter & 1) * 32;
    const uint8_t* qh = b + 128 + half * 32;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + half * 8 + 2 * quarter;
    const float d = Half(b + 208);
    const int lshift = (quarter >> 1) * 4, hshift = 2 * quarter;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      int q = (((ql[i] >> lshift) & 0xF) | (((qh[i] >> hshift) & 3) << 4)) - 32;
      v[i] = d * static_cast<float>(sc[i / 16]) * static_cast<float>(q);
    }
  }
}

template <int T>
__host__ __device__ constexpr int64_t BlockBytes() {
  return T == kQ8_0 ? 34 : T == kQ4_0 ? 18 : T == kQ3_K ? 110 : T == kQ4_K ? 144 : T == kQ5_K ? 176 : T == kF8E4M3B128 ? 132 : 210;
}
template <int T>
__host__ __device__ constexpr int64_t BlockValues() {
  return (T == kQ8_0 || T == kQ4_0) ? 32 : T == kF8E4M3B128 ? 128 : 256;
}

template <int T>
__host__ __device__ constexpr int64_t QuantRowBytes(int64_t k) {
  return k / BlockValues<T>() * BlockBytes<T>();
}

// Bytes of 32 sub-blocks: the most a warp stages at once.
template <int T>
__host__ __device__ constexpr int64_t QuantStepBytes() {
  return 32 * 32 / BlockValues<T>() * BlockBytes<T>();
}

// Copies `bytes` bytes from global to shared memory with the whole warp, coalesced: 8-byte words when
// both ends are 8-byte aligned and the size allows, else single bytes.
__device__ __forceinline__ void WarpCopyToShared(uint8_t* dst, const uint8_t* src, int64_t bytes, int lane) {
  if (((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) | static_cast<uintptr_t>(bytes)) & 7u) ==
      0) {
    const uint2* s = reinterpret_cast<const uint2*>(src);
    uint2* d = reinterpret_cast<uint2*>(dst);
    for (int64_t i = lane; i < bytes / 8; i += 32) d[i] = __ldg(s + i);
  } else {
    for (int64_t i = lane; i < bytes; i += 32) dst[i] = __ldg(src + i);
  }
}

// Warp dot product of a quantized row (k values) with a row of activations (bf16 or f32); every lane
// gets the sum, reduced in a fixed order. The row is read in coalesced steps of 32 sub-blocks through
// `stage` (shared memory of QuantStepBytes<T>() bytes, 8-byte aligned, owned by this warp); lane i
// decodes sub-block i of a step.
template <int T, typename A>
__device__ __forceinline__ float WarpDotQuantRowStaged(const uint8_t* row, const A* act, int64_t k, int lane,
                                                       uint8_t* stage) {
  constexpr int64_t kSubsPerBlock = BlockValues<T>() / 32;
  const int64_t subs = k / 32;
  // Activations in 16-byte loads when the row allows (it does for every real model's sizes).
  const bool vector_act = (reinterpret_cast<uintptr_t>(act) & 15u) == 0;
  float acc = 0.0f, v[32];
  for (int64_t s0 = 0; s0 < subs; s0 += 32) {
    const int64_t n_sub = subs - s0 < 32 ? subs - s0 : 32;
    WarpCopyToShared(stage, row + s0 / kSubsPerBlock * BlockBytes<T>(), n_sub / kSubsPerBlock * BlockBytes<T>(), lane);
    __syncwarp();
    if (lane < n_sub) {
      LoadSub<T>(stage, lane, v);
      const A* a = act + (s0 + lane) * 32;
      if (vector_act) {
#pragma unroll
        for (int i = 0; i < 32; i += 8) {
          float av[8];
          Load8(a + i, av);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc += v[i + e] * av[e];
        }
      } else {
#pragma unroll
        for (int i = 0; i < 32; ++i) acc += v[i] * ToF(a[i]);
      }
    }
    __syncwarp();
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  return acc;
}

}  // namespace infernix::cuda
