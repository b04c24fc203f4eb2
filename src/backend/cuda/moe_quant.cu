// The routed experts of a MoE layer with block-quantized weights (Qwen3-MoE / Qwen3-Next GGUF files, FP8
// checkpoints): per token and selected expert, act = silu(gate_e x) * (up_e x), then out = sum_j w_j down_e
// act. Only the selected experts' weights are read. Two kernels either way:
//  - for up to kQuantGemvMaxTokens tokens, on tensor cores with the building blocks of the quantized
//    decode GEMV (quant_mma.cuh): the first takes tiles of 16 rows of one selected expert's gate and up
//    (x rounded to int8 blocks, or bf16 for FP8) and writes act in bf16; the second takes tiles of 16
//    output rows of one token and runs through its top_k experts' down rows, each chunk's sum scaled by
//    the routing weight, so the weighted sum needs no further pass;
//  - else a warp per row dotting each quantized row (quant_blocks.cuh) in f32.
// (FP8 and bf16 experts of up to 8 tokens take moe_gemv.cu's GEMVs instead, where their shapes allow.)
#include "backend/cuda/quant_mma.cuh"

namespace infernix::cuda {
namespace {

constexpr int kWarps = 8;

__device__ __forceinline__ float Silu(float v) { return v / (1.0f + __expf(-v)); }

template <int T>
__global__ void QuantMoeActKernel(const bf16* x, const int32_t* ids, int top_k, ExpertTable ex, float* act) {
  const int64_t tj = blockIdx.x;  // token * top_k + j
  const int64_t i = static_cast<int64_t>(blockIdx.y) * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  __shared__ uint2 stage[kWarps][QuantStepBytes<T>() / 8 + 1];
  if (i >= ex.inter) return;
  uint8_t* st = reinterpret_cast<uint8_t*>(stage[threadIdx.x >> 5]);
  const int e = ids[tj];
  const bf16* xt = x + (tj / top_k) * ex.hidden;
  const int64_t row_bytes = QuantRowBytes<T>(ex.hidden);
  const float g =
      WarpDotQuantRowStaged<T>(static_cast<const uint8_t*>(ex.gate[e]) + i * row_bytes, xt, ex.hidden, lane, st);
  const float u =
      WarpDotQuantRowStaged<T>(static_cast<const uint8_t*>(ex.up[e]) + i * row_bytes, xt, ex.hidden, lane, st);
  if (lane == 0) act[tj * ex.inter + i] = Silu(g) * u;
}

template <int T>
__global__ void QuantMoeDownKernel(const float* act, const float* weights, const int32_t* ids, int top_k,
                                   ExpertTable ex, bf16* out) {
  const int64_t t = blockIdx.x;
  const int64_t o = static_cast<int64_t>(blockIdx.y) * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  __shared__ uint2 stage[kWarps][QuantStepBytes<T>() / 8 + 1];
  if (o >= ex.hidden) return;
  uint8_t* st = reinterpret_cast<uint8_t*>(stage[threadIdx.x >> 5]);
  const int64_t row_bytes = QuantRowBytes<T>(ex.inter);
  float total = 0.0f;
  for (int j = 0; j < top_k; ++j) {
    const int e = ids[t * top_k + j];
    const float d = WarpDotQuantRowStaged<T>(static_cast<const uint8_t*>(ex.down[e]) + o * row_bytes,
                                             act + (t * top_k + j) * ex.inter, ex.inter, lane, st);
    total += weights[t * top_k + j] * d;
  }
  if (lane == 0) out[t * ex.hidden + o] = __float2bfloat16_rn(total);
}

template <int T>
void Run(cudaStream_t s, const void* x, const float* weights, const int32_t* ids, int64_t n, int top_k, ExpertTable ex,
         float* act, void* out) {
  dim3 act_grid(static_cast<unsigned>(n * top_k), static_cast<unsigned>((ex.inter + kWarps - 1) / kWarps));
  QuantMoeActKernel<T><<<act_grid, 32 * kWarps, 0, s>>>(static_cast<const bf16*>(x), ids, top_k, ex, act);
  INFX_CUDA_CHECK_LAUNCH();
  dim3 down_grid(static_cast<unsigned>(n), static_cast<unsigned>((ex.hidden + kWarps - 1) / kWarps));
  QuantMoeDownKernel<T><<<down_grid, 32 * kWarps, 0, s>>>(act, weights, ids, top_k, ex, static_cast<bf16*>(out));
  INFX_CUDA_CHECK_LAUNCH();
}

// ---- tensor cores ----

struct MoeMmaArgs {
  const bf16* x;         // [n, hidden] (gate/up) or act [n * slots, inter] (down)
  const float* weights;  // [n, top_k]
  const int32_t* ids;    // [n, top_k]
  int32_t n, top_k;
  ExpertTable ex;
  bf16* out;  // act [n * S, inter] (gate/up) or [n, hidden] (down)
};
// The shared expert beside the routed ones (kShared): a kernel argument of its own, so that the kernels
// without it compile as they did.
struct MoeMmaShared {
  const float* logit = nullptr;  // [n], the shared expert's gate logits
  int32_t slots = 0;             // S: top_k + 1
};

// Slot (token t, j) of a token's experts: j < top_k its routed ones, j = top_k the shared expert (the
// table's entry n_experts), whose weight is sigmoid(sh.logit[t]).
template <bool kShared>
__device__ __forceinline__ int SlotExpert(const MoeMmaArgs& a, const MoeMmaShared& sh, int slot) {
  if constexpr (!kShared) return a.ids[slot];
  const int t = slot / sh.slots, j = slot - t * sh.slots;
  return j < a.top_k ? a.ids[t * a.top_k + j] : a.ex.n_experts;
}
template <bool kShared>
__device__ __forceinline__ float SlotFactor(const MoeMmaArgs& a, const MoeMmaShared& sh, int slot) {
  if constexpr (!kShared) return a.weights[slot];
  const int t = slot / sh.slots, j = slot - t * sh.slots;
  return j < a.top_k ? a.weights[t * a.top_k + j] : SigmoidF(sh.logit[t]);
}

// kDown false: tiles (slot = token * S + j, 16 rows of inter); a warp's items are (gate | up, chunk of
// hidden); writes act = silu(gate) * up. kDown true: tiles (token, 16 rows of hidden); items (j, chunk of
// inter) over the token's S experts, scaled by their routing weights; writes out. S = top_k, or with
// kShared top_k + 1 (the shared expert as the last slot: SlotExpert).
template <int T, bool kDown, bool kShared>
__global__ void __launch_bounds__(32 * qmma::kWarps) MoeMmaKernel(MoeMmaArgs a, MoeMmaShared sh) {
  using namespace qmma;  // NOLINT: the building blocks of this kernel family
  extern __shared__ __align__(16) uint8_t smem[];
  AllowDependentLaunch();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  constexpr int kCb = ChunkBytes<T>(), kW = StageWords<T>(), kStages = Stages<T>(), kG = GroupValues<T>();
  const int inter = static_cast<int>(a.ex.inter), hidden = static_cast<int>(a.ex.hidden);
  const int top_k = kShared ? sh.slots : a.top_k;  // experts per token
  const int k = kDown ? inter : hidden, rows = kDown ? hidden : inter;  // of the products
  const int chunks = k / kChunk, row_tiles = (rows + 15) / 16;
  const size_t row_bytes = static_cast<size_t>(chunks) * kCb;
  const int tiles = (kDown ? a.n : a.n * top_k) * row_tiles;
  const int per_tile_all = (kDown ? top_k : 2) * chunks;  // items of a tile, split over the warps
  const int per_tile = warp < per_tile_all ? (per_tile_all - warp + kWarps - 1) / kWarps : 0;
  // The block's tiles: a contiguous range [t0, t1), so that they belong to one or two owners (tokens for down,
  // slots for gate / up) and the prologue rounds only those owners' rows of x (at 8 tokens of Qwen3-30B-A3B:
  // 8 or 16 of down's 64 rows, 1 or 2 of gate / up's 8).
  const int t0 = static_cast<int>(static_cast<int64_t>(blockIdx.x) * tiles / gridDim.x);
  const int t1 = static_cast<int>(static_cast<int64_t>(blockIdx.x + 1) * tiles / gridDim.x);
  const int my_tiles = t1 - t0;
  const int items = my_tiles * per_tile;
  uint8_t* stage = smem + warp * kStages * 16 * kW * 16;
  // Item `it` of this warp: its tile, the activation row it multiplies (slot), the matrix half (gate / up)
  // or expert j, and the chunk.
  struct Item {
    int tile, slot, part, c;
  };
  auto item = [&](int it) {
    Item r;
    r.tile = t0 + it / per_tile;
    const int idx = warp + (it % per_tile) * kWarps;
    r.part = idx / chunks;
    r.c = idx % chunks;
    r.slot = kDown ? (r.tile / row_tiles) * top_k + r.part : r.tile / row_tiles;
    return r;
  };
  WaitForPrevious();  // the routing (ids, weights) and x come from the kernels before
  auto issue = [&](int it, int b) {
    if (it < items) {
      const Item m = item(it);
      const int e = SlotExpert<kShared>(a, sh, m.slot);
      const void* const* table = kDown ? a.ex.down : (m.part == 0 ? a.ex.gate : a.ex.up);
      StageChunk<T>(stage + b * 16 * kW * 16, static_cast<const uint8_t*>(table[e]), (m.tile % row_tiles) * 16, rows,
                    row_bytes, m.c, lane);
    }
    CpAsyncCommit();
  };
#pragma unroll
  for (int b = 0; b < kStages - 1; ++b) issue(b, b);

  uint8_t* act_smem = smem + StageBytes<T>();
  float2* table = reinterpret_cast<float2*>(act_smem) + warp * 16 * TableStride<T>();
  const int x_rows = kDown ? a.n * top_k : a.n;
  int8_t* xq = reinterpret_cast<int8_t*>(act_smem + TableBytes<T>());
  float2* xs = reinterpret_cast<float2*>(act_smem + TableBytes<T>() + x_rows * XqStride(k));
  if constexpr (IsIntType<T>()) {
    if (my_tiles > 0) {  // the rows of x that the block's tiles multiply, at their places in xq / xs
      const int o0 = t0 / row_tiles, o1 = (t1 - 1) / row_tiles;
      const int r0 = kDown ? o0 * top_k : o0 / top_k, r1 = kDown ? (o1 + 1) * top_k : o1 / top_k + 1;
      QuantizeActivations<kG>(a.x + static_cast<int64_t>(r0) * k, r1 - r0, k, xq + r0 * XqStride(k),
                              xs + r0 * (k / kG));
    }
    __syncthreads();
  }
  float acc[2][4];  // per part (gate / up; one for down): rows g, g, g+8, g+8 (every column the same row of x)
  __shared__ float partial[2][kWarps][4][32];
  for (int ti = 0; ti < my_tiles; ++ti) {
#pragma unroll
    for (int h = 0; h < 2; ++h) acc[h][0] = acc[h][1] = acc[h][2] = acc[h][3] = 0.0f;
    for (int mi = 0; mi < per_tile; ++mi) {
      const int it = ti * per_tile + mi, b = it % kStages;
      issue(it + kStages - 1, (it + kStages - 1) % kStages);
      CpAsyncWait<kStages - 1>();
      __syncwarp();
      const Item m = item(it);
      const int xr = kDown ? m.slot : m.slot / top_k;  // the activation row
      const float factor = kDown ? SlotFactor<kShared>(a, sh, m.slot) : 1.0f;
      const uint8_t* rows16 = stage + b * 16 * kW * 16 + StagedChunkOffset<T>(m.c);
      const int k0 = m.c * kChunk;
      float* ac = acc[kDown ? 0 : m.part];
      if constexpr (IsIntType<T>()) {
        const float2* xr_s = xs + xr * (k / kG) + k0 / kG;
        ChunkProductInt1<T>(rows16, reinterpret_cast<float*>(table), xq + xr * XqStride(k) + k0, xr_s, factor, lane,
                            ac);
      } else {
        ChunkProductF8<false>(rows16, a.x + static_cast<int64_t>(xr) * k + k0, factor, lane, ac);
      }
      __syncwarp();
    }
    // Sums over the warps in a fixed order; column 0 of C (lanes with t = 0) holds each row's result.
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int q = 0; q < 4; ++q) partial[h][warp][q][lane] = acc[h][q];
    __syncthreads();
    if (threadIdx.x < 16) {
      const int r = threadIdx.x, ln = (r & 7) * 4, q = r >= 8 ? 2 : 0;
      const int tile = t0 + ti, row = (tile % row_tiles) * 16 + r;
      float sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < kWarps; ++i) sum[h] += partial[h][i][q][ln];
      if (row < rows) {
        const int owner = tile / row_tiles;  // the token (down) or the slot (gate / up)
        const float v = kDown ? sum[0] : Silu(sum[0]) * sum[1];
        a.out[static_cast<int64_t>(owner) * rows + row] = __float2bfloat16_rn(v);
      }
    }
    __syncthreads();
  }
}

template <int T>
size_t MoeMmaSmem(int64_t x_rows, int64_t k) {
  return qmma::StageBytes<T>() + (qmma::IsIntType<T>() ? qmma::ActBytes<T>(x_rows, k) : 0);
}

template <int T, bool kDown, bool kShared>
void LaunchMoeMma(cudaStream_t s, const MoeMmaArgs& a, const MoeMmaShared& sh, int64_t tiles, int64_t x_rows,
                  int64_t k) {
  const size_t smem = MoeMmaSmem<T>(x_rows, k);
  const auto kernel = MoeMmaKernel<T, kDown, kShared>;
  LaunchDependent(kernel, PersistentBlocks(kernel, 32 * qmma::kWarps, smem, tiles), 32 * qmma::kWarps, smem, s, a, sh);
  INFX_CUDA_CHECK_LAUNCH();
}

// Whether the tensor-core kernels take these experts (shapes, alignment, shared memory); top_k: the
// experts per token (with a shared expert, one more than the routed ones).
template <int T>
bool MoeMmaFits(int64_t n, int32_t top_k, const ExpertTable& ex, size_t max_smem_optin) {
  using namespace qmma;  // NOLINT
  const auto fits = [&](int64_t k, int64_t x_rows, size_t smem) {
    return k % kChunk == 0 && (k / kChunk * ChunkBytes<T>()) % 16 == 0 && smem + 2 * kStaticSmem <= max_smem_optin &&
           x_rows * k < (int64_t{1} << 30);
  };
  return n >= 1 && n <= kQuantGemvMaxTokens && ex.aligned16 != 0 &&
         fits(ex.hidden, n, MoeMmaSmem<T>(n, ex.hidden)) && fits(ex.inter, n * top_k, MoeMmaSmem<T>(n * top_k, ex.inter));
}

// Both kernels: act (bf16 [n * S, inter]) = silu(gate x) * (up x), then out = sum_j w_j down act; with
// shared_logit, S = top_k + 1 and the shared expert (table entry n_experts) is every token's last slot.
template <int T>
void LaunchMoeMmaPair(cudaStream_t s, const void* x, const float* weights, const int32_t* ids, const float* shared_logit,
                      int64_t n, int32_t top_k, const ExpertTable& ex, bf16* act, void* out) {
  const int32_t nn = static_cast<int32_t>(n), slots = top_k + (shared_logit != nullptr ? 1 : 0);
  const MoeMmaArgs up{static_cast<const bf16*>(x), weights, ids, nn, top_k, ex, act};
  const MoeMmaArgs down{act, weights, ids, nn, top_k, ex, static_cast<bf16*>(out)};
  const MoeMmaShared sh{shared_logit, slots};
  const int64_t up_tiles = n * slots * ((ex.inter + 15) / 16), down_tiles = n * ((ex.hidden + 15) / 16);
  if (shared_logit != nullptr) {
    LaunchMoeMma<T, false, true>(s, up, sh, up_tiles, n, ex.hidden);
    LaunchMoeMma<T, true, true>(s, down, sh, down_tiles, n * slots, ex.inter);
  } else {
    LaunchMoeMma<T, false, false>(s, up, sh, up_tiles, n, ex.hidden);
    LaunchMoeMma<T, true, false>(s, down, sh, down_tiles, n * slots, ex.inter);
  }
}

}  // namespace

void ConfigureQuantMoeMma(size_t max_smem_optin) {
  const int limit = static_cast<int>(max_smem_optin - 2 * qmma::kStaticSmem);
  auto configure = [&](auto tc) {
    constexpr int T = decltype(tc)::value;
    for (auto kernel : {MoeMmaKernel<T, false, false>, MoeMmaKernel<T, true, false>, MoeMmaKernel<T, false, true>,
                        MoeMmaKernel<T, true, true>})
      INFX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
  };
  for (int type : kQuantTypes) ByQuantType(type, configure);
}

bool QuantMoeMmaFits(int64_t n, int32_t top_k, const ExpertTable& ex, size_t max_smem_optin) {
  bool fits = false;
  if (!QuantTypeSupported(ex.dtype)) return false;
  ByQuantType(ex.dtype, [&](auto tc) { fits = MoeMmaFits<decltype(tc)::value>(n, top_k, ex, max_smem_optin); });
  return fits;
}

bool QuantMoeSharedFits(int64_t n, int32_t top_k, const ExpertTable& ex, size_t max_smem_optin) {
  return ex.shared != 0 && QuantMoeMmaFits(n, top_k + 1, ex, max_smem_optin);  // the shared expert: one more slot
}

void LaunchQuantMoeExperts(cudaStream_t s, const void* x, const float* weights, const int32_t* ids,
                           const float* shared_logit, int64_t n, int32_t top_k, ExpertTable ex, float* act, void* out,
                           size_t max_smem_optin) {
  if (n == 0) return;
  INFX_CHECK(shared_logit == nullptr || QuantMoeSharedFits(n, top_k, ex, max_smem_optin));
  ByQuantType(ex.dtype, [&](auto tc) {
    constexpr int T = decltype(tc)::value;
    if (shared_logit != nullptr || MoeMmaFits<T>(n, top_k, ex, max_smem_optin)) {
      LaunchMoeMmaPair<T>(s, x, weights, ids, shared_logit, n, top_k, ex, reinterpret_cast<bf16*>(act), out);
    } else {
      Run<T>(s, x, weights, ids, n, top_k, ex, act, out);
    }
  });
}

}  // namespace infernix::cuda
