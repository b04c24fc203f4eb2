// Building blocks of the tensor-core products with block-quantized weights (quant_gemv_mma.cu: dense
// decode GEMV; moe_quant.cu: routed experts): staging chunks of 256 values of 16 weight rows into shared
// memory with cp.async, the activations rounded to int8 blocks (or f16 for FP8), and the mma.sync
// product of one staged chunk. quant_gemv_mma.cu's header describes the method.
#pragma once

#include "backend/cuda/quant_blocks.cuh"

namespace infernix::cuda::qmma {

constexpr int kWarps = 8;
constexpr int kChunk = 256;  // values of a row per warp step

// Bytes of a chunk of one row of block type T.
template <int T>
__host__ __device__ constexpr int ChunkBytes() {
  return static_cast<int>(kChunk / BlockValues<T>() * BlockBytes<T>());
}
// 16-byte words of a staged row chunk: a chunk starts at a multiple of gcd(chunk bytes, 16) within its
// first word. Odd, so that the 8 rows a warp's fragment loads touch at once fall in different banks.
__host__ __device__ constexpr int Gcd(int a, int b) { return b == 0 ? a : Gcd(b, a % b); }
template <int T>
__host__ __device__ constexpr int StageWords() {
  return ((ChunkBytes<T>() + 16 - Gcd(ChunkBytes<T>(), 16) + 15) / 16) | 1;
}
// Chunks in flight per warp: three when a chunk is small, else two (shared memory per block).
template <int T>
__host__ __device__ constexpr int Stages() {
  return ChunkBytes<T>() <= 176 ? 3 : 2;
}
template <int T>
__host__ __device__ constexpr size_t StageBytes() {
  return static_cast<size_t>(kWarps) * Stages<T>() * 16 * StageWords<T>() * 16;
}
// The dense product's stages at nt tiles of 8 tokens (quant_gemv_mma.cu; nt > 1: the wide form): x takes
// most of the shared memory, so from three tiles on the warps stage two chunks, not three.
template <int T>
__host__ __device__ constexpr int WideStages(int nt) {
  return nt >= 3 ? 2 : Stages<T>();
}
template <int T>
__host__ __device__ constexpr size_t WideStageBytes(int nt) {
  return static_cast<size_t>(kWarps) * WideStages<T>(nt) * 16 * StageWords<T>() * 16;
}
template <int T>
__host__ __device__ constexpr bool IsIntType() {
  return T != kF8E4M3B128;
}

// Values of a scale group per type (QuantGroupValues, kernels.h).
template <int T>
__host__ __device__ constexpr int GroupValues() {
  return QuantGroupValues(T);
}

// Shared memory of the integer types, after the warps' staging buffers: per warp a table of the 16 rows'
// group scales of the current chunk ({scale, min} [16][groups + 1]); then x as int8, xq [n][k + 16], and
// per token and scale group {dx, dx * sum(xq)}, xs [n][k / G].
template <int T>
__host__ __device__ constexpr int TableStride() {
  return kChunk / GroupValues<T>() + 1;
}
template <int T>
__host__ __device__ constexpr size_t TableBytes() {
  return static_cast<size_t>(kWarps) * 16 * TableStride<T>() * 8;
}
__host__ __device__ inline int64_t XqStride(int64_t k) { return k + 16; }
template <int T>
__host__ __device__ inline size_t ActBytes(int64_t n, int64_t k) {
  return TableBytes<T>() + static_cast<size_t>(n * XqStride(k) + n * (k / GroupValues<T>()) * 8);
}

__device__ __forceinline__ uint32_t Lds32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }
// 4 bytes at an address that is only 2-byte aligned.
__device__ __forceinline__ uint32_t Lds32Unaligned(const uint8_t* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint32_t* w = reinterpret_cast<const uint32_t*>(a & ~uintptr_t{3});
  return __funnelshift_r(w[0], w[1], static_cast<unsigned>(a & 3u) * 8u);
}
__device__ __forceinline__ uint2 Lds64(const uint8_t* p) { return *reinterpret_cast<const uint2*>(p); }
// 8 (4) bytes at base + off, base 4-byte aligned, off even and known when the code is compiled (an unrolled
// loop's constant): aligned words, or two byte permutes of three words; no run-time shift.
__device__ __forceinline__ uint2 Lds64At(const uint8_t* base, int off) {
  const uint32_t* w = reinterpret_cast<const uint32_t*>(base + (off & ~3));
  if ((off & 3) == 0) return make_uint2(w[0], w[1]);
  return make_uint2(__byte_perm(w[0], w[1], 0x5432), __byte_perm(w[1], w[2], 0x5432));
}
__device__ __forceinline__ uint32_t Lds32At(const uint8_t* base, int off) {
  const uint32_t* w = reinterpret_cast<const uint32_t*>(base + (off & ~3));
  return (off & 3) == 0 ? w[0] : __byte_perm(w[0], w[1], 0x5432);
}
__device__ __forceinline__ float HalfAt(const uint8_t* p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short*>(p)));
}

template <bool kSignedA>
__device__ __forceinline__ void MmaInt(int* c, uint32_t a0, uint32_t a1, uint32_t b) {
  if constexpr (kSignedA) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b));
  }
}

template <bool kSignedA>
__device__ __forceinline__ void MmaInt32(int* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  if constexpr (kSignedA) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}

// Q4_K / Q5_K: the 8 bytes of 4-bit codes that sub-blocks 2p and 2p + 1 share (low nibbles the even one's,
// high nibbles the odd one's) at values 8t..8t+7 of a staged chunk c; Q5_K's fifth bits (bit j of each byte
// for sub-block j, the same 8 bytes for all eight); and sub-block j's codes from them. The one-token product
// (ChunkProductInt1) loads each pair's bytes and the fifth bits once; the multi-token one takes them through
// Codes32 per sub-block (with the loads hoisted there as well, Qwen3-8B q4_k's 2-token step was 1.1% longer
// on an H100, docs/performance.md).
template <int T>
__device__ __forceinline__ uint2 KQuantBytes(const uint8_t* c, int p, int t) {
  return Lds64(c + (T == kQ4_K ? 16 : 48) + 32 * p + 8 * t);
}
template <int T>
__device__ __forceinline__ uint2 KQuantHighBits(const uint8_t* c, int t) {
  if constexpr (T == kQ5_K) return Lds64(c + 16 + 8 * t);
  return make_uint2(0u, 0u);
}
template <int T>
__device__ __forceinline__ uint2 KCodes(uint2 q, uint2 h, int j) {
  const int sh = 4 * (j & 1);
  if constexpr (T == kQ5_K) {
    return make_uint2(((q.x >> sh) & 0x0F0F0F0Fu) | (((h.x >> j) & 0x01010101u) << 4),
                      ((q.y >> sh) & 0x0F0F0F0Fu) | (((h.y >> j) & 0x01010101u) << 4));
  }
  return make_uint2((q.x >> sh) & 0x0F0F0F0Fu, (q.y >> sh) & 0x0F0F0F0Fu);
}

// The 8 integer codes (unsigned, before the type's offset; Q8_0 and the IQ4 table values: signed) at values 8t..8t+7 of
// 32-value sub-block j (0..7) of a staged chunk `c` (256 values of one row), for the types with 32-value groups.
// Their chunks are whole 16-byte words, so `c` is 16-byte aligned and each block's offset decides at
// compile time how its bytes fall on words.
template <int T>
__device__ __forceinline__ uint2 Codes32(const uint8_t* c, int j, int t) {
  if constexpr (T == kQ8_0) {
    return Lds64At(c + 8 * t, 34 * j + 2);
  } else if constexpr (T == kQ4_0) {  // values 0..15: low nibbles of bytes 0..15; 16..31: high nibbles
    const uint2 q = Lds64At(c + 8 * (t & 1), 18 * j + 2);
    const int sh = 4 * (t >> 1);
    return make_uint2((q.x >> sh) & 0x0F0F0F0Fu, (q.y >> sh) & 0x0F0F0F0Fu);
  } else if constexpr (T == kQ4_1) {
    const uint2 q = Lds64At(c + 8 * (t & 1), 20 * j + 4);
    const int sh = 4 * (t >> 1);
    return make_uint2((q.x >> sh) & 0x0F0F0F0Fu, (q.y >> sh) & 0x0F0F0F0Fu);
  } else if constexpr (T == kQ5_0 || T == kQ5_1) {  // nibbles as Q4_0, fifth bit i of the block's qh word
    constexpr int kHead = T == kQ5_0 ? 2 : 4;
    const int b = (kHead + 20) * j;
    const uint2 q = Lds64At(c + 8 * (t & 1), b + kHead + 4);
    const uint32_t qh = Lds32At(c, b + kHead) >> (8 * t);
    const int sh = 4 * (t >> 1);
    // Bit e of a 4-bit field to bit 4 of byte e (the shifted copies do not overlap: no carries).
    const uint32_t h0 = ((qh & 0xFu) * 0x00204081u & 0x01010101u) << 4;
    const uint32_t h1 = (((qh >> 4) & 0xFu) * 0x00204081u & 0x01010101u) << 4;
    return make_uint2(((q.x >> sh) & 0x0F0F0F0Fu) | h0, ((q.y >> sh) & 0x0F0F0F0Fu) | h1);
  } else if constexpr (T == kIQ4_NL || T == kIQ4_XS) {  // table values of nibbles laid out as Q4_0
    const uint2 q = T == kIQ4_NL ? Lds64At(c + 8 * (t & 1), 18 * j + 2) : Lds64(c + 8 + 16 * j + 8 * (t & 1));
    const int sh = 4 * (t >> 1);
    return make_uint2(Iq4Lookup((q.x >> sh) & 0x0F0F0F0Fu), Iq4Lookup((q.y >> sh) & 0x0F0F0F0Fu));
  } else {  // kQ4_K, kQ5_K
    return KCodes<T>(KQuantBytes<T>(c, j >> 1, t), KQuantHighBits<T>(c, t), j);
  }
}

// The 4 integer codes (unsigned, before the type's offset) at values 4t..4t+3 of 16-value group gi
// (0..15) of a staged chunk, for the types with 16-value groups.
template <int T>
__device__ __forceinline__ uint32_t Codes16(const uint8_t* c, int gi, int t) {
  const int j = gi >> 1, i = 16 * (gi & 1) + 4 * t;  // sub-block of 32, value within it
  if constexpr (T == kQ2_K) {
    return (Lds32(c + 16 + 32 * (j >> 2) + i) >> (2 * (j & 3))) & 0x03030303u;
  } else if constexpr (T == kQ6_K) {
    const int half = j >> 2, quarter = j & 3;
    const uint32_t ql = Lds32Unaligned(c + half * 64 + (quarter & 1) * 32 + i);
    const uint32_t qh = Lds32Unaligned(c + 128 + half * 32 + i);
    return ((ql >> (4 * (quarter >> 1))) & 0x0F0F0F0Fu) | (((qh >> (2 * quarter)) & 0x03030303u) << 4);
  } else {  // kQ3_K
    const int half = j >> 2, pair = j & 3;
    const uint32_t q = Lds32Unaligned(c + 32 + 32 * half + i);
    const uint32_t h = Lds32Unaligned(c + i);
    return ((q >> (2 * pair)) & 0x03030303u) | (((h >> (4 * half + pair)) & 0x01010101u) << 2);
  }
}

// Scale and offset of scale group s of a staged chunk: value = scale * code - min.
template <int T>
__device__ __forceinline__ void GroupScale(const uint8_t* c, int s, float* scale, float* min) {
  if constexpr (T == kQ8_0) {
    *scale = HalfAt(c + 34 * s);
    *min = 0.0f;
  } else if constexpr (T == kQ4_0) {
    *scale = HalfAt(c + 18 * s);
    *min = 8.0f * *scale;
  } else if constexpr (T == kQ4_1 || T == kQ5_1) {
    constexpr int kBytes = T == kQ4_1 ? 20 : 24;
    *scale = HalfAt(c + kBytes * s);
    *min = -HalfAt(c + kBytes * s + 2);
  } else if constexpr (T == kQ5_0) {
    *scale = HalfAt(c + 22 * s);
    *min = 16.0f * *scale;
  } else if constexpr (T == kIQ4_NL) {
    *scale = HalfAt(c + 18 * s);
    *min = 0.0f;
  } else if constexpr (T == kIQ4_XS) {
    const int low = (c[4 + s / 2] >> (4 * (s % 2))) & 0xF;
    const int high = (*reinterpret_cast<const unsigned short*>(c + 2) >> (2 * s)) & 3;
    *scale = HalfAt(c) * static_cast<float>((low | (high << 4)) - 32);
    *min = 0.0f;
  } else if constexpr (T == kQ2_K) {
    *scale = HalfAt(c + 80) * static_cast<float>(c[s] & 0xF);
    *min = HalfAt(c + 82) * static_cast<float>(c[s] >> 4);
  } else if constexpr (T == kQ4_K || T == kQ5_K) {
    int sc, m;
    ScaleMinK4(s, c + 4, &sc, &m);
    *scale = HalfAt(c) * static_cast<float>(sc);
    *min = HalfAt(c + 2) * static_cast<float>(m);
  } else if constexpr (T == kQ6_K) {
    *scale = HalfAt(c + 208) * static_cast<float>(static_cast<int8_t>(c[192 + s]));
    *min = 32.0f * *scale;
  } else {  // kQ3_K: 16 6-bit scales, low 4 bits in bytes 96..103, high 2 bits in 104..107, minus 32
    const uint8_t* sc = c + 96;
    const int low = (s < 8 ? sc[s] : sc[s - 8] >> 4) & 0xF;
    const int high = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    *scale = HalfAt(c + 108) * static_cast<float>((low | (high << 4)) - 32);
    *min = 4.0f * *scale;
  }
}

// 4 E4M3 codes as two bf16 pairs (exact: every E4M3 value is a bf16 value).
__device__ __forceinline__ void E4m3x4ToBf16(uint32_t v, uint32_t* lo, uint32_t* hi) {
  const __half2_raw h0 = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v & 0xFFFFu), __NV_E4M3);
  const __half2_raw h1 = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v >> 16), __NV_E4M3);
  const __nv_bfloat162 b0 = __float22bfloat162_rn(__half22float2(__half2(h0)));
  const __nv_bfloat162 b1 = __float22bfloat162_rn(__half22float2(__half2(h1)));
  *lo = *reinterpret_cast<const uint32_t*>(&b0);
  *hi = *reinterpret_cast<const uint32_t*>(&b1);
}

// Rounds x [n, k] to int8 blocks of 32 in shared memory (integer types), with {dx, dx * sum} per group
// of G values; a thread takes 8 values at a time. The loads of kBatch rounds are issued before any is used
// (x comes from L2 or memory: one wait instead of kBatch; more registers while it runs). kFlat: over all
// tokens at once (x is contiguous: unit u is values 8u .. 8u + 7 of the flattened x), the rounds' loads
// across token boundaries, so that 32 tokens of 4,096 values take 8 waits at kBatch 8 rather than 32 or
// more; else token after token (up to 8 tokens, the product's one-launch form: the flattened form's index
// arithmetic made the q4_k step 2% longer at one token and 4% at eight, docs/performance.md).
template <int G, int kBatch = 1, bool kFlat = true>
__device__ __forceinline__ void QuantizeActivations(const bf16* x, int n, int k, int8_t* xq, float2* xs) {
  const int per_token = k / 8;  // a multiple of 32: groups of 4 threads stay inside one 32-value block
  const int units = kFlat ? n * per_token : per_token;  // of a pass: all of x, or one token
  const int step = static_cast<int>(blockDim.x);
  for (int pass = 0; pass < (kFlat ? 1 : n); ++pass) {
    const bf16* xp = x + static_cast<int64_t>(pass) * k;
    for (int u0 = 0; u0 < units; u0 += kBatch * step) {
      uint4 raw[kBatch];
#pragma unroll
      for (int r = 0; r < kBatch; ++r) {
        const int u = u0 + r * step + static_cast<int>(threadIdx.x);
        if (u0 + r * step < units) {  // the two forms' address arithmetic as measured (n k < 2^31 either way)
          if constexpr (kFlat) {
            raw[r] = *reinterpret_cast<const uint4*>(xp + static_cast<int64_t>(u < units ? u : 0) * 8);
          } else {
            raw[r] = *reinterpret_cast<const uint4*>(xp + (u < units ? u * 8 : 0));
          }
        }
      }
#pragma unroll
      for (int r = 0; r < kBatch; ++r) {
        if (u0 + r * step >= units) break;  // the same for the whole block
        const int u = u0 + r * step + static_cast<int>(threadIdx.x);
        const bool ok = u < units;
        const int tk = kFlat ? (ok ? u / per_token : 0) : pass;
        const int v0 = ok ? (kFlat ? u - tk * per_token : u) * 8 : 0;
        float v[8];
        const bf16* e = reinterpret_cast<const bf16*>(&raw[r]);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = __bfloat162float(e[i]);
        float dx;
        int sum;
        const uint2 codes = RoundInt8x8<G>(v, &dx, &sum);
        if (ok) {
          *reinterpret_cast<uint2*>(xq + tk * XqStride(k) + v0) = codes;
          if ((threadIdx.x & (G / 8 - 1)) == 0)
            xs[tk * (k / G) + v0 / G] = make_float2(dx, dx * static_cast<float>(sum));
        }
      }
    }
  }
}

// FP8 with x in shared memory as f16: per token, x times a power of two that keeps max |x| below 2^15
// (exact: bf16 values fit f16's mantissa; only values below 2^-29 max |x| lose bits as subnormals), and
// the inverse factor for the result. xh [n][k + 16] f16, xf [n] f32.
__device__ __forceinline__ void ActivationsToHalf(const bf16* x, int n, int k, __half* xh, float* xf) {
  __shared__ float red[kWarps];
  const int per_token = k / 8;
  for (int tk = 0; tk < n; ++tk) {
    const bf16* xt = x + static_cast<int64_t>(tk) * k;
    float amax = 0.0f;
    for (int u = static_cast<int>(threadIdx.x); u < per_token; u += blockDim.x) {
      float v[8];
      Load8(xt + u * 8, v);
#pragma unroll
      for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(v[e]));
    }
    amax = WarpMax(amax);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = amax;
    __syncthreads();
    amax = red[0];
#pragma unroll
    for (int i = 1; i < kWarps; ++i) amax = fmaxf(amax, red[i]);
    int ex = 0;
    frexpf(amax, &ex);  // amax < 2^ex
    const float up = amax > 0.0f ? ldexpf(1.0f, 15 - ex) : 1.0f;
    if (threadIdx.x == 0) xf[tk] = 1.0f / up;
    for (int u = static_cast<int>(threadIdx.x); u < per_token; u += blockDim.x) {
      float v[8];
      Load8(xt + u * 8, v);
      uint32_t h[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const __half2 pair = __floats2half2_rn(v[2 * e] * up, v[2 * e + 1] * up);
        h[e] = *reinterpret_cast<const uint32_t*>(&pair);
      }
      *reinterpret_cast<uint4*>(xh + tk * XqStride(k) + u * 8) = make_uint4(h[0], h[1], h[2], h[3]);
    }
    __syncthreads();  // red is reused for the next token
  }
}

// Where row 0's chunk c starts in its staged words (below). FP8 (device layout, f8_layout.h) stages its
// chunk as 16 words of codes and, in word 16, the chunk's two block scales.
template <int T>
__device__ __forceinline__ int StagedChunkOffset(int c) {
  return T == kF8E4M3B128 ? 0 : (c * ChunkBytes<T>()) & 15;
}
// The staged FP8 row: a chunk's 256 codes, then its 2 scales.
constexpr int kF8StagedScales = 256;

// Stages the 16 rows' bytes of chunk c (rows row0.. of w, the last ones clamped to rows - 1) into dst:
// the 16-byte words covering [c * kCb, (c+1) * kCb) of each row (rows are 16-byte aligned, so the words
// stay inside the row). Row r's chunk then starts at dst + r * StageWords * 16 + StagedChunkOffset<T>(c).
// FP8: the chunk's 16 words of codes, and its scales (8 bytes after the row's codes) into word 16.
template <int T>
__device__ __forceinline__ void StageChunk(uint8_t* dst, const uint8_t* w, int row0, int rows, size_t row_bytes, int c,
                                           int lane) {
  constexpr int kCb = ChunkBytes<T>(), kW = StageWords<T>();
  if constexpr (T == kF8E4M3B128) {
    static_assert(kW == 17);
    const size_t k = row_bytes / 132 * 128;
    for (int i = lane; i < 16 * kW; i += 32) {
      const int r = i / kW, wd = i % kW;
      const uint8_t* row = w + static_cast<size_t>(min(row0 + r, rows - 1)) * row_bytes;
      if (wd < 16) {
        CpAsync16(dst + i * 16, row + c * kChunk + wd * 16);
      } else {
        CpAsync8(dst + i * 16, row + k + c * 8);
      }
    }
    return;
  }
  const int start = c * kCb, a0 = start & ~15;
  const int words = (((start + kCb + 15) & ~15) - a0) / 16;
  for (int i = lane; i < 16 * kW; i += 32) {
    const int r = i / kW, wd = i % kW;
    if (wd < words)
      CpAsync16(dst + i * 16, w + static_cast<size_t>(min(row0 + r, rows - 1)) * row_bytes + a0 + wd * 16);
  }
}

// The integer mma of scale group j of rows g and g + 8 (codes wg / wh, 32 values, or a0 / a1: 16 values) with
// this thread's B row xb: C columns 2t, 2t + 1 into cc (zeroed first).
template <int T>
__device__ __forceinline__ void GroupMma32(const int8_t* xb, int j, int t, uint2 wg, uint2 wh, int* cc) {
  const uint2 bx = *reinterpret_cast<const uint2*>(xb + 32 * j + 8 * t);
  cc[0] = cc[1] = cc[2] = cc[3] = 0;
  MmaInt32<T == kQ8_0 || T == kIQ4_NL || T == kIQ4_XS>(cc, wg.x, wh.x, wg.y, wh.y, bx.x, bx.y);
}
__device__ __forceinline__ void GroupMma16(const int8_t* xb, int gi, int t, uint32_t a0, uint32_t a1, int* cc) {
  const uint32_t bx = *reinterpret_cast<const uint32_t*>(xb + 16 * gi + 4 * t);
  cc[0] = cc[1] = cc[2] = cc[3] = 0;
  MmaInt<false>(cc, a0, a1, bx);
}

// Adds factor x (one staged chunk of an integer type) @ (int8 activations) to acc for NT tiles of 8 tokens:
// acc[4 i .. 4 i + 3] are rows g, g, g+8, g+8 of the chunk times tile i's C columns 2t, 2t+1. rows16: the
// chunk's 16 rows, StageWords<T>() words apart; xb[i]: this thread's B row in tile i (token of column g) at
// the chunk's first value; xs0[i], xs1[i]: the {dx, dx * sum} of tile i's C columns' tokens at the chunk's
// first scale group; table: this warp's scale table. The weights' codes and scales are decoded once for
// all NT tiles.
template <int T, int NT = 1>
__device__ __forceinline__ void ChunkProductInt(const uint8_t* rows16, float2* table, const int8_t* const* xb,
                                                const float2* const* xs0, const float2* const* xs1, float factor,
                                                int lane, float* acc) {
  constexpr int kG = GroupValues<T>(), kTs = TableStride<T>(), kW = StageWords<T>(), kGroups = kChunk / kG;
  const int g = lane >> 2, t = lane & 3;
  const uint8_t* rg = rows16 + g * kW * 16;  // row g's chunk
  const uint8_t* rh = rg + 8 * kW * 16;      // row g + 8's
  // The 16 rows' group scales (times factor), computed once per chunk by the warp: lane l takes row l % 16
  // and groups of one parity, so a type's branches on the group index are uniform across the warp.
#pragma unroll
  for (int e = 0; e < kGroups / 2; ++e) {
    const int r = lane & 15, grp = 2 * e + (lane >> 4);
    float sc, mn;
    GroupScale<T>(rows16 + r * kW * 16, grp, &sc, &mn);
    table[r * kTs + grp] = make_float2(factor * sc, factor * mn);
  }
  __syncwarp();
  // acc += scale_row * (dx * sum(code * xq)) - min_row * dx * sum(xq), for one scale group and tile i.
  auto accumulate = [&](const int* cc, int grp, int i) {
    const float2 sg = table[g * kTs + grp], sh = table[(g + 8) * kTs + grp];
    const float2 x0 = xs0[i][grp], x1 = xs1[i][grp];
    float* a = acc + 4 * i;
    a[0] = fmaf(sg.x, x0.x * static_cast<float>(cc[0]), fmaf(-sg.y, x0.y, a[0]));
    a[1] = fmaf(sg.x, x1.x * static_cast<float>(cc[1]), fmaf(-sg.y, x1.y, a[1]));
    a[2] = fmaf(sh.x, x0.x * static_cast<float>(cc[2]), fmaf(-sh.y, x0.y, a[2]));
    a[3] = fmaf(sh.x, x1.x * static_cast<float>(cc[3]), fmaf(-sh.y, x1.y, a[3]));
  };
  if constexpr (kG == 32) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint2 wg = Codes32<T>(rg, j, t), wh = Codes32<T>(rh, j, t);
#pragma unroll
      for (int i = 0; i < NT; ++i) {
        int cc[4];
        GroupMma32<T>(xb[i], j, t, wg, wh, cc);
        accumulate(cc, j, i);
      }
    }
  } else {
#pragma unroll
    for (int gi = 0; gi < 16; ++gi) {
      const uint32_t a0 = Codes16<T>(rg, gi, t), a1 = Codes16<T>(rh, gi, t);
#pragma unroll
      for (int i = 0; i < NT; ++i) {
        int cc[4];
        GroupMma16(xb[i], gi, t, a0, a1, cc);
        accumulate(cc, gi, i);
      }
    }
  }
}

// Whether a type's values carry an offset (value = scale * code - min, min not always zero).
template <int T>
__host__ __device__ constexpr bool HasMin() {
  return !(T == kQ8_0 || T == kIQ4_NL || T == kIQ4_XS);
}

// Byte e of w times f, exactly as static_cast<float>(byte) * f: the byte placed in the mantissa of 2^23
// (one byte permute) and 2^23 f taken off in the same rounding (f_2p23 = -2^23 f, exact).
__device__ __forceinline__ float ByteTimes(uint32_t w, int e, float f, float f_2p23) {
  return fmaf(__uint_as_float(__byte_perm(w, 0x4B000000u, 0x7650u + static_cast<unsigned>(e))), f, f_2p23);
}

// The scales and offsets of the scale groups h * G / 2 .. (h + 1) * G / 2 - 1 of a staged chunk row (G groups
// in the chunk): half the row's groups, as the one-token product's table needs them.
template <int T>
__device__ __forceinline__ void HalfGroupScales(const uint8_t* c, int h, float* sc, float* mn) {
  constexpr int kHalf = kChunk / GroupValues<T>() / 2;
  if constexpr (T == kQ4_K || T == kQ5_K) {
    // The four 6-bit scales (mins) of sub-blocks 0..3 are bytes 0..3 (4..7) of the 12 scale bytes, low 6
    // bits; those of 4..7 are the low (high) nibbles of bytes 8..11 with the top 2 bits of bytes 0..3
    // (4..7) above them. Four at once, one per byte of a word.
    const uint4 head = *reinterpret_cast<const uint4*>(c);  // f16 d, f16 dmin, 12 scale bytes
    const uint32_t w0 = head.y, w1 = head.z, w2 = head.w;
    const uint32_t s = h == 0 ? (w0 & 0x3F3F3F3Fu) : ((w2 & 0x0F0F0F0Fu) | ((w0 >> 2) & 0x30303030u));
    const uint32_t m = h == 0 ? (w1 & 0x3F3F3F3Fu) : (((w2 >> 4) & 0x0F0F0F0Fu) | ((w1 >> 2) & 0x30303030u));
    const float2 dm = __half22float2(*reinterpret_cast<const __half2*>(&head.x));
    const float d_off = -8388608.0f * dm.x, m_off = -8388608.0f * dm.y;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      sc[e] = ByteTimes(s, e, dm.x, d_off);
      mn[e] = ByteTimes(m, e, dm.y, m_off);
    }
  } else {
#pragma unroll
    for (int e = 0; e < kHalf; ++e) GroupScale<T>(c, h * kHalf + e, &sc[e], &mn[e]);
  }
}

// Floats per row of the one-token product's table: the row's group scales, its summed offsets, padding to
// 16 bytes (rows 48 or 80 bytes apart: the 8 rows a warp reads at once fall in different banks).
template <int T>
__host__ __device__ constexpr int Table1Stride() {
  return kChunk / GroupValues<T>() + 4;
}
static_assert(16 * Table1Stride<kQ4_K>() <= 2 * 16 * TableStride<kQ4_K>() &&
                  16 * Table1Stride<kQ6_K>() <= 2 * 16 * TableStride<kQ6_K>(),
              "the one-token table fits the warp's table space");

// ChunkProductInt for one token (every B column the same row of x; the decode of one sequence, and every
// routed expert's row): the warp's table holds each row's group scales already multiplied by the token's
// dx and the factor, and each row's offsets summed over the chunk (sum of min * dx * sum(xq)) after them,
// so a scale group costs one multiply-add per row. Only acc[0] and acc[2] (rows g and g + 8, column 2t:
// all columns are equal) are updated. xs: the token's {dx, dx * sum} at the chunk's first group (16-byte
// aligned). Q4_K's odd sub-blocks are the high nibbles of their bytes: they go into the mma masked but not
// shifted (code * 16, at most 240: an exact u8) and their scales are divided by 16 (exact).
template <int T>
__device__ __forceinline__ void ChunkProductInt1(const uint8_t* rows16, float* table, const int8_t* xb,
                                                 const float2* xs, float factor, int lane, float* acc) {
  constexpr int kG = GroupValues<T>(), kTs = Table1Stride<T>(), kW = StageWords<T>(), kGroups = kChunk / kG;
  constexpr int kHalf = kGroups / 2;
  constexpr bool kNibbleX16 = T == kQ4_K;
  const int g = lane >> 2, t = lane & 3;
  const uint8_t* rg = rows16 + g * kW * 16;  // row g's chunk
  const uint8_t* rh = rg + 8 * kW * 16;      // row g + 8's
  {                                          // lane l: row l % 16, groups of half l / 16
    const int r = lane & 15, h = lane >> 4;
    float sc[kHalf], mn[kHalf];
    HalfGroupScales<T>(rows16 + r * kW * 16, h, sc, mn);
    float low = 0.0f;
#pragma unroll
    for (int e = 0; e < kHalf; e += 4) {
      const float4 xa = *reinterpret_cast<const float4*>(xs + h * kHalf + e);
      const float4 xb4 = *reinterpret_cast<const float4*>(xs + h * kHalf + e + 2);
      const float dx[4] = {xa.x, xa.z, xb4.x, xb4.z}, dsum[4] = {xa.y, xa.w, xb4.y, xb4.w};
      float v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float f = kNibbleX16 && ((e + i) & 1) != 0 ? factor * 0.0625f : factor;
        v[i] = f * sc[e + i] * dx[i];
        if constexpr (HasMin<T>()) low = fmaf(mn[e + i], dsum[i], low);
      }
      *reinterpret_cast<float4*>(table + r * kTs + h * kHalf + e) = make_float4(v[0], v[1], v[2], v[3]);
    }
    if constexpr (HasMin<T>()) {
      low += __shfl_xor_sync(0xffffffffu, low, 16);  // the two halves (a + b: the same in both lanes)
      if (h == 0) table[r * kTs + kGroups] = factor * low;
    }
  }
  __syncwarp();
  // Rows g's and g + 8's scales, four groups at a time.
  const float* tg_row = table + g * kTs;
  const float* th_row = table + (g + 8) * kTs;
  float4 tg, th;
  auto scale = [](const float4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; };
  if constexpr (kG == 32) {
    // K-quants: a pair's bytes and Q5_K's fifth bits loaded once (through Codes32 the compiler loaded them
    // again for every sub-block: 48 shared loads a lane per q4_k chunk, 33 this way).
    constexpr bool kK = T == kQ4_K || T == kQ5_K;
    uint2 qg = make_uint2(0u, 0u), qh = qg, hg = qg, hh = qg;
    if constexpr (kK) {
      hg = KQuantHighBits<T>(rg, t);
      hh = KQuantHighBits<T>(rh, t);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      uint2 wg, wh;
      if constexpr (kK) {
        if (j % 2 == 0) {
          qg = KQuantBytes<T>(rg, j >> 1, t);
          qh = KQuantBytes<T>(rh, j >> 1, t);
        }
      }
      if constexpr (kNibbleX16) {
        const uint32_t mask = (j & 1) != 0 ? 0xF0F0F0F0u : 0x0F0F0F0Fu;
        wg = make_uint2(qg.x & mask, qg.y & mask);
        wh = make_uint2(qh.x & mask, qh.y & mask);
      } else if constexpr (kK) {
        wg = KCodes<T>(qg, hg, j);
        wh = KCodes<T>(qh, hh, j);
      } else {
        wg = Codes32<T>(rg, j, t);
        wh = Codes32<T>(rh, j, t);
      }
      int cc[4];
      GroupMma32<T>(xb, j, t, wg, wh, cc);
      if (j % 4 == 0) {
        tg = *reinterpret_cast<const float4*>(tg_row + j);
        th = *reinterpret_cast<const float4*>(th_row + j);
      }
      acc[0] = fmaf(scale(tg, j % 4), static_cast<float>(cc[0]), acc[0]);
      acc[2] = fmaf(scale(th, j % 4), static_cast<float>(cc[2]), acc[2]);
    }
  } else {
#pragma unroll
    for (int gi = 0; gi < 16; ++gi) {
      int cc[4];
      GroupMma16(xb, gi, t, Codes16<T>(rg, gi, t), Codes16<T>(rh, gi, t), cc);
      if (gi % 4 == 0) {
        tg = *reinterpret_cast<const float4*>(tg_row + gi);
        th = *reinterpret_cast<const float4*>(th_row + gi);
      }
      acc[0] = fmaf(scale(tg, gi % 4), static_cast<float>(cc[0]), acc[0]);
      acc[2] = fmaf(scale(th, gi % 4), static_cast<float>(cc[2]), acc[2]);
    }
  }
  if constexpr (HasMin<T>()) {
    acc[0] -= tg_row[kGroups];
    acc[2] -= th_row[kGroups];
  }
}

// The same for an FP8 chunk (two blocks of 128 values per row, staged as StageChunk does: 256 codes, then
// the 2 scales): f16 mma with xb an f16 row in shared memory (kHalfX), else bf16 mma with xb a bf16 row in
// global memory; at the chunk's first value.
template <bool kHalfX>
__device__ __forceinline__ void ChunkProductF8(const uint8_t* rows16, const void* xb, float factor, int lane,
                                               float* acc) {
  constexpr int kW = StageWords<kF8E4M3B128>();
  const int g = lane >> 2, t = lane & 3;
  const uint8_t* rg = rows16 + g * kW * 16;
  const uint8_t* rh = rg + 8 * kW * 16;
#pragma unroll
  for (int blk = 0; blk < 2; ++blk) {
    float cf[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const uint8_t* qg = rg + 128 * blk + 4 * t;
    const uint8_t* qh = rh + 128 * blk + 4 * t;
#pragma unroll
    for (int h = 0; h < 8; ++h) {
      uint32_t a0, a1, a2, a3;
      const int v = 128 * blk + 16 * h + 4 * t;
      if constexpr (kHalfX) {
        E4m3x4ToHalf(Lds32(qg + 16 * h), &a0, &a2);
        E4m3x4ToHalf(Lds32(qh + 16 * h), &a1, &a3);
        const uint2 bx = *reinterpret_cast<const uint2*>(static_cast<const __half*>(xb) + v);
        MmaF16(cf, a0, a1, a2, a3, bx.x, bx.y);
      } else {
        E4m3x4ToBf16(Lds32(qg + 16 * h), &a0, &a2);
        E4m3x4ToBf16(Lds32(qh + 16 * h), &a1, &a3);
        const uint2 bx = __ldg(reinterpret_cast<const uint2*>(static_cast<const bf16*>(xb) + v));
        MmaBf16(cf, a0, a1, a2, a3, bx.x, bx.y);
      }
    }
    const float sg = factor * *reinterpret_cast<const float*>(rg + kF8StagedScales + 4 * blk);
    const float sh = factor * *reinterpret_cast<const float*>(rh + kF8StagedScales + 4 * blk);
    acc[0] += sg * cf[0];
    acc[1] += sg * cf[1];
    acc[2] += sh * cf[2];
    acc[3] += sh * cf[3];
  }
}

// The kernels' static shared memory: the warps' partial sums, and ActivationsToHalf's reduction.
constexpr size_t kStaticSmem = sizeof(float) * kWarps * 4 * 32 + sizeof(float) * kWarps;

}  // namespace infernix::cuda::qmma
