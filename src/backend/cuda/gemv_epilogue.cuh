// The residual epilogue of the decode GEMV (gemv.cu; kernels.h, GemvResidual): the residual add after a
// tile's sums, the sums of squares of the tile, and the RMSNorm that the last block to finish computes from
// them. Written for any GEMV that reduces a tile of 16 rows x 8 tokens in 4 warps of 32 threads, warp q,
// lane ln holding row (ln >> 2) + (q >= 2 ? 8 : 0) of token 2 (ln & 3) + (q & 1) (mma.sync's C fragment).
// The tensor-core GEMV of block types (quant_gemv_mma.cu) reduces that way too, but took it slower
// (docs/performance.md): it has none.
#pragma once

#include "backend/cuda/device_util.cuh"

namespace infernix::cuda {

// Host: the residual epilogue's preconditions (kernels.h, GemvResidual).
inline void CheckGemvResidual(const GemvBatch& b) {
  if (b.res.out == nullptr) return;
  INFX_CHECK(
      b.n_segments == 1 && b.n <= kGemvNormMaxTokens && b.silu_out == nullptr && b.seg[0].out_dtype == kBF16 &&
      b.res.in != nullptr &&
      (b.res.norm_out == nullptr || (b.res.ss != nullptr && b.res.counter != nullptr && b.seg[0].rows % 8 == 0)) &&
      (b.res.deferred == nullptr || (b.res.norm_out != nullptr && b.w_type == kBF16)));
}

// Stores element i (= token * rows + row) of segment sg's output, sum; with res.out set, the residual sum
// instead (and the product, unless res.out replaces it). Returns the value that the norm after squares.
// (Loading res.in at the start of the tile instead was slower: docs/performance.md.)
__device__ __forceinline__ float StoreGemvSum(const GemvResidual& res, const GemvSegment& sg, int64_t i, float sum) {
  if (res.out == nullptr) {
    StoreF(sg.out, sg.out_dtype, i, sum);
    return 0.0f;
  }
  const float o = RoundBf16(sum);
  if (sg.out != res.out) StoreF(sg.out, kBF16, i, o);
  const float h = AddBf16(__bfloat162float(static_cast<const bf16*>(res.in)[i]), o);
  StoreF(res.out, kBF16, i, h);
  return h;
}

// By the 4 reducing warps (whole warps): h^2 summed over the 8 rows a warp holds per token, into
// squares[q][t] for tokens 2t + (q & 1).
__device__ __forceinline__ void TileSquares(float h, int q, int ln, float (*squares)[4]) {
  float sq = h * h;
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) sq += __shfl_xor_sync(0xffffffffu, sq, o);
  if (ln < 4) squares[q][ln] = sq;
}

// After a __syncthreads that follows TileSquares: the tile's sum of squares per token, to res.ss [n][tiles].
__device__ __forceinline__ void WriteTileSquares(const GemvResidual& res, int n, int64_t rows, int64_t tile,
                                                 const float (*squares)[4]) {
  if (threadIdx.x < n) {
    const int token = static_cast<int>(threadIdx.x), e = token & 1, t = token >> 1;
    res.ss[token * ((rows + 15) / 16) + tile] = squares[e][t] + squares[2 + e][t];
  }
}

// out = RmsNorm(sum) for n rows of d values (GemvResidual) by one block: 1 / rms of each row from the sums of
// squares the tiles left (warp j adds those of row j, lane-strided then across the warp: a fixed order),
// then each 16-byte chunk scaled. kBatch chunks per thread are loaded at once, the first batch before the
// sums of squares are added, so that the block waits for the L2 about twice, not once per step.
template <bool kBf16W>
__device__ inline void NormalizeRows(const GemvResidual& r, int n, int d, float* inv) {
  constexpr int kBatch = 4;
  const bf16* sum = static_cast<const bf16*>(r.out);
  bf16* out = static_cast<bf16*>(r.norm_out);
  const int chunks = d / 8, total = n * chunks, stride = static_cast<int>(blockDim.x);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, tiles = (d + 15) / 16;
  bool first = true;  // every thread runs the first batch (it holds the __syncthreads)
  for (int i0 = static_cast<int>(threadIdx.x); first || i0 < total; i0 += kBatch * stride) {
    uint4 raw[kBatch];
    float wv[kBatch][8];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = i0 + b * stride, c = i % chunks;
      if (i < total) {
        raw[b] = __ldcg(reinterpret_cast<const uint4*>(sum) + i);  // rows are contiguous: chunk i of all n rows
        if constexpr (kBf16W) {
          Load8(static_cast<const bf16*>(r.w) + c * 8, wv[b]);
        } else {
#pragma unroll
          for (int q = 0; q < 8; ++q) wv[b][q] = LoadF(r.w, r.w_dtype, c * 8 + q);
        }
      }
    }
    if (first) {
      if (warp < n) {  // blockDim.x >= 32 * kGemvNormMaxTokens
        float s = 0.0f;
        for (int i = lane; i < tiles; i += 32) s += __ldcg(r.ss + warp * tiles + i);
        s = WarpSum(s);
        if (lane == 0) inv[warp] = RmsInv(s, d, r.eps);
      }
      __syncthreads();
      first = false;
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = i0 + b * stride;
      if (i < total) {
        const bf16* e = reinterpret_cast<const bf16*>(&raw[b]);
        float v[8];
#pragma unroll
        for (int q = 0; q < 8; ++q) v[q] = RmsScale(__bfloat162float(e[q]), inv[i / chunks], wv[b][q], r.w_offset);
        Store8(out + static_cast<int64_t>(i) * 8, v);
      }
    }
  }
}

// GemvResidual with norm_out: called by every block once its tiles are done; the last block to get here
// writes the normalised rows.
__device__ inline void FinishResidualNorm(const GemvResidual& r, int n, int d) {
  __shared__ float inv[kGemvNormMaxTokens];  // NormalizeRows'
  // After this block's sums and sums of squares.
  if (!LastBlockToArrive(r.counter, static_cast<int>(gridDim.x))) return;
  if (r.w_dtype == kBF16) {
    NormalizeRows<true>(r, n, d, inv);
  } else {
    NormalizeRows<false>(r, n, d, inv);
  }
}

}  // namespace infernix::cuda
