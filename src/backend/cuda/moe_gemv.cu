// The experts of a MoE layer at decode with bf16 or FP8 weights (kernels.h, LaunchMoeGemv): the routed
// experts and, folded in beside them, the shared expert, as weight-streaming products on tensor cores in
// the manner of the decode GEMV (gemv.cu): a block owns 16 weight rows, its 8 warps split k, and every
// thread loads a piece of rows g and g + 8 per step straight into k-permuted mma.sync fragments, so each
// selected expert's weights are read once at memory bandwidth. A bf16 step is 32 values of k, 8 per
// thread: 16 bytes of a row. An FP8 step (f8_e4m3_b128 in the device layout, f8_layout.h: a row's codes,
// then its block scales) is 64 values, 16 per thread: 16 bytes of E4M3 codes per row (one load when the
// rows are 16-byte aligned, else two of 8), converted exactly to bf16, and the scale of the block the
// step lies in, which multiplies the step's products per row.
//
// Slots: token t owns slots t * S + j. j < top_k is its j-th routed expert (ids, weights); with a shared
// expert, j = top_k is that one (table entry n_experts, weight sigmoid(shared_logit[t])); S = top_k (+ 1).
//  - MoeGemvUpKernel: work items (16 rows, group of 8 tokens) of the shared expert (its rows read once per
//    group, the tokens as the mma's columns; first loads before the wait), then (16 rows of inter, routed
//    slot): the gate tile, then the up tile of the same rows; act[slot, rows] = w_slot * silu(gate . x) *
//    (up . x), in bf16 (the routing weight is folded in here, so the down pass is a plain sum).
//  - MoeGemvDownKernel: a block per (16 output rows, token): out[t, rows] = the sum over t's S slots of
//    down_e[rows] . act[slot], one product over k = S * inter (a token's act rows are contiguous) whose
//    weight rows change expert every inter values; 16 partial sums (step s into sum s % 16), added in a
//    fixed order, whatever the batch (16 warps for 1-2 tokens, 8 of two sums each from 3). Its blocks that
//    start once the up kernel has published the routing (LaunchMoeGemv's sync) issue their first weight
//    loads before they wait for the up kernel's act.
//    The residual add after the layer (and the norm of the sum that follows it) can be its epilogue, as
//    for the decode GEMV (gemv_epilogue.cuh, GemvResidual): each (16 rows, token) block adds its rows to
//    the residual and leaves their sum of squares; the last block to finish normalises the rows.
#include "backend/cuda/f8_step.cuh"
#include "backend/cuda/gemv_epilogue.cuh"

namespace infernix::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kUnroll = 8;  // bf16 steps of weight loads in flight per thread (8 values of two rows each)
// FP8 steps hold 16 values of two rows (8 registers, and 2 of their scales) and 16 of x (8): 4 of them in
// flight cover a warp's share of a 2048-value row in one round.
constexpr int kUnrollF8 = 4;
// The down kernel sums a token's steps in 16 partial sums (step s into sum s % 16, each in step order,
// the 16 then added in a fixed order) at every batch size, so that a token's result does not depend on the
// batch. For 1-2 tokens it has a block per SM at most (hidden / 16 tiles per token) and runs 16 warps, one
// per partial sum, with as many loads in flight as 128 registers allow: bf16 11 steps (Qwen3-Next's 176 steps
// of a token's down rows, 10 + 1 slots of 512, in one round), FP8 6 (its 88, and Qwen3-30B-A3B's 96: 8 slots
// of 768, in one round). From 3 tokens it runs 8 warps that hold two of the sums each (steps w + 16 i and
// w + 8 + 16 i), with the up kernel's loads in flight.
constexpr int kDownSums = 16;
constexpr int kDownUnrollFew = 11;
constexpr int kDownUnrollFewF8 = 6;

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
  int32_t* sync;  // or nullptr: [0] the pairs' sequence number, [1] the last one to have seen its routing
};

// The routing weight of slot j of token t.
__device__ __forceinline__ float SlotWeight(const MoeGemvArgs& a, int t, int j) {
  return j < a.top_k ? a.weights[t * a.top_k + j] : SigmoidF(a.shared_logit[t]);
}

// One step of a thread's weight loads and its share of the product. Bf16Step: 32 values of k (8 per thread
// of a quad): 16 bytes of rows g and g + 8 and 8 values of x, two m16n8k16 products. F8Step (f8_step.cuh):
// 64 values (16 per thread) of FP8 codes and their block scales, four m16n8k16 products.
struct Bf16Step {
  using X = uint4;
  uint4 a, b;
  static __device__ __forceinline__ void Mma(float* acc, const Bf16Step& w, const X& x) {
    MmaBf16(acc, w.a.x, w.b.x, w.a.y, w.b.y, x.x, x.y);
    MmaBf16(acc, w.a.z, w.b.z, w.a.w, w.b.w, x.z, x.w);
  }
};
// acc (C fragment of one m16n8k16 tile) += rows [g, g + 8] of a 16-row weight tile . x over `steps` steps:
// load_step(s, &step) loads what a thread takes of the weights at step s (t picks its piece of the quad's),
// load_x(s) the matching values of x; use_x: whether this thread's column has a token (else x is zero);
// after_first_loads() runs once the first round of weight loads is out, before x is read (the shared
// expert's blocks wait for the kernel before there: its weights are known without the routing).
// Shaped like gemv.cu's loop (each group's weight loads issued before the loop or at the top of the next
// round, conditional loads instead of branches), which keeps all kU steps' loads in flight: a loop that
// loads and multiplies in one round compiles to loads interleaved with the products (40 registers instead
// of 102 in a test kernel), which then wait for each other.
// kW warps share the steps (warp w takes w, w + kW, ...); kAcc partial sums per thread: the u-th step of a
// round goes into acc[u % kAcc] (kU a multiple of kAcc), so that acc[a] of warp w sums the steps that warp
// w + kW a of a kernel with kW kAcc warps and one sum each would (the same products in the same order).
template <int kU, int kW, int kAcc, typename Step, typename LoadStep, typename LoadX, typename AfterFirstLoads>
__device__ __forceinline__ void TileProduct(int steps, int warp, bool use_x, LoadStep load_step, LoadX load_x,
                                            AfterFirstLoads after_first_loads, float (*acc)[4]) {
  static_assert(kU % kAcc == 0, "a round's steps must cycle through the partial sums");
  Step w[kU];
  auto load_weights = [&](int s0) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int s = s0 + u * kW;
      if (s < steps) {
        load_step(s, &w[u]);
      } else {
        w[u] = Step{};
      }
    }
  };
  load_weights(warp);
  after_first_loads();
  for (int s0 = warp; s0 < steps; s0 += kW * kU) {
    if (s0 != warp) load_weights(s0);
    typename Step::X xr[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int s = s0 + u * kW;
      xr[u] = use_x && s < steps ? load_x(s) : typename Step::X{};
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) Step::Mma(acc[u % kAcc], w[u], xr[u]);
  }
}

// The block's partial C fragments summed in a fixed order: warp w's acc[a] is partial sum w + kW a of
// kSums; threads q * 32 + ln (q < 4) get row (ln >> 2) + (q >= 2 ? 8 : 0), column 2 (ln & 3) + (q & 1) of the
// tile. Ends with the block synchronised (partial is reused).
template <int kW, int kSums>
__device__ __forceinline__ float ReduceTile(const float (*acc)[4], float (*partial)[4][32], int warp, int lane) {
#pragma unroll
  for (int a = 0; a < kSums / kW; ++a) {
#pragma unroll
    for (int q = 0; q < 4; ++q) partial[warp + kW * a][q][lane] = acc[a][q];
  }
  __syncthreads();
  float sum = 0.0f;
  if (threadIdx.x < 128) {
    const int q = threadIdx.x >> 5, ln = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < kSums; ++i) sum += partial[i][q][ln];
  }
  __syncthreads();
  return sum;
}

// The bytes of a weight row of k values (bf16 or f8_e4m3_b128), and the values of a step.
template <int W>
__device__ __forceinline__ int64_t RowBytes(int k) {
  return W == kBF16 ? int64_t{2} * k : int64_t{132} * (k / 128);
}
template <int W>
constexpr int kStepValues = W == kBF16 ? 32 : 64;
// acc += the tile's rows rg, rh . x over `steps` steps: row_of(s, &rg, &rh) gives the rows' bases for step
// s and returns the step within them; x's values of step s are at x + kStepValues s; row_k: the values of
// a weight row (FP8: where its scales start); kVec: FP8's load width (16 or 8 bytes).
template <int W, int kU, int kW, int kAcc, int kVec, typename RowOf, typename AfterFirstLoads>
__device__ __forceinline__ void RowsProduct(int steps, int warp, int t, bool use_x, const bf16* x, int row_k,
                                            RowOf row_of, AfterFirstLoads after_first_loads, float (*acc)[4]) {
  if constexpr (W == kBF16) {
    TileProduct<kU, kW, kAcc, Bf16Step>(
        steps, warp, use_x,
        [&](int s, Bf16Step* w) {
          const uint8_t *rg, *rh;
          const int ls = row_of(s, &rg, &rh);
          w->a = __ldcs(reinterpret_cast<const uint4*>(rg) + ls * 4 + t);
          w->b = __ldcs(reinterpret_cast<const uint4*>(rh) + ls * 4 + t);
        },
        [&](int s) { return __ldg(reinterpret_cast<const uint4*>(x) + s * 4 + t); }, after_first_loads, acc);
  } else {
    TileProduct<kU, kW, kAcc, F8Step>(
        steps, warp, use_x,
        [&](int s, F8Step* w) {
          const uint8_t *rg, *rh;
          const int ls = row_of(s, &rg, &rh);
          LoadF8<kVec>(rg, ls, t, row_k, &w->a, &w->sa);
          LoadF8<kVec>(rh, ls, t, row_k, &w->b, &w->sb);
        },
        [&](int s) { return LoadF8StepX(x, s, t); },
        after_first_loads, acc);
  }
}

// Held to 2 blocks per SM (128 registers).
template <int W, int kU, int kVec>
__global__ void __launch_bounds__(32 * kWarps, 2) MoeGemvUpKernel(MoeGemvArgs a) {
  __shared__ float partial[kWarps][4][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int hidden = static_cast<int>(a.ex.hidden), inter = static_cast<int>(a.ex.inter);
  const int row_tiles = (inter + 15) / 16;
  const int n_routed = a.n * a.top_k;
  const int item = static_cast<int>(blockIdx.x);
  // This item's slot j, its tokens [tok0, tok0 + n_tok) and rows. The shared expert's items come first:
  // their weights are known before the routing, so their first loads go out before the wait. The routed
  // slots vary fastest, so that tokens that chose the same expert read its rows at about the same time
  // (from L2 the second time).
  const int groups = (a.n + kMoeGemvTokenGroup - 1) / kMoeGemvTokenGroup;
  const int shared_items = a.slots > a.top_k ? groups * row_tiles : 0;
  // The first routed item publishes the routing to the down kernel (kernels.h, LaunchMoeGemv's sync): it
  // numbers this pair before this kernel lets the down kernel start, and stores the number in sync[1] once
  // it has seen the routing.
  const bool publisher = a.sync != nullptr && item == shared_items && threadIdx.x == 0;
  int32_t pair = 0;
  if (publisher) {  // the number wraps after 2^32 pairs (a day or so of decoding): only equality matters
    pair = static_cast<int32_t>(static_cast<uint32_t>(atomicAdd(a.sync, 1)) + 1u);
    __threadfence();
  }
  AllowDependentLaunch();
  const bool shared = item < shared_items;
  int tok0, n_tok, j, local;
  if (!shared) {
    const int routed = (item - shared_items) % n_routed;  // t * top_k + j
    tok0 = routed / a.top_k;
    j = routed % a.top_k;
    n_tok = 1;
    local = (item - shared_items) / n_routed;
  } else {  // the shared expert: (16 rows, group of up to 8 tokens), the groups varying fastest
    tok0 = (item % groups) * kMoeGemvTokenGroup;
    n_tok = min(kMoeGemvTokenGroup, a.n - tok0);
    j = a.top_k;
    local = item / groups;
  }
  const int row0 = local * 16;
  const int64_t row_bytes = RowBytes<W>(hidden);
  const int64_t og = min(row0 + g, inter - 1) * row_bytes, oh = min(row0 + g + 8, inter - 1) * row_bytes;
  const bool has_x = g < n_tok;
  const bf16* xt = a.x + static_cast<int64_t>(tok0 + (has_x ? g : 0)) * hidden;
  // ids and weights come from the routing kernel, x from before it: routed items wait here, the shared
  // expert's once its first loads are out.
  if (!shared) WaitForPrevious();
  const int e = shared ? a.ex.n_experts : a.ids[tok0 * a.top_k + j];
  if (publisher) StoreRelease(a.sync + 1, pair);  // the routing is in memory: the down kernel may read it
  const int steps = hidden / kStepValues<W>;
  float gate = 0.0f;
  for (int half = 0; half < 2; ++half) {
    const uint8_t* w = static_cast<const uint8_t*>((half == 0 ? a.ex.gate : a.ex.up)[e]);
    float acc[1][4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
    RowsProduct<W, kU, kWarps, 1, kVec>(
        steps, warp, t, has_x, xt, hidden,
        [&](int s, const uint8_t** rg, const uint8_t** rh) {
          *rg = w + og;
          *rh = w + oh;
          return s;
        },
        [&] {
          if (shared && half == 0) WaitForPrevious();
        },
        acc);
    const float sum = ReduceTile<kWarps, kWarps>(acc, partial, warp, lane);
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

// kW warps (16 or 8), each holding kDownSums / kW of the partial sums.
template <int W, int kU, int kW, int kVec>
__global__ void __launch_bounds__(32 * kW) MoeGemvDownKernel(MoeGemvArgs a) {
  constexpr int kMaxSlots = kMoeGemvMaxSlots, kAcc = kDownSums / kW;
  __shared__ float partial[kDownSums][4][32];
  __shared__ const uint8_t* seg_w[kMaxSlots];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int hidden = static_cast<int>(a.ex.hidden), inter = static_cast<int>(a.ex.inter);
  // Tokens vary fastest: the same rows of an expert two tokens chose (the shared one: all) come from L2.
  const int token = static_cast<int>(blockIdx.x) % a.n, row0 = (static_cast<int>(blockIdx.x) / a.n) * 16;
  const int64_t row_bytes = RowBytes<W>(inter);
  const int64_t og = min(row0 + g, hidden - 1) * row_bytes, oh = min(row0 + g + 8, hidden - 1) * row_bytes;
  // act comes from the up kernel, ids from the routing before it. Once the up kernel has published that it
  // saw the routing (sync[1] holds this pair's number, sync[0]), the block reads ids and issues its first
  // weight loads before it waits for the up kernel; else it waits first. Both are read before this block
  // lets the next kernel start, so no later pair can have numbered itself yet.
  __shared__ int early;
  if (threadIdx.x == 0) early = a.sync != nullptr && LoadAcquire(a.sync + 1) == LoadAcquire(a.sync);
  __syncthreads();
  AllowDependentLaunch();
  const bool loads_first = early != 0;
  if (!loads_first) WaitForPrevious();
  if (threadIdx.x < a.slots) {
    const int j = static_cast<int>(threadIdx.x);
    seg_w[j] = static_cast<const uint8_t*>(a.ex.down[j < a.top_k ? a.ids[token * a.top_k + j] : a.ex.n_experts]);
  }
  __syncthreads();
  const int seg_steps = inter / kStepValues<W>, steps = a.slots * seg_steps;
  const float inv_seg_steps = 1.0f / static_cast<float>(seg_steps);
  float acc[kAcc][4] = {};
  RowsProduct<W, kU, kW, kAcc, kVec>(
      steps, warp, t, g == 0,                                 // column 0 is the token
      a.act + static_cast<int64_t>(token) * a.slots * inter,  // its S act rows, contiguous
      inter,
      [&](int s, const uint8_t** rg, const uint8_t** rh) {
        // Step s is in the slot seg: s / seg_steps, exact in f32 for these small integers.
        const int seg = static_cast<int>((static_cast<float>(s) + 0.5f) * inv_seg_steps);
        *rg = seg_w[seg] + og;
        *rh = seg_w[seg] + oh;
        return s - seg * seg_steps;
      },
      [&] {
        if (loads_first) WaitForPrevious();
      },
      acc);
  const float sum = ReduceTile<kW, kDownSums>(acc, partial, warp, lane);
  __shared__ float tile_ss[4][4];  // res.norm_out: TileSquares (only column 0, the token, is non-zero)
  if (threadIdx.x < 128) {
    const int q = threadIdx.x >> 5, ln = threadIdx.x & 31;
    const int row = row0 + (ln >> 2) + (q >= 2 ? 8 : 0);
    float h = 0.0f;
    if (row < hidden && (q & 1) == 0 && (ln & 3) == 0) {  // column 0: the token
      const GemvSegment sg{nullptr, a.out, hidden, kBF16, 0};
      h = StoreGemvSum(a.res, sg, static_cast<int64_t>(token) * hidden + row, sum);
    }
    if (a.res.norm_out != nullptr) TileSquares(h, q, ln, tile_ss);
  }
  if (a.res.norm_out == nullptr) return;
  __syncthreads();
  if (threadIdx.x == 0)  // column 0's rows: squares[0][0] (rows 0-7) and squares[2][0] (rows 8-15)
    a.res.ss[static_cast<int64_t>(token) * ((hidden + 15) / 16) + row0 / 16] = tile_ss[0][0] + tile_ss[2][0];
  FinishResidualNorm(a.res, a.n, hidden);
}

// kVecUp / kVecDown: FP8's load width for the up and down rows (16 bytes when a row's bytes are a multiple
// of 16, k a multiple of 512; else 8). Unused for bf16.
template <int W, int kVecUp, int kVecDown>
void LaunchPair(cudaStream_t s, const MoeGemvArgs& a, int64_t n, unsigned up_items, dim3 down_grid) {
  constexpr int kUp = W == kBF16 ? kUnroll : kUnrollF8;
  LaunchDependent(MoeGemvUpKernel<W, kUp, kVecUp>, dim3(up_items), dim3(32 * kWarps), 0, s, a);
  INFX_CUDA_CHECK_LAUNCH();
  if (n <= 2) {
    constexpr int kU = W == kBF16 ? kDownUnrollFew : kDownUnrollFewF8;
    LaunchDependent(MoeGemvDownKernel<W, kU, kDownSums, kVecDown>, down_grid, dim3(32 * kDownSums), 0, s, a);
  } else {
    LaunchDependent(MoeGemvDownKernel<W, kUp, kWarps, kVecDown>, down_grid, dim3(32 * kWarps), 0, s, a);
  }
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool MoeGemvFits(int64_t n, int32_t top_k, bool shared, const ExpertTable& ex) {
  // FP8: pairs of 128-value blocks in every row and segment, so that rows are 8-byte aligned for the loads of
  // codes (16-byte aligned when k is a multiple of 512) and a step's 64 values lie in one block.
  const int64_t step = ex.dtype == kBF16 ? 32 : 256;
  return (ex.dtype == kBF16 || ex.dtype == kF8E4M3B128) && ex.aligned16 != 0 && n >= 1 && n <= kMoeGemvMaxTokens &&
         top_k + (shared ? 1 : 0) <= kMoeGemvMaxSlots && (!shared || ex.shared != 0) && ex.hidden % step == 0 &&
         ex.inter % step == 0 && ex.hidden <= (int64_t{1} << 20) && ex.inter <= (int64_t{1} << 20) &&
         n * (top_k + 1) * ex.inter < (int64_t{1} << 30);
}

void LaunchMoeGemv(cudaStream_t s, const void* x, const float* weights, const int32_t* ids, const float* shared_logit,
                   int64_t n, int32_t top_k, ExpertTable ex, void* act, void* out, GemvResidual res, int32_t* sync) {
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
                res,
                sync};
  const int64_t up_tiles = (ex.inter + 15) / 16, down_tiles = (ex.hidden + 15) / 16;
  const int64_t shared_groups = shared_logit != nullptr ? (n + kMoeGemvTokenGroup - 1) / kMoeGemvTokenGroup : 0;
  const auto up_items = static_cast<unsigned>((n * top_k + shared_groups) * up_tiles);
  const dim3 down_grid(static_cast<unsigned>(n * down_tiles));
  if (ex.dtype == kBF16) {
    LaunchPair<kBF16, 16, 16>(s, a, n, up_items, down_grid);
  } else if (ex.hidden % 512 == 0 && ex.inter % 512 == 0) {
    LaunchPair<kF8E4M3B128, 16, 16>(s, a, n, up_items, down_grid);
  } else if (ex.hidden % 512 == 0) {
    LaunchPair<kF8E4M3B128, 16, 8>(s, a, n, up_items, down_grid);
  } else {
    LaunchPair<kF8E4M3B128, 8, 8>(s, a, n, up_items, down_grid);
  }
}

}  // namespace infernix::cuda
