// The KV cache's rows on the device, bf16 or FP8 (kernels.h, KvCacheView). An FP8 row (one token's key
// or value for one KV head) is head_dim E4M3 codes and a power-of-two scale 2^e as an f32, with e the
// smallest exponent that puts the row's largest magnitude at or below 448; quant/kv_f8.h defines the
// format and is the host's reference, which these functions reproduce bit for bit (frexpf and ldexpf are
// exact, the conversion rounds to nearest even and saturates). Decoding is exact in f32 and bf16, so the
// readers stage FP8 pages as the bf16 values they stand for and attend to them as to a bf16 cache.
#pragma once

#include <cuda_fp8.h>

#include "backend/cuda/device_util.cuh"

namespace infernix::cuda {

__device__ __forceinline__ int KvF8Exponent(float amax) {
  if (!(amax > 0.0f) || isinf(amax)) return 0;
  int x = 0;
  const float m = frexpf(amax, &x);  // amax = m * 2^x, m in [0.5, 1); 448 = 0.875 * 2^9
  return m <= 0.875f ? x - 9 : x - 8;
}

// 8 codes (bytes 0-7 of c) times scale as 8 bf16 values (a uint4, in order), exact, in integer and bf16
// operations only (the f32 conversions cost four times as much on the decode attention's critical path):
// a code's sign, exponent and mantissa bits placed at bf16's bits 15, 10-7 and 6-4 make the bf16 value
// E4M3(code) * 2^-120 (subnormal codes too, as bf16 subnormals), and one bf16 multiply by 2^(120 + e)
// restores it (two where 2^(120 + e) exceeds bf16's range, e > 7). A NaN code decodes as a finite value.
__device__ __forceinline__ uint4 KvF8x8ToBf16(uint2 c, float scale) {
  const bool big = scale > 0x1p7f;
  const __nv_bfloat162 f = __float2bfloat162_rn(big ? scale : scale * 0x1p120f);
  const __nv_bfloat162 up = __float2bfloat162_rn(0x1p120f);
  uint32_t out[4];
  const uint32_t w[2] = {c.x, c.y};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    // Codes 2 (i % 2) and 2 (i % 2) + 1 of the word at bytes 1 and 3 (zeros elsewhere).
    const uint32_t v = __byte_perm(w[i / 2], 0, i % 2 == 0 ? 0x1404 : 0x3424);
    const uint32_t bits = (v & 0x80008000u) | ((v >> 4) & 0x07F007F0u);
    __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&bits);
    if (big) h = __hmul2(h, up);
    h = __hmul2(h, f);
    out[i] = *reinterpret_cast<const uint32_t*>(&h);
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// One code times its scale.
__device__ __forceinline__ float KvF8Value(uint8_t code, float scale) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(h)) * scale;
}

// The row index (page, KV head, row in page) of KV head h at position pos of the sequence in `slot`:
// elements at row * head_dim of the K or V pages, an FP8 row's scale at k_scale / v_scale [row].
__device__ __forceinline__ int64_t KvRowIndex(const KvCacheView& kv, int slot, int pos, int h) {
  const int page = kv.page_table[static_cast<int64_t>(slot) * kv.pages_per_slot + pos / kPageSize];
  return (static_cast<int64_t>(page) * kv.n_kv_heads + h) * kPageSize + pos % kPageSize;
}

// By one warp: the FP8 row of the values value(i), i < d (each a bf16 value): emit(i, code, scale) for each,
// and the scale returned.
template <class Value, class Emit>
__device__ __forceinline__ float EncodeKvF8Row(int d, int lane, Value value, Emit emit) {
  float amax = 0.0f;
  for (int i = lane; i < d; i += 32) amax = fmaxf(amax, fabsf(RoundBf16(value(i))));
  const int e = KvF8Exponent(WarpMax(amax));
  const float scale = ldexpf(1.0f, e);
  for (int i = lane; i < d; i += 32)
    emit(i, static_cast<uint8_t>(__nv_cvt_float_to_fp8(ldexpf(RoundBf16(value(i)), -e), __NV_SATFINITE, __NV_E4M3)),
         scale);
  return scale;
}

// By one warp: the values value(i), i < head_dim (each a bf16 value), into cache row `row` of the K pages
// (cache == 1) or the V pages (2); stored(i, v) is told the value attention will read back for each (v
// itself in a bf16 cache, its FP8 decoding in an FP8 one). kKind: the cache's type where the caller's code is
// compiled for one (the other form's code then is not in the kernel), else kAny (read from kv).
enum class KvKind { kAny, kBf16, kF8 };
template <KvKind kKind = KvKind::kAny, class Value, class Stored>
__device__ __forceinline__ void StoreKvRow(const KvCacheView& kv, int cache, int64_t row, Value value, Stored stored,
                                           int lane) {
  const int d = kv.head_dim;
  if (kKind == KvKind::kBf16 || (kKind == KvKind::kAny && !kv.f8())) {
    bf16* dst = static_cast<bf16*>(cache == 1 ? kv.k_pages : kv.v_pages) + row * d;
    for (int i = lane; i < d; i += 32) {
      const bf16 v = __float2bfloat16_rn(value(i));
      dst[i] = v;
      stored(i, __bfloat162float(v));
    }
    return;
  }
  uint8_t* dst = static_cast<uint8_t*>(cache == 1 ? kv.k_pages : kv.v_pages) + row * d;
  const float scale = EncodeKvF8Row(d, lane, value, [&](int i, uint8_t code, float sc) {
    dst[i] = code;
    stored(i, KvF8Value(code, sc));
  });
  if (lane == 0) (cache == 1 ? kv.k_scale : kv.v_scale)[row] = scale;
}

}  // namespace infernix::cuda
