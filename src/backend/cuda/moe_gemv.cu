// The experts of a MoE layer at decode with bf16 weights (kernels.h, LaunchMoeGemv): the routed experts
// and, folded in beside them, the shared expert, as weight-streaming products on tensor cores in the
// manner of the decode GEMV (gemv.cu): a block owns 16 weight rows, its 8 warps split k, and every thread
// loads 16 contiguous bytes of rows g and g + 8 per step into k-permuted mma.sync fragments, so each
// selected expert's weights are read once at memory bandwidth.
//
// Slots: token t owns slots t * S + j. j < top_k is its j-th routed expert (ids, weights); with a shared
// expert, j = top_k is that one (table entry n_experts, weight sigmoid(shared_logit[t])); S = top_k (+ 1).
//  - MoeGemvUpKernel: work items (16 rows of inter, routed slot), then (16 rows) of the shared expert for
//    all tokens at once (its rows read once, the tokens as the mma's columns): the gate tile, then the up
//    tile of the same rows; act[slot, rows] = w_slot * silu(gate . x) * (up . x), in bf16 (the routing
//    weight is folded in here, so the down pass is a plain sum).
//  - MoeGemvDownKernel: a block per (16 output rows, token): out[t, rows] = the sum over t's S slots of
//    down_e[rows] . act[slot], one product over k = S * inter (a token's act rows are contiguous) whose
//    weight rows change expert every inter values; the warps' partial sums are added in a fixed order.
//    The residual add after the layer (and the norm of the sum that follows it) can be its epilogue, as
//    for the decode GEMV (gemv_epilogue.cuh, GemvResidual): each (16 rows, token) block adds its rows to
//    the residual and leaves their sum of squares; the last block to finish normalises the rows.
#include "backend/cuda/gemv_epilogue.cuh"

namespace infernix::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kUnroll = 8;  // steps of weight loads in flight per thread (each 16 bytes of two rows)
// The down kernel for 1-2 tokens: a block per SM at most (hidden / 16 tiles per token), so it can hold
// twice the loads in flight, which halves the rounds of memory latency a block waits through.
constexpr int kDownUnrollFew = 16;
__device__ constexpr uint4 kZero16 = {0, 0, 0, 0};

struct MoeGemvArgs {
  const bf16* x;              // [n, hidden]
  const float* weights;       // [n, top_k]
  const int32_t* ids;         // [n, top_k]
  const float* shared_logit;  // [n], or nullptr: no shared expert
  int32_t n, top_k, slots;    // slots = S
  ExpertTable ex;
  bf16* act;  // [n * S, inter]
  bf16* out;  // [n, hidden]
  GemvResidual res;
};

// The routing weight of slot j of token t.
__device__ __forceinline__ float SlotWeight(const MoeGemvArgs& a, int t, int j) {
  return j < a.top_k ? a.weights[t * a.top_k + j] : SigmoidF(a.shared_logit[t]);
}

// acc (C fragment of one m16n8k16 tile) += rows [g, g + 8] of a 16-row weight tile . x over `steps` steps
// of 32 values: weight_chunk(s, &a, &b) loads the 16 bytes of rows g and g + 8 a thread takes at step s
// (t picks the chunk of four), x_chunk(s) the matching 16 bytes of x; use_x: whether this thread's column
// has a token (else x is zero). Shaped like gemv.cu's loop (each group's weight loads issued before the
// loop or at the top of the next round, conditional loads instead of branches), which keeps all kU
// steps' loads in flight: a loop that loads and multiplies in one round compiles to loads interleaved with
// the products (40 registers instead of 102 in a test kernel), which then wait for each other.
template <int kU, typename WeightChunk, typename XChunk>
__device__ __forceinline__ void TileProduct(int steps, int warp, bool use_x, WeightChunk weight_chunk,
                                            XChunk x_chunk, float* acc) {
  uint4 a[kU], b[kU];
  auto load_weights = [&](int s0) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int s = s0 + u * kWarps;
      if (s < steps) {
        weight_chunk(s, &a[u], &b[u]);
      } else {
        a[u] = b[u] = kZero16;
      }
    }
  };
  load_weights(warp);
  for (int s0 = warp; s0 < steps; s0 += kWarps * kU) {
    if (s0 != warp) load_weights(s0);
    uint4 xr[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int s = s0 + u * kWarps;
      xr[u] = use_x && s < steps ? x_chunk(s) : kZero16;
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      MmaBf16(acc, a[u].x, b[u].x, a[u].y, b[u].y, xr[u].x, xr[u].y);
      MmaBf16(acc, a[u].z, b[u].z, a[u].w, b[u].w, xr[u].z, xr[u].w);
    }
  }
}

// The 8 warps' C fragments summed in a fixed order; threads q * 32 + ln (q < 4) get row (ln >> 2) + (q >= 2 ?
// 8 : 0), column 2 (ln & 3) + (q & 1) of the tile. Ends with the block synchronised (partial is reused).
__device__ __forceinline__ float ReduceTile(const float* acc, float (*partial)[4][32], int warp, int lane) {
#pragma unroll
  for (int q = 0; q < 4; ++q) partial[warp][q][lane] = acc[q];
  __syncthreads();
  float sum = 0.0f;
  if (threadIdx.x < 128) {
    const int q = threadIdx.x >> 5, ln = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) sum += partial[i][q][ln];
  }
  __syncthreads();
  return sum;
}

__global__ void __launch_bounds__(32 * kWarps) MoeGemvUpKernel(MoeGemvArgs a) {
  AllowDependentLaunch();
  __shared__ float partial[kWarps][4][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int hidden = static_cast<int>(a.ex.hidden), inter = static_cast<int>(a.ex.inter);
  const int row_tiles = (inter + 15) / 16;
  const int n_routed = a.n * a.top_k, routed_items = n_routed * row_tiles;
  const int item = static_cast<int>(blockIdx.x);
  // This item's slot j, its tokens [tok0, tok0 + n_tok) and rows. The routed slots vary fastest, so that
  // tokens that chose the same expert read its rows at about the same time (from L2 the second time).
  int tok0 = 0, n_tok = a.n, j = a.top_k, local = item - routed_items;
  if (item < routed_items) {
    const int routed = item % n_routed;  // t * top_k + j
    tok0 = routed / a.top_k;
    j = routed % a.top_k;
    n_tok = 1;
    local = item / n_routed;
  }
  const int row0 = local * 16;
  const int rg = min(row0 + g, inter - 1), rh = min(row0 + g + 8, inter - 1);
  const bool has_x = g < n_tok;
  const bf16* xt = a.x + static_cast<int64_t>(tok0 + (has_x ? g : 0)) * hidden;
  WaitForPrevious();  // ids and weights come from the routing kernel, x from before it
  const int e = j < a.top_k ? a.ids[tok0 * a.top_k + j] : a.ex.n_experts;
  const int steps = hidden / 32;
  float gate = 0.0f;
  for (int half = 0; half < 2; ++half) {
    const bf16* w = static_cast<const bf16*>((half == 0 ? a.ex.gate : a.ex.up)[e]);
    const uint4* wg = reinterpret_cast<const uint4*>(w + static_cast<int64_t>(rg) * hidden);
    const uint4* wh = reinterpret_cast<const uint4*>(w + static_cast<int64_t>(rh) * hidden);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    TileProduct<kUnroll>(
        steps, warp, has_x,
        [&](int s, uint4* ra, uint4* rb) {
          *ra = __ldcs(wg + s * 4 + t);
          *rb = __ldcs(wh + s * 4 + t);
        },
        [&](int s) { return __ldg(reinterpret_cast<const uint4*>(xt) + s * 4 + t); }, acc);
    const float sum = ReduceTile(acc, partial, warp, lane);
    if (half == 0) {
      gate = sum;
    } else if (threadIdx.x < 128) {
      const int q = threadIdx.x >> 5, ln = threadIdx.x & 31;
      const int row = row0 + (ln >> 2) + (q >= 2 ? 8 : 0), col = 2 * (ln & 3) + (q & 1);
      if (row < inter && col < n_tok) {
        const int token = tok0 + col;
        const float v = SlotWeight(a, token, j) * SiluF(gate) * sum;
        a.act[static_cast<int64_t>(token * a.slots + j) * inter + row] = __float2bfloat16_rn(v);
      }
    }
  }
}

template <int kU>
__global__ void __launch_bounds__(32 * kWarps) MoeGemvDownKernel(MoeGemvArgs a) {
  AllowDependentLaunch();
  constexpr int kMaxSlots = kMoeGemvMaxSlots;
  __shared__ float partial[kWarps][4][32];
  __shared__ const bf16* seg_w[kMaxSlots];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int hidden = static_cast<int>(a.ex.hidden), inter = static_cast<int>(a.ex.inter);
  // Tokens vary fastest: the same rows of an expert two tokens chose (the shared one: all) come from L2.
  const int token = static_cast<int>(blockIdx.x) % a.n, row0 = (static_cast<int>(blockIdx.x) / a.n) * 16;
  const int rg = min(row0 + g, hidden - 1), rh = min(row0 + g + 8, hidden - 1);
  WaitForPrevious();  // act comes from the up kernel, ids from the routing before it
  if (threadIdx.x < a.slots) {
    const int j = static_cast<int>(threadIdx.x);
    seg_w[j] = static_cast<const bf16*>(a.ex.down[j < a.top_k ? a.ids[token * a.top_k + j] : a.ex.n_experts]);
  }
  __syncthreads();
  const int seg_steps = inter / 32, steps = a.slots * seg_steps;
  const float inv_seg_steps = 1.0f / static_cast<float>(seg_steps);
  const int64_t og = static_cast<int64_t>(rg) * inter, oh = static_cast<int64_t>(rh) * inter;
  const uint4* xt = reinterpret_cast<const uint4*>(a.act + static_cast<int64_t>(token) * a.slots * inter);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  TileProduct<kU>(
      steps, warp, g == 0,  // column 0 is the token
      [&](int s, uint4* ra, uint4* rb) {
        // Step s of the slot seg: s / seg_steps, exact in f32 for these small integers.
        const int seg = static_cast<int>((static_cast<float>(s) + 0.5f) * inv_seg_steps);
        const bf16* w = seg_w[seg] + ((s - seg * seg_steps) * 32 + t * 8);
        *ra = __ldcs(reinterpret_cast<const uint4*>(w + og));
        *rb = __ldcs(reinterpret_cast<const uint4*>(w + oh));
      },
      [&](int s) { return __ldg(xt + s * 4 + t); }, acc);
  const float sum = ReduceTile(acc, partial, warp, lane);
  __shared__ float tile_sq[4];  // res.norm_out: per reducing warp, its rows' squares of column 0
  if (threadIdx.x < 128) {
    const int q = threadIdx.x >> 5, ln = threadIdx.x & 31;
    const int row = row0 + (ln >> 2) + (q >= 2 ? 8 : 0);
    float h = 0.0f;
    if (row < hidden && (q & 1) == 0 && (ln & 3) == 0) {  // column 0: the token
      const GemvSegment sg{nullptr, a.out, hidden, kBF16, 0};
      h = StoreGemvSum(a.res, sg, static_cast<int64_t>(token) * hidden + row, sum);
    }
    if (a.res.norm_out != nullptr) {
      const float sq = WarpSum(h * h);
      if (ln == 0) tile_sq[q] = sq;
    }
  }
  if (a.res.norm_out == nullptr) return;
  __syncthreads();
  if (threadIdx.x == 0) a.res.ss[static_cast<int64_t>(token) * ((hidden + 15) / 16) + row0 / 16] = tile_sq[0] + tile_sq[2];
  FinishResidualNorm(a.res, a.n, hidden);
}

}  // namespace

bool MoeGemvFits(int64_t n, int32_t top_k, bool shared, const ExpertTable& ex) {
  return ex.dtype == kBF16 && ex.aligned16 != 0 && n >= 1 && n <= kMoeGemvMaxTokens &&
         top_k + (shared ? 1 : 0) <= kMoeGemvMaxSlots && (!shared || ex.shared != 0) && ex.hidden % 32 == 0 &&
         ex.inter % 32 == 0 && ex.hidden <= (int64_t{1} << 20) && ex.inter <= (int64_t{1} << 20) &&
         n * (top_k + 1) * ex.inter < (int64_t{1} << 30);
}

void LaunchMoeGemv(cudaStream_t s, const void* x, const float* weights, const int32_t* ids, const float* shared_logit,
                   int64_t n, int32_t top_k, ExpertTable ex, void* act, void* out, GemvResidual res) {
  if (n == 0) return;
  INFX_CHECK(MoeGemvFits(n, top_k, shared_logit != nullptr, ex));
  INFX_CHECK(res.out == nullptr || (n <= kGemvNormMaxTokens && res.in != nullptr &&
                                    (res.norm_out == nullptr || (res.ss != nullptr && res.counter != nullptr))));
  MoeGemvArgs a{static_cast<const bf16*>(x),
                weights,
                ids,
                shared_logit,
                static_cast<int32_t>(n),
                top_k,
                top_k + (shared_logit != nullptr ? 1 : 0),
                ex,
                static_cast<bf16*>(act),
                static_cast<bf16*>(out),
                res};
  const int64_t up_tiles = (ex.inter + 15) / 16, down_tiles = (ex.hidden + 15) / 16;
  const auto up_items = static_cast<unsigned>((n * top_k + (shared_logit != nullptr ? 1 : 0)) * up_tiles);
  LaunchDependent(MoeGemvUpKernel, dim3(up_items), dim3(32 * kWarps), 0, s, a);
  INFX_CUDA_CHECK_LAUNCH();
  const dim3 down_grid(static_cast<unsigned>(n * down_tiles));
  if (n <= 2) {
    LaunchDependent(MoeGemvDownKernel<kDownUnrollFew>, down_grid, dim3(32 * kWarps), 0, s, a);
  } else {
    LaunchDependent(MoeGemvDownKernel<kUnroll>, down_grid, dim3(32 * kWarps), 0, s, a);
  }
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
