// The decode-path product with block-quantized weights on tensor cores: out_i [n, rows_i] = x [n, k] @
// dequant(w_i)^T for n <= 8 tokens and up to 4 weights of one type that share x (q/k/v, gate/up), every
// packed weight byte read once.
//
// Integer types (every GGUF block type): each thread block first rounds x to 8-bit integers
// in blocks of 32 (scale = max |x| / 127, as llama.cpp's q8_1 activations) into shared memory, with the
// integer sums of every scale group. The weights' integer codes then go through int8 mma.sync (m16n8k32
// for 32-value scale groups, m16n8k16 for the 16-value groups of Q2_K, Q3_K, Q6_K) with exact 32-bit sums
// per scale group, and each sum is scaled in f32: acc += dx * (d_w * sum(q * xq) - min_w * sum(xq)), where
// min_w is the type's offset (Q4_0: 8 d, Q5_0: 16 d, Q3_K: 4 d, Q6_K: 32 d), minus the block's m (Q4_1,
// Q5_1) or the K-quant's sub-block minimum; the codes are unsigned except for Q8_0 and the IQ4 types
// (their 4-bit codes looked up in the value table).
// FP8 (f8_e4m3_b128): E4M3 codes convert exactly to f16; x goes to shared memory as f16 times a power
// of two (exact) for one or two tokens and f16 mma.sync runs, else bf16 mma.sync with x read as it is;
// each 128-value block's f32 sum is scaled by its block scale.
//
// A thread block owns 16 rows (one mma tile) at a time; its 8 warps take turns over chunks of 256 values.
// A warp stages the 16 rows' packed bytes of a chunk in shared memory with 16-byte cp.async copies and
// decodes its mma fragments from there; the scales of the chunk's 16 rows are decoded once into a table.
// The grid holds as many blocks as fit on the device, each looping over tiles, and a warp's chunks run
// through one pipeline of two or three buffers across tiles (the next chunks load while one is computed).
// The k order inside a mma step is permuted as in gemv.cu (thread (g, t) supplies consecutive values of
// rows g and g + 8 and of token g's activations, A and B alike). Partial sums of the 8 warps are added in
// shared memory in a fixed order (deterministic).
#include "backend/cuda/quant_mma.cuh"

namespace infernix::cuda {
namespace {

using namespace qmma;  // NOLINT: the building blocks of this kernel family

// kHalfX (FP8 only): x in shared memory as f16 (ActivationsToHalf); else x read as bf16 from global memory.
template <int T, bool kHalfX>
__global__ void __launch_bounds__(32 * kWarps) QuantGemvMmaKernel(GemvBatch p) {
  extern __shared__ __align__(16) uint8_t smem[];
  AllowDependentLaunch();  // the next kernel may get ready; it waits for this one's results
  const int k = static_cast<int>(p.k), n = static_cast<int>(p.n);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  constexpr int kCb = ChunkBytes<T>(), kW = StageWords<T>(), kStages = Stages<T>();
  const int chunks = k / kChunk;
  const size_t row_bytes = static_cast<size_t>(chunks) * kCb;
  uint8_t* stage = smem + warp * kStages * 16 * kW * 16;
  // The block takes tiles blockIdx.x, + gridDim.x, ...; a warp takes chunks warp, warp + 8, ... of each.
  // Its work items (tile, chunk) run through one pipeline of kStages buffers, across tiles.
  int total_tiles = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    if (i < p.n_segments) total_tiles += static_cast<int>((p.seg[i].rows + 15) / 16);
  const int my_tiles = (total_tiles - static_cast<int>(blockIdx.x) + gridDim.x - 1) / gridDim.x;
  const int per_tile = warp < chunks ? (chunks - warp + kWarps - 1) / kWarps : 0;
  const int items = my_tiles * per_tile;
  // Segment and first row of a tile.
  auto locate = [&](int tile, GemvSegment* sg, int* row0) {
    *sg = p.seg[0];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const GemvSegment cur = p.seg[i];
      const int tiles = static_cast<int>((cur.rows + 15) / 16);
      if (i < p.n_segments) {
        *sg = cur;
        if (tile < tiles) break;
        tile -= tiles;
      }
    }
    *row0 = tile * 16;
  };
  // Stages the 16 rows' bytes of item `it` into buffer b.
  auto issue = [&](int it, int b) {
    if (it < items) {
      GemvSegment sg;
      int row0;
      locate(static_cast<int>(blockIdx.x) + (it / per_tile) * gridDim.x, &sg, &row0);
      const int c = warp + (it % per_tile) * kWarps;
      StageChunk<T>(stage + b * 16 * kW * 16, static_cast<const uint8_t*>(sg.w), row0, static_cast<int>(sg.rows),
                    row_bytes, c, lane);
    }
    CpAsyncCommit();  // an empty group past the end keeps the wait counts uniform
  };
#pragma unroll
  for (int b = 0; b < kStages - 1; ++b) issue(b, b);

  WaitForPrevious();  // x is ready
  uint8_t* act = smem + StageBytes<T>();
  const bf16* x = static_cast<const bf16*>(p.x);
  constexpr int kG = GroupValues<T>(), kTs = TableStride<T>();
  float2* table = reinterpret_cast<float2*>(act) + warp * 16 * kTs;
  int8_t* xq = reinterpret_cast<int8_t*>(act + TableBytes<T>());
  float2* xs = reinterpret_cast<float2*>(act + TableBytes<T>() + n * XqStride(k));
  __half* xh = reinterpret_cast<__half*>(act);
  float* xf = reinterpret_cast<float*>(act + static_cast<size_t>(n) * XqStride(k) * 2);
  if constexpr (IsIntType<T>()) {
    QuantizeActivations<kG>(x, n, k, xq, xs);
    __syncthreads();
  } else if constexpr (kHalfX) {
    ActivationsToHalf(x, n, k, xh, xf);
  }
  const int tok0 = min(2 * t, n - 1), tok1 = min(2 * t + 1, n - 1);  // C columns 2t, 2t + 1
  const int tok_b = min(g, n - 1);                                   // B column g
  const float2* xs0 = xs + tok0 * (k / kG);
  const float2* xs1 = xs + tok1 * (k / kG);

  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // rows g, g, g+8, g+8 x tokens 2t, 2t+1
  __shared__ float partial[kWarps][4][32];
  for (int ti = 0; ti < my_tiles; ++ti) {
    acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
    for (int m = 0; m < per_tile; ++m) {
      const int it = ti * per_tile + m, c = warp + m * kWarps, b = it % kStages;
      issue(it + kStages - 1, (it + kStages - 1) % kStages);
      CpAsyncWait<kStages - 1>();
      __syncwarp();
      const uint8_t* rows16 = stage + b * 16 * kW * 16 + ((c * kCb) & 15);
      const int k0 = c * kChunk;
      if constexpr (IsIntType<T>()) {
        ChunkProductInt<T>(rows16, table, xq + tok_b * XqStride(k) + k0, xs0 + k0 / kG, xs1 + k0 / kG, 1.0f, lane, acc);
      } else if constexpr (kHalfX) {
        ChunkProductF8<true>(rows16, xh + tok_b * XqStride(k) + k0, 1.0f, lane, acc);
      } else {
        ChunkProductF8<false>(rows16, x + static_cast<int64_t>(tok_b) * k + k0, 1.0f, lane, acc);
      }
      __syncwarp();  // the buffer is free for the copy issued at the next step
    }
    if constexpr (kHalfX) {  // undo x's power-of-two factor
      acc[0] *= xf[tok0];
      acc[1] *= xf[tok1];
      acc[2] *= xf[tok0];
      acc[3] *= xf[tok1];
    }
    // The tile's sums over the 8 warps, in a fixed order.
#pragma unroll
    for (int q = 0; q < 4; ++q) partial[warp][q][lane] = acc[q];
    __syncthreads();
    if (threadIdx.x < 4 * 32) {
      GemvSegment sg;
      int row0;
      locate(static_cast<int>(blockIdx.x) + ti * gridDim.x, &sg, &row0);
      const int q = threadIdx.x >> 5, ln = threadIdx.x & 31, rows = static_cast<int>(sg.rows);
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kWarps; ++i) sum += partial[i][q][ln];
      const int row = row0 + (ln >> 2) + (q >= 2 ? 8 : 0);
      const int token = 2 * (ln & 3) + (q & 1);
      if (row < rows && token < n) StoreF(sg.out, sg.out_dtype, static_cast<int64_t>(token) * rows + row, sum);
    }
    __syncthreads();
  }
}

template <int T, bool kHalfX>
size_t SmemBytes(int64_t n, int64_t k) {
  if constexpr (IsIntType<T>()) return StageBytes<T>() + ActBytes<T>(n, k);
  return StageBytes<T>() + (kHalfX ? static_cast<size_t>(n * XqStride(k) * 2 + n * 4) : 0);
}

// FP8 takes x through shared memory as f16 for one or two tokens when that fits (for more, the
// per-token scaling pass and the shared memory it takes cost more than the cheaper conversion saves).
bool HalfXFits(int64_t n, int64_t k, size_t max_smem_optin) {
  return SmemBytes<kF8E4M3B128, true>(n, k) + kStaticSmem <= max_smem_optin;
}

template <int T, bool kHalfX>
void Configure(size_t max_smem_optin) {
  INFX_CUDA_CHECK(cudaFuncSetAttribute(QuantGemvMmaKernel<T, kHalfX>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(max_smem_optin - kStaticSmem)));
}

// One block per tile, at most as many as fit on the device at once (each then loops over tiles).
template <int T, bool kHalfX>
void Launch(cudaStream_t s, const GemvBatch& batch, int64_t tiles) {
  const size_t smem = SmemBytes<T, kHalfX>(batch.n, batch.k);
  LaunchDependent(QuantGemvMmaKernel<T, kHalfX>,
                  PersistentBlocks(QuantGemvMmaKernel<T, kHalfX>, 32 * kWarps, smem, tiles), 32 * kWarps, smem, s,
                  batch);
}

}  // namespace

void ConfigureQuantGemvMma(size_t max_smem_optin) {
  for (int type : kQuantTypes)
    ByQuantType(type, [&](auto tc) { Configure<decltype(tc)::value, false>(max_smem_optin); });
  Configure<kF8E4M3B128, true>(max_smem_optin);
}

bool QuantGemvMmaFits(int type, int64_t n, int64_t k, int64_t rows, const void* x, const void* w,
                      size_t max_smem_optin) {
  if (!QuantTypeSupported(type) || n < 1 || n > kQuantGemvMaxTokens || rows < 1 || k % kChunk != 0) return false;
  if ((reinterpret_cast<uintptr_t>(x) & 15u) != 0 || (reinterpret_cast<uintptr_t>(w) & 15u) != 0) return false;
  if (k > (int64_t{1} << 24) || rows > (int64_t{1} << 24)) return false;  // 32-bit index math
  return ByQuantType(type, [&](auto tc) {
    constexpr int T = decltype(tc)::value;
    return (k / kChunk * ChunkBytes<T>()) % 16 == 0 && SmemBytes<T, false>(n, k) + kStaticSmem <= max_smem_optin;
  });
}

void LaunchQuantGemvMma(cudaStream_t s, GemvBatch batch, size_t max_smem_optin) {
  int64_t tiles = 0;
  for (int i = 0; i < batch.n_segments; ++i) tiles += (batch.seg[i].rows + 15) / 16;
  if (tiles == 0 || batch.n == 0) return;
  if (batch.w_type == kF8E4M3B128 && batch.n <= 2 && HalfXFits(batch.n, batch.k, max_smem_optin)) {
    Launch<kF8E4M3B128, true>(s, batch, tiles);
  } else {
    ByQuantType(batch.w_type, [&](auto tc) { Launch<decltype(tc)::value, false>(s, batch, tiles); });
  }
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
