// Device-side decoding of GGUF block types, shared by the quantized GEMV (quant.cu) and the quantized
// MoE experts (moe_quant.cu): LoadSub<T> gives the 32 values of one sub-block of a row (a legacy block,
// or an eighth of a K-quant super-block), computed in the same order as src/quant's CPU decoders. FP8
// rows are in the device layout (f8_layout.h: the row's codes, then its scales).
#pragma once

#include <cuda_fp8.h>

#include "backend/cuda/device_util.cuh"

namespace infernix::cuda {

__device__ __forceinline__ float Half(const uint8_t* p) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(p[0] | (p[1] << 8))));
}

// Little-endian 32-bit word from 4 bytes at any address.
__device__ __forceinline__ uint32_t Word(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

// The IQ4_NL / IQ4_XS values (ggml's kvalues_iq4nl: -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25,
// 38, 53, 69, 89, 113) of the four nibbles held in the low halves of the bytes of q (each 0..15), as four
// signed bytes: byte permutes pick within the table's low and high eight values, bit 3 chooses.
__device__ __forceinline__ uint32_t Iq4Lookup(uint32_t q) {
  const uint32_t sel = (q & 0x7u) | ((q >> 4) & 0x70u) | ((q >> 8) & 0x700u) | ((q >> 12) & 0x7000u);
  const uint32_t lo = __byte_perm(0xBFAD9881u, 0xF6EADDCFu, sel);
  const uint32_t hi = __byte_perm(0x26190D01u, 0x71594535u, sel);
  const uint32_t pick = ((q & 0x08080808u) >> 3) * 0xFFu;
  return (hi & pick) | (lo & ~pick);
}
__device__ __forceinline__ float Iq4Value(int q) {
  return static_cast<float>(static_cast<int8_t>(Iq4Lookup(static_cast<uint32_t>(q)) & 0xFFu));
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

// The 32 values of sub-block `s` of a row of k values of type T starting at `row` (k: FP8 only, whose
// scales follow the row's codes).
template <int T>
__device__ __forceinline__ void LoadSub(const uint8_t* row, int64_t s, float* v, int64_t k) {
  (void)k;
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
  } else if constexpr (T == kQ4_1) {  // f16 d, f16 m, 16 bytes of nibbles as Q4_0: d * q + m
    const uint8_t* b = row + s * 20;
    const float d = Half(b), m = Half(b + 2);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      v[i] = static_cast<float>(b[4 + i] & 0xF) * d + m;
      v[i + 16] = static_cast<float>(b[4 + i] >> 4) * d + m;
    }
  } else if constexpr (T == kQ5_0 || T == kQ5_1) {  // f16 d, (Q5_1: f16 m), 32 fifth bits, nibbles as Q4_0
    constexpr int kHead = T == kQ5_0 ? 2 : 4;
    const uint8_t* b = row + s * (kHead + 20);
    const float d = Half(b), m = T == kQ5_1 ? Half(b + 2) : 0.0f;
    const uint32_t qh = Word(b + kHead);
    const uint8_t* qs = b + kHead + 4;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int lo = static_cast<int>((qs[i] & 0xFu) | (((qh >> i) & 1u) << 4));
      const int hi = static_cast<int>((qs[i] >> 4) | (((qh >> (i + 16)) & 1u) << 4));
      if constexpr (T == kQ5_0) {
        v[i] = static_cast<float>(lo - 16) * d;
        v[i + 16] = static_cast<float>(hi - 16) * d;
      } else {
        v[i] = static_cast<float>(lo) * d + m;
        v[i + 16] = static_cast<float>(hi) * d + m;
      }
    }
  } else if constexpr (T == kQ2_K) {  // scales[16], qs[64], f16 d, f16 dmin; sub-blocks of 16
    const uint8_t* b = row + (s / 8) * 84;
    const int j = static_cast<int>(s % 8), h = j / 4, shift = 2 * (j % 4);
    const float d = Half(b + 80), dmin = Half(b + 82);
    const uint8_t* q = b + 16 + 32 * h;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const uint8_t sc = b[2 * j + half];
      const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
#pragma unroll
      for (int l = 0; l < 16; ++l) v[16 * half + l] = dl * static_cast<float>((q[16 * half + l] >> shift) & 3) - ml;
    }
  } else if constexpr (T == kIQ4_NL) {  // f16 d, 16 bytes of table indices as Q4_0
    const uint8_t* b = row + s * 18;
    const float d = Half(b);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      v[i] = d * Iq4Value(b[2 + i] & 0xF);
      v[i + 16] = d * Iq4Value(b[2 + i] >> 4);
    }
  } else if constexpr (T == kIQ4_XS) {  // f16 d, u16 scales_h, scales_l[4], qs[128]; sub-blocks of 32
    const uint8_t* b = row + (s / 8) * 136;
    const int j = static_cast<int>(s % 8);
    const int low = (b[4 + j / 2] >> (4 * (j % 2))) & 0xF;
    const int high = ((b[2] | (b[3] << 8)) >> (2 * j)) & 3;
    const float dl = Half(b) * static_cast<float>((low | (high << 4)) - 32);
    const uint8_t* qs = b + 8 + 16 * j;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      v[i] = dl * Iq4Value(qs[i] & 0xF);
      v[i + 16] = dl * Iq4Value(qs[i] >> 4);
    }
  } else if constexpr (T == kF8E4M3B128) {  // the device layout: k E4M3 codes, then an f32 scale per 128
    const float d = *reinterpret_cast<const float*>(row + k + (s / 4) * 4);
    const uint8_t* q = row + s * 32;
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
  switch (T) {
    case kQ4_0: return 18;
    case kQ4_1: return 20;
    case kQ5_0: return 22;
    case kQ5_1: return 24;
    case kQ8_0: return 34;
    case kQ2_K: return 84;
    case kQ3_K: return 110;
    case kQ4_K: return 144;
    case kQ5_K: return 176;
    case kQ6_K: return 210;
    case kIQ4_NL: return 18;
    case kIQ4_XS: return 136;
    default: return 132;  // kF8E4M3B128
  }
}
template <int T>
__host__ __device__ constexpr int64_t BlockValues() {
  return (T <= kQ8_0 || T == kIQ4_NL) ? 32 : T == kF8E4M3B128 ? 128 : 256;
}

// Calls f(std::integral_constant<int, T>{}) for a block type code that QuantTypeSupported accepts.
template <typename F>
auto ByQuantType(int type, F&& f) {
  switch (type) {
    case kQ4_0: return f(std::integral_constant<int, kQ4_0>{});
    case kQ4_1: return f(std::integral_constant<int, kQ4_1>{});
    case kQ5_0: return f(std::integral_constant<int, kQ5_0>{});
    case kQ5_1: return f(std::integral_constant<int, kQ5_1>{});
    case kQ8_0: return f(std::integral_constant<int, kQ8_0>{});
    case kQ2_K: return f(std::integral_constant<int, kQ2_K>{});
    case kQ3_K: return f(std::integral_constant<int, kQ3_K>{});
    case kQ4_K: return f(std::integral_constant<int, kQ4_K>{});
    case kQ5_K: return f(std::integral_constant<int, kQ5_K>{});
    case kQ6_K: return f(std::integral_constant<int, kQ6_K>{});
    case kIQ4_NL: return f(std::integral_constant<int, kIQ4_NL>{});
    case kIQ4_XS: return f(std::integral_constant<int, kIQ4_XS>{});
    default: return f(std::integral_constant<int, kF8E4M3B128>{});
  }
}

template <int T>
__host__ __device__ constexpr int64_t QuantRowBytes(int64_t k) {
  return k / BlockValues<T>() * BlockBytes<T>();
}

// acc += the dot product of a decoded sub-block v[32] with 32 activations from a 16-byte aligned a.
template <typename A>
__device__ __forceinline__ void AddDot32(float& acc, const float* v, const A* a) {
#pragma unroll
  for (int i = 0; i < 32; i += 8) {
    float av[8];
    Load8(a + i, av);
#pragma unroll
    for (int e = 0; e < 8; ++e) acc += v[i + e] * av[e];
  }
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
// decodes sub-block i of a step. FP8 rows, whose codes and scales lie apart (device layout), are read in
// place instead.
template <int T, typename A>
__device__ __forceinline__ float WarpDotQuantRowStaged(const uint8_t* row, const A* act, int64_t k, int lane,
                                                       uint8_t* stage) {
  constexpr int64_t kSubsPerBlock = BlockValues<T>() / 32;
  const int64_t subs = k / 32;
  // Activations in 16-byte loads when the row allows (it does for every real model's sizes).
  const bool vector_act = (reinterpret_cast<uintptr_t>(act) & 15u) == 0;
  float acc = 0.0f, v[32];
  auto add = [&](const A* a) {
    if (vector_act) {
      AddDot32(acc, v, a);
    } else {
#pragma unroll
      for (int i = 0; i < 32; ++i) acc += v[i] * ToF(a[i]);
    }
  };
  if constexpr (T == kF8E4M3B128) {
    (void)stage;
    for (int64_t s = lane; s < subs; s += 32) {
      LoadSub<T>(row, s, v, k);
      add(act + s * 32);
    }
  } else {
    for (int64_t s0 = 0; s0 < subs; s0 += 32) {
      const int64_t n_sub = subs - s0 < 32 ? subs - s0 : 32;
      WarpCopyToShared(stage, row + s0 / kSubsPerBlock * BlockBytes<T>(), n_sub / kSubsPerBlock * BlockBytes<T>(),
                       lane);
      __syncwarp();
      if (lane < n_sub) {
        LoadSub<T>(stage, lane, v, k);
        add(act + (s0 + lane) * 32);
      }
      __syncwarp();
    }
  }
  return WarpSum(acc);
}

}  // namespace infernix::cuda
