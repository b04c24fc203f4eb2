// One head row of a layer's attention inputs prepared as kernels.h's QkvPrep says (the per-head RMSNorm,
// then RoPE, each rounded to bf16 as RmsNorm and Rope store it), and the KV cache row a token's key or value
// goes to (kv_f8.cuh): shared by the preparation kernel (kv_cache.cu) and the fused decode attention
// (attention_decode_mma.cu), so that both prepare the same bits.
#pragma once

#include "backend/cuda/kv_f8.cuh"

namespace infernix::cuda {

// By one warp: the head row x [p.head_dim] (bf16) of the token at position pos, prepared as hp says, into
// row (f32, shared memory; every value a bf16).
__device__ inline void PrepHeadRow(const HeadPrep& hp, const QkvPrep& p, int pos, const bf16* x, float* row,
                                   int lane) {
  const int d = p.head_dim;
  float ss = 0;
  for (int i = lane; i < d; i += 32) {
    const float v = __bfloat162float(x[i]);
    row[i] = v;
    ss += v * v;
  }
  if (hp.norm_w != nullptr) {
    const float inv = RmsInv(WarpSum(ss), d, hp.eps);
    for (int i = lane; i < d; i += 32)
      row[i] = RoundBf16(RmsScale(row[i], inv, LoadF(hp.norm_w, hp.w_dtype, i), hp.w_offset));
  }
  __syncwarp();
  if (hp.rope) {
    for (int i = lane; i < p.half; i += 32) {
      float sn, cs;
      sincosf(static_cast<float>(pos) * p.inv_freq[i], &sn, &cs);
      cs *= p.rope_scale;
      sn *= p.rope_scale;
      const float a = row[i], c = row[i + p.half];
      row[i] = RoundBf16(a * cs - c * sn);
      row[i + p.half] = RoundBf16(c * cs + a * sn);
    }
    __syncwarp();
  }
}

// Whether the preparation changes the row (then it is written back in place).
__device__ __forceinline__ bool PrepChangesRow(const HeadPrep& hp) { return hp.norm_w != nullptr || hp.rope != 0; }

}  // namespace infernix::cuda
