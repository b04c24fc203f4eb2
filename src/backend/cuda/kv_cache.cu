// Appends a batch's keys and values to the paged KV cache: token t of sequence s goes to page
// page_table[slot(s)][pos / kPageSize], row pos % kPageSize, of its KV head. Also the fused
// preparation of a layer's attention inputs (q/k RMSNorm, RoPE, cache append) in one launch.
#include "backend/cuda/qkv_prep.cuh"

namespace infernix::cuda {
namespace {

// Grid (token, KV head), two warps: warp 0 stores the key row, warp 1 the value row.
__global__ void KvAppendKernel(DeviceLayout layout, KvCacheView kv, const bf16* k, const bf16* v) {
  const int t = blockIdx.x, h = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row = KvRowIndex(kv, layout.seq_info[layout.token_seq[t] * 4], layout.token_pos[t], h);
  const bf16* src = (warp == 0 ? k : v) + (static_cast<int64_t>(t) * kv.n_kv_heads + h) * kv.head_dim;
  StoreKvRow(
      kv, warp + 1, row, [&](int i) { return __bfloat162float(src[i]); }, [](int, float) {}, lane);
}

// By one warp, after PrepHeadRow: the row stored back to x when the preparation changed it.
__device__ inline void StoreHeadRow(const HeadPrep& hp, int d, const float* row, bf16* x, int lane) {
  if (!PrepChangesRow(hp)) return;
  for (int i = lane; i < d; i += 32) x[i] = __float2bfloat16_rn(row[i]);
}

constexpr int kPrepWarps = 4;
constexpr int kPrepMaxDim = 256;

// Grid (token, group of kPrepWarps head rows); each warp prepares one head row in shared memory.
__global__ void __launch_bounds__(32 * kPrepWarps) QkvPrepKernel(DeviceLayout layout, KvCacheView kv, QkvPrep p) {
  __shared__ float rows[kPrepWarps][kPrepMaxDim];
  const int t = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, d = p.head_dim;
  int h = blockIdx.y * kPrepWarps + warp, ti = 0;
  while (ti < p.n_tensors && h >= p.t[ti].heads) h -= p.t[ti++].heads;
  if (ti >= p.n_tensors) return;
  const HeadPrep& hp = p.t[ti];
  bf16* x = static_cast<bf16*>(hp.x) + (static_cast<int64_t>(t) * hp.heads + h) * d;
  // The cache row (layouts and page tables come from the host) before waiting for x.
  const int64_t cache_row =
      hp.cache != 0 ? KvRowIndex(kv, layout.seq_info[layout.token_seq[t] * 4], layout.token_pos[t], h) : 0;
  WaitForPrevious();
  PrepHeadRow(hp, p, layout.token_pos[t], x, rows[warp], lane);
  StoreHeadRow(hp, d, rows[warp], x, lane);
  const float* r = rows[warp];
  if (hp.cache != 0)
    StoreKvRow(
        kv, hp.cache, cache_row, [&](int i) { return r[i]; }, [](int, float) {}, lane);
}

}  // namespace

void LaunchQkvPrep(cudaStream_t s, DeviceLayout layout, KvCacheView kv, QkvPrep prep) {
  if (layout.n_tokens == 0) return;
  INFX_CHECK(prep.head_dim <= kPrepMaxDim && 2 * prep.half <= prep.head_dim);
  int total = 0;
  for (int i = 0; i < prep.n_tensors; ++i) total += prep.t[i].heads;
  dim3 grid(static_cast<unsigned>(layout.n_tokens), static_cast<unsigned>((total + kPrepWarps - 1) / kPrepWarps));
  LaunchDependent(QkvPrepKernel, grid, 32 * kPrepWarps, 0, s, layout, kv, prep);
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchKvAppend(cudaStream_t s, DeviceLayout layout, KvCacheView kv, const void* k, const void* v) {
  if (layout.n_tokens == 0) return;
  dim3 grid(static_cast<unsigned>(layout.n_tokens), static_cast<unsigned>(kv.n_kv_heads));
  KvAppendKernel<<<grid, 64, 0, s>>>(layout, kv, static_cast<const bf16*>(k), static_cast<const bf16*>(v));
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
