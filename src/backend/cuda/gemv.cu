// The decode-path matrix product: out [n, rows] = x [n, k] @ w [rows, k]^T for n <= 16 tokens, bf16,
// streaming each weight once per call at memory bandwidth. Up to 4 products sharing x (q/k/v, gate/up)
// run as one launch.
//
// A block owns 16 weight rows (one m16n8k16 tensor-core tile); its 8 warps split k. Each thread loads
// 16 contiguous bytes (8 values) of row g and of row g + 8 per step, and the 16 bytes of x at the same
// k from token g; two mma.sync consume them. This works because a dot product does not care about the
// order of k: thread (g, t) feeds its 8 values into the fragment slots {2t, 2t+1, 2t+8, 2t+9} of two
// consecutive mmas, and x is loaded with the very same permutation, so A and B stay consistent.
// Partial sums of the 8 warps are added in shared memory in a fixed order (deterministic).
//
// On sm_90 the kernel is launched as a programmatic dependent of the kernel before it: it issues its
// first weight loads (weights never change) before waiting for that kernel's results (x), so weight
// streaming overlaps the tail and launch of the previous kernel.
#include "backend/cuda/device_util.cuh"

namespace infernix::cuda {
namespace {

constexpr int kWarps = 8;

// kTiles: tiles of 8 tokens (1: n <= 8, 2: n <= 16); kUnroll: steps of weight loads in flight per thread.
template <int kTiles, int kUnroll>
__global__ void __launch_bounds__(32 * kWarps) GemvKernel(GemvBatch p) {
  AllowDependentLaunch();  // the next kernel may get ready; it waits for this one's results
  // Find this block's segment and 16-row tile.
  int64_t tile = blockIdx.x;
  GemvSegment sg = p.seg[0];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    GemvSegment cur = p.seg[i];
    int64_t tiles = (cur.rows + 15) / 16;
    if (i < p.n_segments) {
      sg = cur;
      if (tile < tiles) break;
      tile -= tiles;
    }
  }
  const int64_t rows = sg.rows, k = p.k, n = p.n, row0 = tile * 16;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const bf16* w = static_cast<const bf16*>(sg.w);
  const uint4* wg = reinterpret_cast<const uint4*>(w + min(row0 + g, rows - 1) * k);
  const uint4* wh = reinterpret_cast<const uint4*>(w + min(row0 + g + 8, rows - 1) * k);
  const uint4* xr[kTiles];
  bool xv[kTiles];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    int64_t token = j * 8 + g;
    xv[j] = token < n;
    xr[j] = reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.x) + (xv[j] ? token : 0) * k);
  }
  float acc[kTiles][4];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  const int64_t chunks = k / 8;            // 16-byte chunks per row
  const int64_t steps = (chunks + 3) / 4;  // a warp step covers 4 chunks (32 values) of its 16 rows
  const uint4 zero = make_uint4(0, 0, 0, 0);
  uint4 a[kUnroll], b[kUnroll];
  auto load_weights = [&](int64_t s0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int64_t c = (s0 + u * kWarps) * 4 + t;
      bool ok = c < chunks;
      a[u] = ok ? __ldcs(wg + c) : zero;
      b[u] = ok ? __ldcs(wh + c) : zero;
    }
  };
  load_weights(warp);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");  // x is ready (no-op without a programmatic launch)
#endif
  for (int64_t s0 = warp; s0 < steps; s0 += kWarps * kUnroll) {
    if (s0 != warp) load_weights(s0);
    uint4 xs[kUnroll][kTiles];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int64_t c = (s0 + u * kWarps) * 4 + t;
      bool ok = c < chunks;
#pragma unroll
      for (int j = 0; j < kTiles; ++j) xs[u][j] = ok && xv[j] ? __ldg(xr[j] + c) : zero;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        MmaBf16(acc[j], a[u].x, b[u].x, a[u].y, b[u].y, xs[u][j].x, xs[u][j].y);
        MmaBf16(acc[j], a[u].z, b[u].z, a[u].w, b[u].w, xs[u][j].z, xs[u][j].w);
      }
    }
  }

  __shared__ float partial[kWarps][kTiles * 4][32];
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) partial[warp][j * 4 + q][lane] = acc[j][q];
  __syncthreads();
  if (threadIdx.x < kTiles * 4 * 32) {
    int q = threadIdx.x >> 5, ln = threadIdx.x & 31;
    float sum = 0;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) sum += partial[i][q][ln];
    int j = q >> 2, e = q & 3;
    int64_t row = row0 + (ln >> 2) + (e >= 2 ? 8 : 0);
    int64_t token = j * 8 + 2 * (ln & 3) + (e & 1);
    if (row < rows && token < n) StoreF(sg.out, sg.out_dtype, token * rows + row, sum);
  }
}

template <int kTiles, int kUnroll>
void Launch(cudaStream_t s, const GemvBatch& batch, int64_t tiles) {
  LaunchDependent(GemvKernel<kTiles, kUnroll>, dim3(static_cast<unsigned>(tiles)), dim3(32 * kWarps), 0, s, batch);
}

}  // namespace

void LaunchGemv(cudaStream_t s, GemvBatch batch) {
  int64_t tiles = 0;
  for (int i = 0; i < batch.n_segments; ++i) tiles += (batch.seg[i].rows + 15) / 16;
  if (tiles == 0 || batch.n == 0) return;
  if (batch.n <= 8) {
    Launch<1, 8>(s, batch, tiles);
  } else {
    Launch<2, 4>(s, batch, tiles);
  }
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
