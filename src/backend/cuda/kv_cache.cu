// Appends a batch's keys and values to the paged KV cache: token t of sequence s goes to page
// page_table[slot(s)][pos / kPageSize], row pos % kPageSize, of its KV head.
#include "backend/cuda/device_util.cuh"

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

}  // namespace

void LaunchKvAppend(cudaStream_t s, DeviceLayout layout, KvCacheView kv, const void* k, const void* v) {
  if (layout.n_tokens == 0) return;
  dim3 grid(static_cast<unsigned>(layout.n_tokens), static_cast<unsigned>(kv.n_kv_heads));
  int threads = std::min(256, (kv.head_dim + 31) / 32 * 32);
  KvAppendKernel<<<grid, threads, 0, s>>>(layout, kv, static_cast<const bf16*>(k), static_cast<const bf16*>(v));
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
