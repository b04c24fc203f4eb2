// The decode-path product with block-quantized weights on tensor cores: out_i [n, rows_i] = x [n, k] @
// dequant(w_i)^T for n <= 8 tokens and up to 4 weights of one type that share x (q/k/v, gate/up), every
// packed weight byte read once.
//
// Integer types (every GGUF block type): each thread block first rounds x to 8-bit integers (or, at 2-32
// tokens after a norm, SiLU-and-multiply or the decode attention, copies the rows that kernel rounded:
// kGemvXInt8)
// in blocks of 32 (scale = max |x| / 127, as llama.cpp's q8_1 activations) into shared memory, with the
// integer sums of every scale group. The weights' integer codes then go through int8 mma.sync (m16n8k32
// for 32-value scale groups, m16n8k16 for the 16-value groups of Q2_K, Q3_K, Q6_K) with exact 32-bit sums
// per scale group, and each sum is scaled in f32: acc += dx * (d_w * sum(q * xq) - min_w * sum(xq)), where
// min_w is the type's offset (Q4_0: 8 d, Q5_0: 16 d, Q3_K: 4 d, Q6_K: 32 d), minus the block's m (Q4_1,
// Q5_1) or the K-quant's sub-block minimum; the codes are unsigned except for Q8_0 and the IQ4 types
// (their 4-bit codes looked up in the value table). For one token (kOne: the decode of one sequence),
// every warp first folds dx into its chunk's scale table and sums each row's offsets over the chunk, so a
// scale group then costs one multiply-add per row (ChunkProductInt1).
// FP8 (f8_e4m3_b128): E4M3 codes convert exactly to f16; x goes to shared memory as f16 times a power
// of two (exact) for one or two tokens and f16 mma.sync runs, else bf16 mma.sync with x read as it is;
// each 128-value block's f32 sum is scaled by its block scale.
//
// A thread block owns 16 rows (one mma tile) at a time; its 8 warps take turns over chunks of 256 values.
// A warp stages the 16 rows' packed bytes of a chunk in shared memory with 16-byte cp.async copies (each
// lane's copy offsets computed once per tile) and decodes its mma fragments from there; the scales of the
// chunk's 16 rows are decoded once into a table.
// The grid holds as many blocks as fit on the device, each looping over tiles, and a warp's chunks run
// through one pipeline of two or three buffers across tiles (the next chunks load while one is computed).
// The k order inside a mma step is permuted as in gemv.cu (thread (g, t) supplies consecutive values of
// rows g and g + 8 and of token g's activations, A and B alike). Partial sums of the 8 warps are added in
// shared memory in a fixed order (deterministic).
#include <algorithm>

#include "backend/cuda/quant_mma.cuh"

namespace infernix::cuda {
namespace {

using namespace qmma;  // NOLINT: the building blocks of this kernel family

// kHalfX (FP8 only): x in shared memory as f16 (ActivationsToHalf); else x read as bf16 from global memory.
// kOne (integer types): one token, ChunkProductInt1. kNt (integer types, not kOne): tiles of 8 tokens, up to
// 8 kNt tokens, each chunk's codes decoded once for all of them (the wide form: more than 8 tokens with the
// weights read once; one block per SM, its shared memory mostly x, so two stages from three tiles on).
template <int T, bool kHalfX, bool kOne, int kNt = 1>
__global__ void __launch_bounds__(32 * kWarps, kOne || !IsIntType<T>() ? 3 : kNt > 1 ? 1 : 2)
    QuantGemvMmaKernel(GemvBatch p) {
  static_assert(kNt == 1 || (IsIntType<T>() && !kOne), "the wide form is for integer types at several tokens");
  extern __shared__ __align__(16) uint8_t smem[];
  AllowDependentLaunch();  // the next kernel may get ready; it waits for this one's results
  const int k = static_cast<int>(p.k), n = kOne ? 1 : static_cast<int>(p.n);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  constexpr int kCb = ChunkBytes<T>(), kW = StageWords<T>(), kStages = WideStages<T>(kNt);
  constexpr int kSlots = (16 * kW + 31) / 32;  // 16-byte copies per lane per chunk, at most
  const int chunks = k / kChunk;
  const uint32_t row_bytes = static_cast<uint32_t>(chunks) * kCb;  // QuantGemvMmaFits: offsets fit 32 bits
  uint8_t* stage = smem + warp * kStages * 16 * kW * 16;
  constexpr size_t kStageBytes = WideStageBytes<T>(kNt);
  // The block takes tiles blockIdx.x, + gridDim.x, ...; a warp takes chunks warp, warp + 8, ... of each.
  // Its work items (tile, chunk) run through one pipeline of kStages buffers, across tiles. With
  // silu_out (gate and up, equal rows) the block takes pairs of tiles instead: the gate tile and the up
  // tile of the same rows, one after the other, so that it can write SiLU(gate) * up.
  int total_tiles = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    if (i < p.n_segments) total_tiles += static_cast<int>((p.seg[i].rows + 15) / 16);
  const bool paired = p.silu_out != nullptr;
  const int units = paired ? total_tiles / 2 : total_tiles;  // tiles, or pairs of tiles
  const int my_tiles = (units - static_cast<int>(blockIdx.x) + gridDim.x - 1) / gridDim.x * (paired ? 2 : 1);
  // The block's ti-th tile.
  auto tile_of = [&](int ti) {
    return paired ? static_cast<int>(blockIdx.x) + (ti >> 1) * gridDim.x + (ti & 1) * units
                  : static_cast<int>(blockIdx.x) + ti * gridDim.x;
  };
  const int per_tile = warp < chunks ? (chunks - warp + kWarps - 1) / kWarps : 0;
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
  // The producer: the next item to stage (tile pt of the block's, chunk step pm) and, for that tile, the
  // offset of each of this lane's copies (word i = lane + 32 s of the staged rows: row i / kW, word i % kW).
  int pt = 0, pm = 0;
  const uint8_t* pw = nullptr;
  uint32_t off[kSlots];
  auto enter_tile = [&](int ti) {
    GemvSegment sg;
    int row0;
    locate(tile_of(ti), &sg, &row0);
    pw = static_cast<const uint8_t*>(sg.w);
    const int last = static_cast<int>(sg.rows) - 1;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      const int i = lane + 32 * s;
      off[s] = static_cast<uint32_t>(min(row0 + i / kW, last)) * row_bytes + static_cast<uint32_t>(i % kW) * 16;
    }
  };
  if (per_tile > 0 && my_tiles > 0) enter_tile(0);
  // Chunks of a whole number of words (most types) cover the same words of every row: which of the
  // lane's copies hold one is then the same for every chunk.
  uint32_t valid = 0;
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    const int i = lane + 32 * s;
    if (i < 16 * kW && i % kW < (kCb + 15) / 16) valid |= 1u << s;
  }
  // Stages the producer's item into buffer b (the 16-byte words covering the chunk in each of the 16 rows;
  // rows past the end repeat the last one) and moves the producer on.
  auto issue = [&](int b) {
    if (per_tile > 0 && pt < my_tiles) {
      const uint32_t start = static_cast<uint32_t>(warp + pm * kWarps) * kCb, a0 = start & ~15u;
      const uint32_t words = (((start + kCb + 15) & ~15u) - a0) / 16;  // read when kCb % 16 != 0
      uint8_t* dst = stage + b * 16 * kW * 16;
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        const int i = lane + 32 * s;
        if constexpr (T == kF8E4M3B128) {  // StageChunk's FP8 form: 16 words of codes, then the 2 scales
          (void)words;
          const uint32_t c = static_cast<uint32_t>(warp + pm * kWarps);
          if (i < 16 * kW) {
            if (i % kW < 16) {
              CpAsync16(dst + i * 16, pw + (off[s] + c * kChunk));
            } else {  // off[s] is the row's word 16: its scales lie k - 256 bytes on
              CpAsync8(dst + i * 16, pw + (off[s] - kF8StagedScales + static_cast<uint32_t>(k) + c * 8));
            }
          }
          continue;
        }
        bool copy;
        if constexpr (kCb % 16 == 0) {
          copy = (valid >> s) & 1u;
          (void)words;
        } else {
          copy = i < 16 * kW && static_cast<uint32_t>(i % kW) < words;
        }
        if (copy) CpAsync16(dst + i * 16, pw + (off[s] + a0));
      }
      if (++pm == per_tile) {
        pm = 0;
        if (++pt < my_tiles) enter_tile(pt);
      }
    }
    CpAsyncCommit();  // an empty group past the end keeps the wait counts uniform
  };
#pragma unroll
  for (int b = 0; b < kStages - 1; ++b) issue(b);

  WaitForPrevious();  // x is ready
  uint8_t* act = smem + kStageBytes;
  const bf16* x = static_cast<const bf16*>(p.x);
  constexpr int kG = GroupValues<T>(), kTs = TableStride<T>();
  float2* table = reinterpret_cast<float2*>(act) + warp * 16 * kTs;
  int8_t* xq = reinterpret_cast<int8_t*>(act + TableBytes<T>());
  float2* xs = reinterpret_cast<float2*>(act + TableBytes<T>() + n * XqStride(k));
  __half* xh = reinterpret_cast<__half*>(act);
  float* xf = reinterpret_cast<float*>(act + static_cast<size_t>(n) * XqStride(k) * 2);
  if constexpr (IsIntType<T>()) {
    if (!kOne && p.pro.kind == kGemvXInt8) {  // x rounded by the op before: its rows copied
      const uint4* src = static_cast<const uint4*>(p.pro.a);
      uint4* dst = reinterpret_cast<uint4*>(xq);
      const int words = QuantXBytes(n, k, kG) / 16;
      for (int i = static_cast<int>(threadIdx.x); i < words; i += 32 * kWarps) dst[i] = src[i];
    } else {
      QuantizeActivations<kG, kNt == 1 ? 4 : 8, (kNt > 1)>(x, n, k, xq, xs);
    }
    __syncthreads();
  } else if constexpr (kHalfX) {
    ActivationsToHalf(x, n, k, xh, xf);
  }
  if (per_tile > 0 && pt < my_tiles) enter_tile(pt);  // the offsets again: their registers served x above
  // Tile i of 8 tokens: C columns 2t, 2t + 1 are tokens 8i + 2t, 8i + 2t + 1; B column g token 8i + g
  // (tokens past n repeat the last one; their sums are not stored).
  const int tok0 = min(2 * t, n - 1), tok1 = min(2 * t + 1, n - 1);
  const int tok_b = min(g, n - 1);
  const float2* xs0[kNt];
  const float2* xs1[kNt];
  int xb_off[kNt];
#pragma unroll
  for (int i = 0; i < kNt; ++i) {
    xs0[i] = xs + min(8 * i + 2 * t, n - 1) * (k / kG);
    xs1[i] = xs + min(8 * i + 2 * t + 1, n - 1) * (k / kG);
    xb_off[i] = min(8 * i + g, n - 1) * static_cast<int>(XqStride(k));
  }

  float acc[4 * kNt];  // tile i: rows g, g, g+8, g+8 x tokens 8i + 2t, 8i + 2t + 1
  float gate = 0.0f;   // paired: this thread's sum of the gate tile, for the up tile
  __shared__ float partial[kWarps][4][32];
  // The wide form's partial sums, after x: [kWarps][4 kNt][32].
  float* wide = reinterpret_cast<float*>(act + ActBytes<T>(n, k));
  int b = 0, pb = kStages - 1;  // the buffers of the item computed and of the item staged next
  for (int ti = 0; ti < my_tiles; ++ti) {
#pragma unroll
    for (int q = 0; q < 4 * kNt; ++q) acc[q] = 0.0f;
    for (int m = 0; m < per_tile; ++m) {
      const int c = warp + m * kWarps;
      issue(pb);
      pb = pb + 1 == kStages ? 0 : pb + 1;
      CpAsyncWait<kStages - 1>();
      __syncwarp();
      const uint8_t* rows16 = stage + b * 16 * kW * 16 + StagedChunkOffset<T>(c);
      b = b + 1 == kStages ? 0 : b + 1;
      const int k0 = c * kChunk;
      if constexpr (IsIntType<T>() && kOne) {
        ChunkProductInt1<T>(rows16, reinterpret_cast<float*>(table), xq + k0, xs + k0 / kG, 1.0f, lane, acc);
      } else if constexpr (IsIntType<T>()) {
        const int8_t* xb[kNt];
        const float2* c0[kNt];
        const float2* c1[kNt];
#pragma unroll
        for (int i = 0; i < kNt; ++i) {
          xb[i] = xq + xb_off[i] + k0;
          c0[i] = xs0[i] + k0 / kG;
          c1[i] = xs1[i] + k0 / kG;
        }
        ChunkProductInt<T, kNt>(rows16, table, xb, c0, c1, 1.0f, lane, acc);
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
    if constexpr (kNt > 1) {  // the tile's sums over the 8 warps, in a fixed order: no pairs here
#pragma unroll
      for (int q = 0; q < 4 * kNt; ++q) wide[(warp * 4 * kNt + q) * 32 + lane] = acc[q];
      __syncthreads();
      GemvSegment sg;
      int row0;
      locate(tile_of(ti), &sg, &row0);
      const int rows = static_cast<int>(sg.rows);
      for (int o = static_cast<int>(threadIdx.x); o < 4 * kNt * 32; o += 32 * kWarps) {
        const int q = o >> 5, ln = o & 31;
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < kWarps; ++i) sum += wide[(i * 4 * kNt + q) * 32 + ln];
        const int row = row0 + (ln >> 2) + ((q & 3) >= 2 ? 8 : 0);
        const int token = 8 * (q >> 2) + 2 * (ln & 3) + (q & 1);
        if (row < rows && token < n) StoreF(sg.out, sg.out_dtype, static_cast<int64_t>(token) * rows + row, sum);
      }
    } else {  // the tile's sums over the 8 warps, in a fixed order
#pragma unroll
      for (int q = 0; q < 4; ++q) partial[warp][q][lane] = acc[q];
      __syncthreads();
      if (threadIdx.x < 4 * 32) {
        GemvSegment sg;
        int row0;
        locate(tile_of(ti), &sg, &row0);
        const int q = threadIdx.x >> 5, ln = threadIdx.x & 31, rows = static_cast<int>(sg.rows);
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < kWarps; ++i) sum += partial[i][q][ln];
        const int row = row0 + (ln >> 2) + (q >= 2 ? 8 : 0);
        const int token = 2 * (ln & 3) + (q & 1);
        if (row < rows && token < n) {
          const int64_t i = static_cast<int64_t>(token) * rows + row;
          if (!paired) {
            StoreF(sg.out, sg.out_dtype, i, sum);
          } else {  // gate (this thread has the same row of up next), then up
            StoreGateUpPair((ti & 1) != 0, sg.out, p.silu_out, i, sum, gate);
          }
        }
      }
    }
    __syncthreads();
  }
}

// Tiles of 8 tokens a launch of n tokens takes.
int Tiles(int64_t n) { return static_cast<int>((n + 7) / 8); }

template <int T, bool kHalfX>
size_t SmemBytes(int64_t n, int64_t k) {
  if constexpr (IsIntType<T>()) {
    const int nt = Tiles(n);  // the wide form (nt > 1): its partial sums after x
    return WideStageBytes<T>(nt) + ActBytes<T>(n, k) + (nt > 1 ? sizeof(float) * kWarps * 4 * nt * 32 : 0);
  }
  return StageBytes<T>() + (kHalfX ? static_cast<size_t>(n * XqStride(k) * 2 + n * 4) : 0);
}

// FP8 takes x through shared memory as f16 for one or two tokens when that fits (for more, the
// per-token scaling pass and the shared memory it takes cost more than the cheaper conversion saves).
bool HalfXFits(int64_t n, int64_t k, size_t max_smem_optin) {
  return SmemBytes<kF8E4M3B128, true>(n, k) + kStaticSmem <= max_smem_optin;
}

template <int T, bool kHalfX, bool kOne, int kNt = 1>
void Configure(size_t max_smem_optin) {
  INFX_CUDA_CHECK(cudaFuncSetAttribute(QuantGemvMmaKernel<T, kHalfX, kOne, kNt>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(max_smem_optin - kStaticSmem)));
}

// One block per tile, at most as many as fit on the device at once (each then loops over tiles).
template <int T, bool kHalfX, bool kOne = false, int kNt = 1>
void Launch(cudaStream_t s, const GemvBatch& batch, int64_t tiles) {
  const size_t smem = SmemBytes<T, kHalfX>(batch.n, batch.k);
  auto* kernel = QuantGemvMmaKernel<T, kHalfX, kOne, kNt>;
  const int64_t units = batch.silu_out != nullptr ? tiles / 2 : tiles;
  LaunchDependent(kernel, PersistentBlocks(kernel, 32 * kWarps, smem, units), 32 * kWarps, smem, s, batch);
}

}  // namespace

void ConfigureQuantGemvMma(size_t max_smem_optin) {
  for (int type : kQuantTypes) {
    ByQuantType(type, [&](auto tc) {
      constexpr int T = decltype(tc)::value;
      Configure<T, false, false>(max_smem_optin);
      if constexpr (IsIntType<T>()) {
        Configure<T, false, true>(max_smem_optin);
        Configure<T, false, false, 2>(max_smem_optin);
        Configure<T, false, false, 3>(max_smem_optin);
        Configure<T, false, false, 4>(max_smem_optin);
      }
    });
  }
  Configure<kF8E4M3B128, true, false>(max_smem_optin);
}

bool QuantGemvMmaFits(int type, int64_t n, int64_t k, int64_t rows, const void* x, const void* w,
                      size_t max_smem_optin) {
  if (!QuantTypeSupported(type) || n < 1 || rows < 1 || k % kChunk != 0) return false;
  if (n > (type == kF8E4M3B128 ? kQuantGemvMaxTokens : kQuantGemvWideMaxTokens)) return false;
  if ((reinterpret_cast<uintptr_t>(x) & 15u) != 0 || (reinterpret_cast<uintptr_t>(w) & 15u) != 0) return false;
  if (k > (int64_t{1} << 24) || rows > (int64_t{1} << 24)) return false;  // 32-bit index math
  return ByQuantType(type, [&](auto tc) {
    constexpr int T = decltype(tc)::value;
    const int64_t row_bytes = k / kChunk * ChunkBytes<T>();
    return row_bytes % 16 == 0 && rows * row_bytes < (int64_t{1} << 32) &&  // byte offsets in 32 bits
           SmemBytes<T, false>(n, k) + kStaticSmem <= max_smem_optin;
  });
}

int64_t QuantGemvMmaGroupTokens(int type, int64_t n, int64_t k, int64_t rows, const void* x, const void* w,
                                size_t max_smem_optin) {
  if (n <= kQuantGemvMaxTokens || QuantGemvMmaFits(type, n, k, rows, x, w, max_smem_optin)) return n;
  for (int64_t g = std::min<int64_t>(n - 1, kQuantGemvWideMaxTokens) / 8 * 8; g > kQuantGemvMaxTokens; g -= 8)
    if (QuantGemvMmaFits(type, g, k, rows, x, w, max_smem_optin)) return g;
  return kQuantGemvMaxTokens;
}

void LaunchQuantGemvMma(cudaStream_t s, GemvBatch batch, size_t max_smem_optin) {
  INFX_CHECK(batch.n <= kQuantGemvMaxTokens || (batch.silu_out == nullptr && batch.res.out == nullptr));
  INFX_CHECK(batch.pro.kind == kGemvXPlain ||
             (batch.pro.kind == kGemvXInt8 && batch.w_type != kF8E4M3B128 && batch.n >= 2 &&
              batch.n <= kQuantGemvWideMaxTokens && (reinterpret_cast<uintptr_t>(batch.pro.a) & 15u) == 0));
  INFX_CHECK(batch.silu_out == nullptr || (batch.n_segments == 2 && batch.seg[0].rows == batch.seg[1].rows &&
                                           batch.seg[0].out_dtype == kBF16 && batch.seg[1].out_dtype == kBF16));
  int64_t tiles = 0;
  for (int i = 0; i < batch.n_segments; ++i) tiles += (batch.seg[i].rows + 15) / 16;
  if (tiles == 0 || batch.n == 0) return;
  if (batch.w_type == kF8E4M3B128 && batch.n <= 2 && HalfXFits(batch.n, batch.k, max_smem_optin)) {
    Launch<kF8E4M3B128, true>(s, batch, tiles);
  } else {
    ByQuantType(batch.w_type, [&](auto tc) {
      constexpr int T = decltype(tc)::value;
      if constexpr (IsIntType<T>()) {
        switch (Tiles(batch.n)) {
          case 1: return batch.n == 1 ? Launch<T, false, true>(s, batch, tiles) : Launch<T, false>(s, batch, tiles);
          case 2: return Launch<T, false, false, 2>(s, batch, tiles);
          case 3: return Launch<T, false, false, 3>(s, batch, tiles);
          default: return Launch<T, false, false, 4>(s, batch, tiles);
        }
      }
      Launch<T, false>(s, batch, tiles);
    });
  }
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
