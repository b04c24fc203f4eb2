// Mixture of experts for many tokens (prefill): the routed (token, expert) pairs are grouped by expert
// and every expert's SwiGLU MLP runs as two tensor-core GEMMs over its group, so each active expert's
// weights are read once per 128 pairs instead of once per token.
//
//  1. MoeSortKernel (one block): counts the pairs of each expert, gives every pair a row of a
//     permuted order (experts' groups one after another) and lists the GEMM tiles: up to 128 rows of one
//     expert each. Rows within a group come in atomic order, which does not matter: a GEMM row depends
//     on its own input row only, so results are deterministic.
//  2. MoeGemmKernel<kGateUp = true>: act[row] = silu(x[token] @ gate_e^T) * (x[token] @ up_e^T), bf16,
//     the token's row of x read in place (no gathered copy). A block computes 128 rows x 64 columns of
//     both products, so the epilogue holds gate and up of the same element.
//  3. MoeGemmKernel<kGateUp = false>: y[row] = act[row] @ down_e^T, bf16, 128 rows x 128 columns.
//  4. MoeCombineKernel: out[t] = sum_j weights[t, j] * y[row of (t, j)] in routing order (f32 sum).
//
// The GEMM: 8 warps (4 x 2), each 32 rows x 64 columns as 2 x 8 mma.sync m16n8k16 tiles, k in steps
// of 32 through a 3-stage cp.async pipeline (60 KiB of dynamic shared memory); shared-memory rows padded
// to 80 bytes so ldmatrix reads are free of bank conflicts. At 64 rows a tile (4 warps) both GEMMs were
// bound by L2 bandwidth in an 8,192-token prefill of Qwen3-Next (ncu: 95-96% of L2 throughput, 26-32% of
// SM throughput), each expert's weight tile being read from L2 once per 64 rows; 128 rows halve that. The grid is sized
// for the worst case (every expert's last tile partial) from sizes the host knows, so the launches are graph-safe;
// blocks past the real tile count return.
#include "backend/cuda/quant_blocks.cuh"

namespace infernix::cuda {
namespace {

constexpr int kBm = 128, kBn = 128, kBk = 32, kStages = 3, kThreads = 256;
constexpr int kRowPad = kBk + 8;  // bf16 per shared-memory row (80 bytes)
constexpr size_t kGemmSmem = size_t{kStages} * (kBm + kBn) * kRowPad * sizeof(bf16);  // A's stages, then B's
static_assert(kThreads / 4 * 2 == kBm && kThreads / 4 * 2 == kBn, "two 16-byte chunks of A and of B per thread");
constexpr int kSortThreads = 1024;

// Where the grouped pairs live in the scratch block (MoeGroupedScratchBytes).
struct Grouped {
  int32_t* n_tiles;    // [1]
  int32_t* tiles;      // [max_tiles, 3]: expert, first row, end row
  int32_t* row_token;  // [pairs]: the token of each permuted row
  int32_t* pair_row;   // [pairs]: the permuted row of pair (t, j); -1 for an expert id out of range
  bf16* act;           // [pairs, inter]
  bf16* y;             // [pairs, hidden]
};

size_t AlignUp(size_t v) { return (v + 255) / 256 * 256; }

int64_t MaxTiles(int64_t pairs, int64_t n_experts) {
  return (pairs + kBm - 1) / kBm + std::min(pairs, n_experts);
}

Grouped Carve(void* scratch, int64_t pairs, int64_t n_experts, int64_t inter, int64_t hidden) {
  auto* p = static_cast<unsigned char*>(scratch);
  Grouped g{};
  g.n_tiles = reinterpret_cast<int32_t*>(p);
  p += AlignUp(sizeof(int32_t));
  g.tiles = reinterpret_cast<int32_t*>(p);
  p += AlignUp(sizeof(int32_t) * 3 * static_cast<size_t>(MaxTiles(pairs, n_experts)));
  g.row_token = reinterpret_cast<int32_t*>(p);
  p += AlignUp(sizeof(int32_t) * static_cast<size_t>(pairs));
  g.pair_row = reinterpret_cast<int32_t*>(p);
  p += AlignUp(sizeof(int32_t) * static_cast<size_t>(pairs));
  g.act = reinterpret_cast<bf16*>(p);
  p += AlignUp(sizeof(bf16) * static_cast<size_t>(pairs * inter));
  g.y = reinterpret_cast<bf16*>(p);
  return g;
}

// Shared memory: counts, first rows, cursors and first tiles of each expert (4 x n_experts ints).
__global__ void __launch_bounds__(kSortThreads)
    MoeSortKernel(const int32_t* ids, int64_t pairs, int top_k, int n_experts, Grouped g) {
  extern __shared__ int32_t sh[];
  int32_t* count = sh;
  int32_t* first = sh + n_experts;
  int32_t* cursor = sh + 2 * n_experts;
  int32_t* first_tile = sh + 3 * n_experts;
  for (int e = threadIdx.x; e < n_experts; e += blockDim.x) count[e] = cursor[e] = 0;
  __syncthreads();
  for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int e = ids[p];
    if (e >= 0 && e < n_experts) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // n_experts <= a few hundred: a serial scan is cheaper than a parallel one
    int32_t row = 0, tile = 0;
    for (int e = 0; e < n_experts; ++e) {
      first[e] = row;
      first_tile[e] = tile;
      row += count[e];
      tile += (count[e] + kBm - 1) / kBm;
    }
    *g.n_tiles = tile;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < n_experts; e += blockDim.x) {
    for (int32_t r = 0, i = first_tile[e]; r < count[e]; r += kBm, ++i) {
      g.tiles[3 * i] = e;
      g.tiles[3 * i + 1] = first[e] + r;
      g.tiles[3 * i + 2] = first[e] + min(r + kBm, count[e]);
    }
  }
  for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int e = ids[p];
    int32_t row = -1;
    if (e >= 0 && e < n_experts) {
      row = first[e] + atomicAdd(&cursor[e], 1);
      g.row_token[row] = static_cast<int32_t>(p / top_k);
    }
    g.pair_row[p] = row;
  }
}

struct GemmArgs {
  const bf16* a;            // kGateUp: x [n, k] (rows through row_token); else act [pairs, k]
  const int32_t* row_token;
  const void* const* w0;    // kGateUp: gate; else down: [n_out, k] per expert
  const void* const* w1;    // kGateUp: up
  const int32_t* n_tiles;
  const int32_t* tiles;
  bf16* out;                // [pairs, n_out]
  int64_t k, n_out;
};

// W: kBF16, or a block type QuantTypeSupported accepts (its rows decoded a 32-value sub-block at a time
// into the bf16 tile: thread i < kBn decodes B row i of each stage).
template <bool kGateUp, int W>
__global__ void __launch_bounds__(kThreads) MoeGemmKernel(GemmArgs p) {
  const int tile = blockIdx.x;
  if (tile >= *p.n_tiles) return;
  const int e = p.tiles[3 * tile], r0 = p.tiles[3 * tile + 1], r1 = p.tiles[3 * tile + 2];
  // Output columns of this block: kGateUp covers 64 columns of gate (smem B rows 0-63) and the same 64
  // of up (rows 64-127); down covers 128 columns.
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * (kGateUp ? kBn / 2 : kBn);
  extern __shared__ __align__(16) unsigned char gemm_smem[];
  auto sa = reinterpret_cast<bf16(*)[kBm][kRowPad]>(gemm_smem);                                           // [kStages]
  auto sb = reinterpret_cast<bf16(*)[kBn][kRowPad]>(gemm_smem + kStages * kBm * kRowPad * sizeof(bf16));  // [kStages]

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wm = warp & 3, wn = warp >> 2;
  // This thread's copies per stage: 2 chunks of A (rows tid/4 and +64, 16 bytes at (tid%4)*8) and
  // either 2 chunks of B (bf16) or the decoded sub-block of B row tid (tid < kBn).
  const int part = (tid & 3) * 8;
  auto chunk_row = [&](int i) { return (tid >> 2) + kThreads / 4 * i; };  // the tile row of chunk i
  const bf16* a_src[2];
  bool a_ok[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = chunk_row(i);
    a_ok[i] = r0 + r < r1;
    const int64_t row = a_ok[i] ? (kGateUp ? p.row_token[r0 + r] : r0 + r) : 0;
    a_src[i] = p.a + row * p.k + part;
  }
  // The weight row behind smem B row r, or nullptr past the last column.
  auto weight_row = [&](int r) -> const void* {
    const void* w = kGateUp && r >= kBn / 2 ? p.w1[e] : p.w0[e];
    const int64_t col = col0 + (kGateUp ? (r & (kBn / 2 - 1)) : r);
    if (col >= p.n_out) return nullptr;
    if constexpr (W == kBF16) {
      return static_cast<const bf16*>(w) + col * p.k;
    } else {
      return static_cast<const uint8_t*>(w) + col * QuantRowBytes<W>(p.k);
    }
  };
  constexpr int kBChunks = W == kBF16 ? 2 : 1;
  const void* b_src[kBChunks];
#pragma unroll
  for (int i = 0; i < kBChunks; ++i)
    b_src[i] = W == kBF16 ? weight_row(chunk_row(i)) : tid < kBn ? weight_row(tid) : nullptr;
  auto load = [&](int stage, int64_t ks) {
    const int64_t k0 = ks * kBk;
#pragma unroll
    for (int i = 0; i < 2; ++i) CpAsync16Zfill(&sa[stage][chunk_row(i)][part], a_src[i] + k0, a_ok[i]);
    if constexpr (W == kBF16) {
#pragma unroll
      for (int i = 0; i < kBChunks; ++i) {
        const bf16* src = static_cast<const bf16*>(b_src[i]);
        CpAsync16Zfill(&sb[stage][chunk_row(i)][part], src ? src + k0 + part : p.a, src != nullptr);
      }
    } else if (tid < kBn) {
      float v[32] = {};
      if (b_src[0]) LoadSub<W>(static_cast<const uint8_t*>(b_src[0]), ks, v, p.k);
#pragma unroll
      for (int i = 0; i < 32; i += 8) Store8(&sb[stage][tid][i], v + i);
    }
  };

  float acc[2][8][4] = {};
  const int64_t k_steps = p.k / kBk;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_steps) load(s, s);
    CpAsyncCommit();
  }
  // ldmatrix addressing: A x4 = rows +0..15 at k +0 / +8; B x4 = two n8 tiles (rows +0..7, +8..15) at k +0 / +8.
  const int a_row = lane & 15, a_k = (lane >> 4) * 8;
  const int b_row = (lane & 7) + ((lane >> 4) << 3), b_k = ((lane >> 3) & 1) * 8;
  for (int64_t ks = 0; ks < k_steps; ++ks) {
    CpAsyncWait<kStages - 2>();
    __syncthreads();  // stage ks is in; every warp is done with the stage the next load overwrites
    const int64_t next = ks + kStages - 1;
    if (next < k_steps) load(static_cast<int>(next % kStages), next);
    CpAsyncCommit();
    const int st = static_cast<int>(ks % kStages);
#pragma unroll
    for (int kk = 0; kk < kBk; kk += 16) {
      uint32_t af[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) LdMatrixX4(af[mt], &sa[st][wm * 32 + mt * 16 + a_row][kk + a_k]);
#pragma unroll
      for (int jp = 0; jp < 4; ++jp) {
        // n8 tiles 2jp and 2jp+1: gate/up puts tiles 0-3 in the gate half and 4-7 in the up half.
        const int brow = kGateUp ? (jp < 2 ? 0 : kBn / 2) + wn * 32 + (jp & 1) * 16 : wn * 64 + jp * 16;
        uint32_t bf[4];
        LdMatrixX4(bf, &sb[st][brow + b_row][kk + b_k]);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          MmaBf16(acc[mt][2 * jp], af[mt][0], af[mt][1], af[mt][2], af[mt][3], bf[0], bf[1]);
          MmaBf16(acc[mt][2 * jp + 1], af[mt][0], af[mt][1], af[mt][2], af[mt][3], bf[2], bf[3]);
        }
      }
    }
  }
  CpAsyncWait<0>();

  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = r0 + wm * 32 + mt * 16 + g + half * 8;
      if (row >= r1) continue;
      bf16* out = p.out + static_cast<int64_t>(row) * p.n_out;
#pragma unroll
      for (int j = 0; j < (kGateUp ? 4 : 8); ++j) {
        const int64_t col = col0 + (kGateUp ? wn * 32 : wn * 64) + j * 8 + 2 * t;
        if (col >= p.n_out) continue;
        float v0 = acc[mt][j][2 * half], v1 = acc[mt][j][2 * half + 1];
        if constexpr (kGateUp) {
          v0 = SiluF(v0) * acc[mt][j + 4][2 * half];
          v1 = SiluF(v1) * acc[mt][j + 4][2 * half + 1];
        }
        if (col + 1 < p.n_out) {
          *reinterpret_cast<__nv_bfloat162*>(out + col) = __floats2bfloat162_rn(v0, v1);
        } else {
          out[col] = __float2bfloat16_rn(v0);
        }
      }
    }
  }
}

// out[t, 8c .. 8c+7] = sum_j weights[t, j] * y[pair_row[t, j], ...]; one thread per 8 columns.
__global__ void MoeCombineKernel(const bf16* y, const int32_t* pair_row, const float* weights, int64_t n, int top_k,
                                 int64_t hidden, bf16* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t groups = hidden / 8;
  if (i >= n * groups) return;
  const int64_t t = i / groups, c = (i % groups) * 8;
  float sum[8] = {};
  for (int j = 0; j < top_k; ++j) {
    const int32_t row = pair_row[t * top_k + j];
    if (row < 0) continue;
    const float w = weights[t * top_k + j];
    float v[8];
    Load8(y + static_cast<int64_t>(row) * hidden + c, v);
#pragma unroll
    for (int q = 0; q < 8; ++q) sum[q] += w * v[q];
  }
  Store8(out + t * hidden + c, sum);
}

}  // namespace

void ConfigureMoeGrouped(size_t max_smem_optin) {
  INFX_CHECK_MSG(kGemmSmem <= max_smem_optin, "grouped experts: {} bytes of shared memory per block, the GPU allows {}",
                 kGemmSmem, max_smem_optin);
  auto configure = [&](auto type) {
    constexpr int W = decltype(type)::value;
    for (auto kernel : {MoeGemmKernel<true, W>, MoeGemmKernel<false, W>})
      INFX_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kGemmSmem)));
  };
  configure(std::integral_constant<int, kBF16>{});
  for (int type : kQuantTypes) ByQuantType(type, configure);
}

bool MoeGroupedFits(const ExpertTable& experts) {
  const bool bf16 = experts.dtype == kBF16 && experts.aligned16;
  return (bf16 || QuantTypeSupported(experts.dtype)) && experts.hidden % kBk == 0 && experts.inter % kBk == 0 &&
         experts.n_experts <= 2048;
}

size_t MoeGroupedScratchBytes(int64_t n, int32_t top_k, const ExpertTable& experts) {
  const int64_t pairs = n * top_k;
  return AlignUp(sizeof(int32_t)) + AlignUp(sizeof(int32_t) * 3 * static_cast<size_t>(MaxTiles(pairs, experts.n_experts))) +
         2 * AlignUp(sizeof(int32_t) * static_cast<size_t>(pairs)) +
         AlignUp(sizeof(bf16) * static_cast<size_t>(pairs * experts.inter)) +
         AlignUp(sizeof(bf16) * static_cast<size_t>(pairs * experts.hidden));
}

void LaunchMoeGrouped(cudaStream_t s, const void* x, const float* weights, const int32_t* ids, int64_t n,
                      int32_t top_k, ExpertTable experts, void* scratch, void* out) {
  if (n == 0) return;
  INFX_CHECK_MSG(MoeGroupedFits(experts), "grouped experts: unsupported shape or dtype");
  const int64_t pairs = n * top_k;
  Grouped g = Carve(scratch, pairs, experts.n_experts, experts.inter, experts.hidden);
  MoeSortKernel<<<1, kSortThreads, 4 * sizeof(int32_t) * static_cast<size_t>(experts.n_experts), s>>>(
      ids, pairs, top_k, experts.n_experts, g);
  INFX_CUDA_CHECK_LAUNCH();
  const auto tiles = static_cast<unsigned>(MaxTiles(pairs, experts.n_experts));
  GemmArgs up{static_cast<const bf16*>(x), g.row_token, experts.gate, experts.up, g.n_tiles, g.tiles, g.act,
              experts.hidden, experts.inter};
  GemmArgs down{g.act, nullptr, experts.down, nullptr, g.n_tiles, g.tiles, g.y, experts.inter, experts.hidden};
  auto gemms = [&](auto type) {
    constexpr int W = decltype(type)::value;
    MoeGemmKernel<true, W><<<dim3(tiles, Blocks(experts.inter, kBn / 2)), kThreads, kGemmSmem, s>>>(up);
    INFX_CUDA_CHECK_LAUNCH();
    MoeGemmKernel<false, W><<<dim3(tiles, Blocks(experts.hidden, kBn)), kThreads, kGemmSmem, s>>>(down);
    INFX_CUDA_CHECK_LAUNCH();
  };
  if (experts.dtype == kBF16) {
    gemms(std::integral_constant<int, kBF16>{});
  } else {
    ByQuantType(experts.dtype, gemms);
  }
  MoeCombineKernel<<<Blocks(n * (experts.hidden / 8), 256), 256, 0, s>>>(g.y, g.pair_row, weights, n, top_k,
                                                                        experts.hidden, static_cast<bf16*>(out));
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
