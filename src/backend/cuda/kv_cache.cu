// Appends a batch's keys and values to the paged KV cache: token t of sequence s goes to page
// page_table[slot(s)][pos / kPageSize], row pos % kPageSize, of its KV head. Also the fused
// preparation of a layer's attention inputs (q/k RMSNorm, RoPE, cache append) in one launch.
#include "backend/cuda/qkv_prep.cuh"

namespace infernix::cuda {
namespace {

__global__ void KvAppendKernel(DeviceLayout layout, KvCacheView kv, const bf16* k, const bf16* v) {
  const int t = blockIdx.x, h = blockIdx.y, d = kv.head_dim;
  const int seq = layout.token_seq[t], slot = layout.seq_info[seq * 4], pos = layout.token_pos[t];
  const int page = kv.page_table[static_cast<int64_t>(slot) * kv.pages_per_slot + pos / kPageSize];
  const int64_t dst = ((static_cast<int64_t>(page) * kv.n_kv_heads + h) * kPageSize + pos % kPageSize) * d;
  const int64_t src = (static_cast<int64_t>(t) * kv.n_kv_heads + h) * d;
  bf16* kp = static_cast<bf16*>(kv.k_pages);
  bf16* vp = static_cast<bf16*>(kv.v_pages);
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    kp[dst + i] = k[src + i];
    vp[dst + i] = v[src + i];
  }
}

// The cache row (K pages for cache == 1, V pages for 2) of KV head h at the position of token t.
__device__ inline bf16* CacheRow(const DeviceLayout& layout, const KvCacheView& kv, int cache, int t, int h) {
  return CacheRowAt(kv, cache, layout.seq_info[layout.token_seq[t] * 4], layout.token_pos[t], h);
}

// By one warp, after PrepHeadRow: the row stored back to x when the preparation changed it, and to the cache
// row when there is one.
__device__ inline void StoreHeadRow(const HeadPrep& hp, int d, const float* row, bf16* x, bf16* cache, int lane) {
  for (int i = lane; i < d; i += 32) {
    const bf16 v = __float2bfloat16_rn(row[i]);
    if (PrepChangesRow(hp)) x[i] = v;
    if (cache != nullptr) cache[i] = v;
  }
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
  bf16* cache = hp.cache != 0 ? CacheRow(layout, kv, hp.cache, t, h) : nullptr;
  WaitForPrevious();
  PrepHeadRow(hp, p, layout.token_pos[t], x, rows[warp], lane);
  StoreHeadRow(hp, d, rows[warp], x, cache, lane);
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
  int threads = std::min(256, (kv.head_dim + 31) / 32 * 32);
  KvAppendKernel<<<grid, threads, 0, s>>>(layout, kv, static_cast<const bf16*>(k), static_cast<const bf16*>(v));
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
