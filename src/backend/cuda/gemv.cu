// The decode-path matrix product: out [n, rows] = x [n, k] @ w [rows, k]^T for n <= 16 tokens, bf16,
// streaming each weight once per call at memory bandwidth. Up to 4 products sharing x (q/k/v, gate/up)
// run as one launch.
//
// A block owns 16 weight rows (one m16n8k16 tensor-core tile); its 8 warps split k (4 where a launch's
// tiles would take just over one wave of 8-warp blocks: GemvFourWarps). Each thread loads
// 16 contiguous bytes (8 values) of row g and of row g + 8 per step, and the 16 bytes of x at the same
// k from token g; two mma.sync consume them. This works because a dot product does not care about the
// order of k: thread (g, t) feeds its 8 values into the fragment slots {2t, 2t+1, 2t+8, 2t+9} of two
// consecutive mmas, and x is loaded with the very same permutation, so A and B stay consistent.
// Partial sums of the warps are added in shared memory in a fixed order (deterministic).
//
// On sm_90 the kernel is launched as a programmatic dependent of the kernel before it: it issues its
// first weight loads (weights never change) before waiting for that kernel's results (x), so weight
// streaming overlaps the tail and launch of the previous kernel.
//
// Two ops of the decode step are fused in (kernels.h, GemvBatch): the RMSNorm (with the residual add)
// before q/k/v, gate/up and other products of a normalised input as a prologue, and the
// SiLU-and-multiply after gate/up as an epilogue. Each would otherwise be a kernel of its own between two GEMVs,
// costing a full drain and ramp of the GPU (a few microseconds) for a few kilobytes of work. With the norm, every block
// computes the normalised rows itself into shared memory (blocks then loop over tiles, so that this happens once per
// block, not per tile). With SiLU, a block computes a tile of gate and then the same rows of up, keeping gate's sums in
// registers, and writes SiLU(gate) * up.
//
// A residual add right after a GEMV (o_proj, down) becomes its epilogue, and when an RMSNorm of the sum
// follows, each tile also leaves the sums of squares of its 16 rows per token and the last block to
// finish normalises the sums (GemvResidual): a tail of one block on this kernel, which the next kernel's
// first weight loads overlap, instead of a pass over the input in every block of the next GEMV (or a
// kernel of its own). The next GEMV then reads x as it is.
#include "backend/cuda/f8_step.cuh"
#include "backend/cuda/gemv_epilogue.cuh"
#include "backend/cuda/moe_routing.cuh"

namespace infernix::cuda {
namespace {

constexpr int kWarps = 8;
// Padding of a staged x row, in bf16 values (64 bytes): the 8 rows that a warp's x loads touch at once
// fall in different banks.
constexpr int64_t kXPad = 32;

// kGemvXNorm: x = RmsNorm(a (+ b)) for the n rows into xs [n][k + kXPad] (every block), then the last
// block to get here writes a + b and x to global memory (kernels.h).
__device__ void StageNormedX(const GemvPrologue& pro, int n, int k, bf16* xs) {
  __shared__ float red[kWarps][kGemvNormMaxTokens];
  const int chunks = k / 8, ld = k + static_cast<int>(kXPad);
  const bf16* a = static_cast<const bf16*>(pro.a);
  const bf16* b = static_cast<const bf16*>(pro.b);
  float ss[kGemvNormMaxTokens];
#pragma unroll
  for (int j = 0; j < kGemvNormMaxTokens; ++j) {
    ss[j] = 0.0f;
    if (j < n) {
      for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
        float v[8];
        Load8(a + static_cast<int64_t>(j) * k + c * 8, v);
        if (b != nullptr) {
          float vb[8];
          Load8(b + static_cast<int64_t>(j) * k + c * 8, vb);
#pragma unroll
          for (int i = 0; i < 8; ++i) v[i] = AddBf16(v[i], vb[i]);
        }
#pragma unroll
        for (int i = 0; i < 8; ++i) ss[j] += v[i] * v[i];
        Store8(xs + j * ld + c * 8, v);
      }
    }
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int j = 0; j < kGemvNormMaxTokens; ++j) {
    const float sum = WarpSum(ss[j]);
    if (lane == 0) red[warp][j] = sum;
  }
  __syncthreads();
  for (int j = 0; j < n; ++j) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += red[w][j];
    const float inv = RmsInv(total, k, pro.eps);
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
      float v[8], wv[8];
      Load8(xs + j * ld + c * 8, v);
      Load8W(pro.w, pro.w_dtype, c * 8, wv);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = RmsScale(v[i], inv, wv[i], pro.w_offset);
      Store8(xs + j * ld + c * 8, v);
    }
  }
  // Every block has read a and b once it has counted itself in: the last one may overwrite them.
  if (!LastBlockToArrive(pro.counter, static_cast<int>(gridDim.x))) return;
  bf16* out = static_cast<bf16*>(pro.out);
  bf16* sum = static_cast<bf16*>(pro.sum);
  for (int j = 0; j < n; ++j) {
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
      const int64_t i = static_cast<int64_t>(j) * k + c * 8;
      if (b != nullptr) {
        float v[8], vb[8];
        Load8(a + i, v);
        Load8(b + i, vb);
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] += vb[e];
        Store8(sum + i, v);
      }
      *reinterpret_cast<uint4*>(out + i) = *reinterpret_cast<const uint4*>(xs + j * ld + c * 8);
    }
  }
}

// GemvRouting: called by every block once its tiles are done; the last block to get here routes the tokens.
__device__ void FinishRouting(const GemvBatch& p, const GemvRouting& r) {
  if (!LastBlockToArrive(r.counter, static_cast<int>(gridDim.x))) return;  // after this block's logits
  const int token = static_cast<int>(threadIdx.x >> 5), n_experts = static_cast<int>(p.seg[0].rows);
  if (token < p.n)
    RouteTokenUpTo512(static_cast<const float*>(p.seg[0].out) + static_cast<int64_t>(token) * n_experts, n_experts,
                      r.top_k, r.normalize, r.weights + token * r.top_k, r.ids + token * r.top_k,
                      static_cast<int>(threadIdx.x & 31));
}

// GemvConv: element (token, c) of the conv's input, x as stored (bf16), into the conv's output; the token's
// slot's window advances by one.
__device__ __forceinline__ void ConvStep(const GemvConv& cv, int64_t token, int64_t c, int64_t channels, float x) {
  const int slot = cv.layout.seq_info[cv.layout.token_seq[token] * 4];
  float* st = cv.state + slot * cv.slot_stride + c;  // [kernel - 1][channels]
  const int keep = cv.kernel - 1;
  float win[kGemvConvMaxKernel];
  float acc = 0.0f;
#pragma unroll
  for (int j = 0; j < kGemvConvMaxKernel - 1; ++j) {
    win[j] = j < keep ? st[j * channels] : 0.0f;
    if (j < keep) acc += LoadF(cv.w, cv.w_dtype, c * cv.kernel + j) * win[j];
  }
  acc += LoadF(cv.w, cv.w_dtype, c * cv.kernel + keep) * x;
  static_cast<bf16*>(cv.out)[token * channels + c] = __float2bfloat16_rn(SiluF(acc));
#pragma unroll
  for (int j = 0; j < kGemvConvMaxKernel - 1; ++j)
    if (j < keep) st[j * channels] = j + 1 < keep ? win[j + 1] : x;
}

// kGemvXScaled: threads of a block that write a chunk of the normalised rows (chunk c = thread * blocks +
// block, c < n * k / 8; GemvXScaledFits: at most one per thread).
__host__ __device__ inline int ScaledSliceThreads(int64_t n, int64_t k, int64_t blocks) {
  return static_cast<int>((n * (k / 8) + blocks - 1) / blocks);
}

// kGemvXScaled, by the 4 reducing warps (whole warps, q = warp): 1 / rms of the token whose sums lane ln
// stores (2 (ln & 3) + (q & 1)), from the sums of squares staged in ss [n][ss_tiles], added as
// NormalizeRows adds them (lane-strided, then across the warp), so the bits are the elected block's.
// Warps 0 and 1 also leave every token's factor in inv (for the slice of normalised rows).
__device__ __forceinline__ float ScaledInv(const GemvPrologue& pro, const float* ss, int n, int64_t k, int q, int ln,
                                           float* inv) {
  const int tiles = pro.ss_tiles;
  float mine = 0.0f;
#pragma unroll
  for (int tt = 0; tt < 4; ++tt) {
    const int token = 2 * tt + (q & 1);
    if (token < n) {  // the same for the whole warp
      float s = 0.0f;
      for (int i = ln; i < tiles; i += 32) s += ss[token * tiles + i];
      s = RmsInv(WarpSum(s), k, pro.eps);
      if ((ln & 3) == tt) mine = s;
      if (ln == 0 && q < 2) inv[token] = s;
    }
  }
  return mine;
}

// kTiles: tiles of 8 tokens (1: n <= 8, 2: n <= 16); kUnroll: steps of weight loads in flight per thread;
// kX: where x comes from (GemvXKind); kTail: what follows in the same launch (GemvTailKind; `tail` is
// unused without one); kW: the weights' type, bf16 (a step: 32 values, 16 bytes of two rows per thread) or
// f8_e4m3_b128 in the device layout (f8_step.cuh: 64 values, 16 bytes of codes of two rows per thread and
// their block scales; kTiles 1, k % 512 == 0); kBlockWarps: the warps that split k (8, or 4: GemvFourWarps). A block
// takes work items blockIdx.x, + gridDim.x, ...: a tile, or with the SiLU epilogue a pair of tiles (i: gate, i + items:
// up).
enum GemvTailKind : int { kTailNone = 0, kTailRoute = 1, kTailConv = 2 };
template <int kTiles, int kUnroll, int kX, int kTail, int kW = kBF16, int kBlockWarps = kWarps>
__global__ void __launch_bounds__(32 * kBlockWarps, kBlockWarps == 4                           ? 4
                                                    : kTail == kTailConv || kX == kGemvXScaled ? 2
                                                                                               : 0)
    GemvKernel(GemvBatch p, GemvTail tail) {
  static_assert(kBlockWarps == 8 || (kX != kGemvXNorm && kTiles == 1), "4 warps: no staged norm, one tile");
  constexpr int kSums = kWarps, kAccs = kSums / kBlockWarps;
  static_assert(kUnroll % kAccs == 0, "a round's steps must cycle through a warp's partial sums");
  static_assert(kW == kBF16 || (kW == kF8E4M3B128 && kTiles == 1), "FP8 weights: tokens of one tile");
  extern __shared__ __align__(16) uint8_t smem[];  // kGemvXNorm: the normalised rows; kGemvXScaled: the sums
  AllowDependentLaunch();                          // the next kernel may get ready; it waits for this one's results
  int64_t total_tiles = 0;
  bool w_after_wait = false;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (i < p.n_segments) {
      total_tiles += (p.seg[i].rows + 15) / 16;
      w_after_wait = w_after_wait || p.seg[i].w_after_wait != 0;
    }
  }
  if (w_after_wait) WaitForPrevious();  // a weight the kernel before makes (the wait for x is then a no-op)
  const int64_t k = p.k, n = p.n;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t chunks = k / 8;  // 16-byte chunks of a bf16 row
  // A warp step covers 4 chunks (32 values) of its 16 bf16 rows, or 64 values of FP8 rows.
  const int64_t steps = kW == kBF16 ? (chunks + 3) / 4 : k / 64;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  bf16* xs = reinterpret_cast<bf16*>(smem);
  const bf16* x = static_cast<const bf16*>(p.x);
  bool xv[kTiles];
  int64_t xo[kTiles];  // offset of token j * 8 + g's row in x (global) or xs (shared)
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    const int64_t token = j * 8 + g;
    xv[j] = token < n;
    xo[j] = (xv[j] ? token : 0) * (kX == kGemvXNorm ? k + kXPad : k);
  }
  auto load_x = [&](int j, int64_t c) -> uint4 {
    if constexpr (kX == kGemvXNorm) return *reinterpret_cast<const uint4*>(xs + xo[j] + c * 8);
    return __ldg(reinterpret_cast<const uint4*>(x + xo[j]) + c);
  };
  __shared__ float partial[kSums][kTiles * 4][32];
  __shared__ float tile_ss[4][4];  // res.norm_out: TileSquares
  // kGemvXScaled: the sums of squares of the GEMV before, then this block's slice of the normalised rows
  // to write (a 16-byte chunk for each of its first slice_threads threads: the residual sum's, then the
  // norm weight's), all copied into the dynamic shared memory right after the wait, while the first tile
  // streams; 1 / rms per token.
  float* scaled_ss = reinterpret_cast<float*>(smem);
  uint4* slice = reinterpret_cast<uint4*>(smem + (kX == kGemvXScaled ? n * p.pro.ss_tiles * 4 : 0));
  const int64_t slice_chunk = static_cast<int64_t>(threadIdx.x) * gridDim.x + blockIdx.x;
  const int slice_threads = kX == kGemvXScaled ? ScaledSliceThreads(n, k, gridDim.x) : 0;
  __shared__ float scaled_inv[kGemvNormMaxTokens];
  bool sliced = false;
  bool waited = false;
  const bool paired = p.silu_out != nullptr;
  const int64_t items = paired ? total_tiles / 2 : total_tiles;
  float gate = 0.0f;  // paired: this thread's sum of the gate tile, for the up tile's epilogue
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x)
    for (int half = 0; half < (paired ? 2 : 1); ++half) {
      const int64_t tile = item + half * items;
      // This tile's segment and first row.
      int64_t local = tile;
      GemvSegment sg = p.seg[0];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const GemvSegment cur = p.seg[i];
        const int64_t tiles = (cur.rows + 15) / 16;
        if (i < p.n_segments) {
          sg = cur;
          if (local < tiles) break;
          local -= tiles;
        }
      }
      const int64_t rows = sg.rows, row0 = local * 16;
      // Partial sums: kSums per tile whatever the warps (a warp holds kSums / kBlockWarps of them, step u of a
      // round going into acc[u % kAccs]), so that 4 warps add the same products in the same order as 8.
      float acc[kAccs][kTiles][4];
#pragma unroll
      for (int a = 0; a < kAccs; ++a)
#pragma unroll
        for (int j = 0; j < kTiles; ++j) acc[a][j][0] = acc[a][j][1] = acc[a][j][2] = acc[a][j][3] = 0.0f;
      auto wait_for_x = [&] {
        if (!waited) {  // x is ready (no-op without a programmatic launch)
          WaitForPrevious();
          if constexpr (kX == kGemvXNorm) StageNormedX(p.pro, static_cast<int>(n), static_cast<int>(k), xs);
          if constexpr (kX == kGemvXScaled) {
            for (int i = threadIdx.x; i < static_cast<int>(n) * p.pro.ss_tiles / 4; i += blockDim.x)
              CpAsync16(scaled_ss + 4 * i, p.pro.ss + 4 * i);
            if (slice_chunk < n * chunks) {
              CpAsync16(slice + threadIdx.x, static_cast<const bf16*>(p.pro.a) + slice_chunk * 8);
              CpAsync16(slice + slice_threads + threadIdx.x,
                        static_cast<const bf16*>(p.pro.w) + slice_chunk % chunks * 8);
            }
            CpAsyncCommit();
          }
          waited = true;
        }
      };
      if constexpr (kW == kBF16) {
        const bf16* w = static_cast<const bf16*>(sg.w);
        const uint4* wg = reinterpret_cast<const uint4*>(w + min(row0 + g, rows - 1) * k);
        const uint4* wh = reinterpret_cast<const uint4*>(w + min(row0 + g + 8, rows - 1) * k);
        uint4 a[kUnroll], b[kUnroll];
        // Step u of the round at s0 into slot u: a round's slots are refilled one by one, each as soon as its
        // product is taken, so that a warp keeps its loads in flight through the products.
        auto load_step = [&](int64_t s0, int u) {
          int64_t c = (s0 + u * kBlockWarps) * 4 + t;
          bool ok = c < chunks;
          a[u] = ok ? __ldcs(wg + c) : zero;
          b[u] = ok ? __ldcs(wh + c) : zero;
        };
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) load_step(warp, u);
        wait_for_x();
        for (int64_t s0 = warp; s0 < steps; s0 += kBlockWarps * kUnroll) {
          const int64_t next = s0 + kBlockWarps * kUnroll;
          uint4 xr[kUnroll][kTiles];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            int64_t c = (s0 + u * kBlockWarps) * 4 + t;
            bool ok = c < chunks;
#pragma unroll
            for (int j = 0; j < kTiles; ++j) xr[u][j] = ok && xv[j] ? load_x(j, c) : zero;
          }
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
            for (int j = 0; j < kTiles; ++j) {
              float* c = acc[u % kAccs][j];
              MmaBf16(c, a[u].x, b[u].x, a[u].y, b[u].y, xr[u][j].x, xr[u][j].y);
              MmaBf16(c, a[u].z, b[u].z, a[u].w, b[u].w, xr[u][j].z, xr[u][j].w);
            }
            if (next < steps) load_step(next, u);
          }
        }
      } else {  // FP8: rows of k codes and k / 128 scales, 16-byte aligned
        const int64_t row_bytes = k + k / 32;
        const uint8_t* w = static_cast<const uint8_t*>(sg.w);
        const uint8_t* rg = w + min(row0 + g, rows - 1) * row_bytes;
        const uint8_t* rh = w + min(row0 + g + 8, rows - 1) * row_bytes;
        F8Step f[kUnroll];
        auto load_weights = [&](int64_t s0) {
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            const int64_t st = s0 + u * kBlockWarps;
            if (st < steps) {
              LoadF8<16>(rg, static_cast<int>(st), t, static_cast<int>(k), &f[u].a, &f[u].sa);
              LoadF8<16>(rh, static_cast<int>(st), t, static_cast<int>(k), &f[u].b, &f[u].sb);
            } else {
              f[u] = F8Step{};
            }
          }
        };
        load_weights(warp);
        wait_for_x();
        const bf16* xrow = kX == kGemvXNorm ? xs + xo[0] : x + xo[0];
        for (int64_t s0 = warp; s0 < steps; s0 += kBlockWarps * kUnroll) {
          if (s0 != warp) load_weights(s0);
          F8Step::X xr[kUnroll];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            const int64_t st = s0 + u * kBlockWarps;
            if (st < steps && xv[0]) {
              if constexpr (kX == kGemvXNorm) {
                const uint4* px = reinterpret_cast<const uint4*>(xrow) + st * 8 + 2 * t;
                xr[u] = F8Step::X{px[0], px[1]};
              } else {
                xr[u] = LoadF8StepX(xrow, st, t);
              }
            } else {
              xr[u] = F8Step::X{zero, zero};
            }
          }
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) F8Step::Mma(acc[u % kAccs][0], f[u], xr[u]);
        }
      }

      if constexpr (kX == kGemvXScaled) CpAsyncWait<0>();  // visible to all after the __syncthreads below
#pragma unroll
      for (int j = 0; j < kTiles; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q)
#pragma unroll
          for (int a = 0; a < kAccs; ++a) partial[warp + kBlockWarps * a][j * 4 + q][lane] = acc[a][j][q];
      __syncthreads();
      if (threadIdx.x < kTiles * 4 * 32) {
        int q = threadIdx.x >> 5, ln = threadIdx.x & 31;
        float sum = 0;
#pragma unroll
        for (int i = 0; i < kSums; ++i) sum += partial[i][q][ln];
        int j = q >> 2, e = q & 3;
        int64_t row = row0 + (ln >> 2) + (e >= 2 ? 8 : 0);
        int64_t token = j * 8 + 2 * (ln & 3) + (e & 1);
        float h = 0.0f;  // res: this row of token's residual sum
        float scale = 1.0f;  // kGemvXScaled: 1 / rms of the token (kTiles == 1)
        if constexpr (kX == kGemvXScaled)
          scale = ScaledInv(p.pro, scaled_ss, static_cast<int>(n), k, q, ln, scaled_inv);
        if (row < rows && token < n) {
          const int64_t i = token * rows + row;
          if constexpr (kX == kGemvXScaled) sum *= scale;
          if (!paired) {
            h = StoreGemvSum(p.res, sg, i, sum);
            if (p.res.deferred != nullptr)  // x times the norm's weight, for the next GEMV (kGemvXScaled)
              StoreF(p.res.deferred, kBF16, i, h * (LoadF(p.res.w, p.res.w_dtype, row) + p.res.w_offset));
            if constexpr (kTail == kTailConv) {
              if (tile < (p.seg[0].rows + 15) / 16) ConvStep(tail.conv, token, row, rows, RoundBf16(sum));
            }
          } else {  // gate, then up
            StoreGateUpPair(half != 0, sg.out, p.silu_out, i, sum, gate);
          }
        }
        if (p.res.norm_out != nullptr) TileSquares(h, q, ln, tile_ss);  // kTiles == 1
      }
      __syncthreads();  // partial is reused by the next tile
      if (p.res.norm_out != nullptr) WriteTileSquares(p.res, static_cast<int>(n), rows, local, tile_ss);
      if constexpr (kX == kGemvXScaled) {
        if (!sliced && slice_chunk < n * chunks) {  // the normalised rows for later readers, a slice per block
          const uint4 raw = slice[threadIdx.x], wraw = slice[slice_threads + threadIdx.x];
          const bf16* e = reinterpret_cast<const bf16*>(&raw);
          const bf16* we = reinterpret_cast<const bf16*>(&wraw);
          const float inv = scaled_inv[slice_chunk / chunks];
          float v[8];
#pragma unroll
          for (int q = 0; q < 8; ++q)
            v[q] = RmsScale(__bfloat162float(e[q]), inv, __bfloat162float(we[q]), p.pro.w_offset);
          Store8(static_cast<bf16*>(p.pro.out) + slice_chunk * 8, v);
        }
        sliced = true;
      }
    }
  if (p.res.norm_out != nullptr && p.res.deferred == nullptr)
    FinishResidualNorm(p.res, static_cast<int>(n), static_cast<int>(p.seg[0].rows));
  if constexpr (kTail == kTailRoute) FinishRouting(p, tail.route);
}

template <int kTiles, int kUnroll, int kX, int kTail = kTailNone, int kW = kBF16, int kBlockWarps = kWarps>
void Launch(cudaStream_t s, const GemvBatch& batch, int64_t tiles, const GemvTail& tail = {}) {
  // With the norm, as many blocks as fit (each computes the normalised rows once); else a block per tile.
  const int64_t items = batch.silu_out != nullptr ? tiles / 2 : tiles;
  const size_t smem = kX == kGemvXNorm     ? GemvNormSmemBytes(batch.n, batch.k)
                      : kX == kGemvXScaled ? static_cast<size_t>(batch.n * batch.pro.ss_tiles) * sizeof(float) +
                                                 2 * ScaledSliceThreads(batch.n, batch.k, items) * sizeof(uint4)
                                           : 0;
  auto launch = [&](auto kernel) {
    const unsigned grid =
        kX == kGemvXNorm ? PersistentBlocks(kernel, 32 * kBlockWarps, smem, items) : static_cast<unsigned>(items);
    LaunchDependent(kernel, dim3(grid), dim3(32 * kBlockWarps), smem, s, batch, tail);
  };
  launch(GemvKernel<kTiles, kUnroll, kX, kTail, kW, kBlockWarps>);
}

// FP8 weights: 4 steps of 64 values in flight per thread (a warp's share of a 2048-value row in one round).
constexpr int kUnrollF8 = 4;

// Blocks of 4 warps instead of 8 (adding the same partial sums: the same bits) where a launch's tiles would
// take more than one wave of 8-warp blocks (2 per SM at 128 registers) but fit in one of 4-warp blocks (4 per
// SM): bf16 weights, one tile of tokens, k >= 4096, no residual epilogue (its last block normalises with 8
// warps). Qwen3-8B's q/k/v (384 tiles on 132 SMs) took 16.1 instead of 17.1 us per layer, +0.7-0.9% tokens/s
// at batch 1 (docs/performance.md, eighteenth session); at k = 2048 (Qwen3-30B-A3B's q/k/v, 320 tiles, one
// round of loads per tile as 8 warps, two as 4) 0.5-1% slower; the residual GEMVs (o_proj, down), every
// launch, or the experts' up kernel (Qwen3-Next's 352 items) as 4-warp blocks were slower.
bool GemvFourWarps(const GemvBatch& b, int64_t tiles) {
  if (b.w_type != kBF16 || b.n > 8 || b.k < 4096 || b.res.out != nullptr) return false;
  int device = 0, sms = 0;
  INFX_CUDA_CHECK(cudaGetDevice(&device));
  INFX_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t items = b.silu_out != nullptr ? tiles / 2 : tiles;
  return items > 2 * int64_t{sms} && items <= 4 * int64_t{sms};
}

// The kernel for a batch's weight type (bf16 at one tile of tokens, or FP8) and x.
// (The routing tail takes x as it is.)
template <int kTail>
void LaunchOneTile(cudaStream_t s, const GemvBatch& batch, int64_t tiles, const GemvTail& tail) {
  if constexpr (kTail == kTailRoute) {
    if (batch.w_type == kF8E4M3B128) {
      Launch<1, kUnrollF8, kGemvXPlain, kTail, kF8E4M3B128>(s, batch, tiles, tail);
    } else {
      Launch<1, 8, kGemvXPlain, kTail>(s, batch, tiles, tail);
    }
  } else if (batch.w_type == kF8E4M3B128) {
    if (batch.pro.kind == kGemvXNorm) {
      Launch<1, kUnrollF8, kGemvXNorm, kTail, kF8E4M3B128>(s, batch, tiles, tail);
    } else {
      Launch<1, kUnrollF8, kGemvXPlain, kTail, kF8E4M3B128>(s, batch, tiles, tail);
    }
  } else if (batch.pro.kind == kGemvXNorm) {
    Launch<1, 8, kGemvXNorm, kTail>(s, batch, tiles, tail);
  } else if constexpr (kTail == kTailNone) {
    const bool four = GemvFourWarps(batch, tiles);
    if (batch.pro.kind == kGemvXScaled) {
      if (four) {
        Launch<1, 8, kGemvXScaled, kTailNone, kBF16, 4>(s, batch, tiles, tail);
      } else {
        Launch<1, 8, kGemvXScaled, kTailNone>(s, batch, tiles, tail);
      }
    } else if (four) {
      Launch<1, 8, kGemvXPlain, kTailNone, kBF16, 4>(s, batch, tiles, tail);
    } else {
      Launch<1, 8, kGemvXPlain, kTail>(s, batch, tiles, tail);
    }
  } else {
    Launch<1, 8, kGemvXPlain, kTail>(s, batch, tiles, tail);
  }
}

}  // namespace

size_t GemvNormSmemBytes(int64_t n, int64_t k) { return static_cast<size_t>(n * (k + kXPad)) * sizeof(bf16); }

void ConfigureGemv(size_t max_smem_optin) {
  cudaFuncAttributes attr{};
  for (auto kernel : {GemvKernel<1, 8, kGemvXNorm, kTailNone>, GemvKernel<1, 8, kGemvXNorm, kTailConv>,
                      GemvKernel<1, kUnrollF8, kGemvXNorm, kTailNone, kF8E4M3B128>,
                      GemvKernel<1, kUnrollF8, kGemvXNorm, kTailConv, kF8E4M3B128>}) {
    INFX_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    INFX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(max_smem_optin - attr.sharedSizeBytes)));
  }
}

void LaunchGemv(cudaStream_t s, GemvBatch batch) { LaunchGemvWithTail(s, batch, GemvTail{}); }

bool GemvXScaledFits(const GemvBatch& b) {
  const GemvPrologue& pro = b.pro;
  int64_t tiles = 0;
  for (int i = 0; i < b.n_segments; ++i) tiles += (b.seg[i].rows + 15) / 16;
  const int64_t blocks = b.silu_out != nullptr ? tiles / 2 : tiles;  // Launch: a block per tile (or pair)
  auto aligned = [](const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; };
  return pro.kind == kGemvXScaled && b.w_type == kBF16 && b.n >= 1 && b.n <= kGemvNormMaxTokens && b.k % 8 == 0 &&
         pro.ss != nullptr && pro.a != nullptr && pro.out != nullptr && pro.w_dtype == kBF16 && aligned(pro.a) &&
         aligned(pro.w) && aligned(pro.out) && aligned(pro.ss) && pro.ss_tiles % 4 == 0 &&
         b.n * pro.ss_tiles <= kGemvScaledMaxSums &&
         b.n * (b.k / 8) <= blocks * 32 * 4;  // blocks of 4 warps or 8 (GemvFourWarps)
}

void LaunchGemvWithTail(cudaStream_t s, GemvBatch batch, GemvTail tail) {
  int64_t tiles = 0;
  for (int i = 0; i < batch.n_segments; ++i) tiles += (batch.seg[i].rows + 15) / 16;
  if (tiles == 0 || batch.n == 0) return;
  INFX_CHECK(batch.w_type == kBF16 || GemvTakesWeights(batch.w_type, batch.n, batch.k));
  if (batch.silu_out != nullptr)
    INFX_CHECK(batch.n_segments == 2 && batch.seg[0].rows == batch.seg[1].rows && batch.seg[0].out_dtype == kBF16 &&
               batch.seg[1].out_dtype == kBF16);
  CheckGemvResidual(batch);
  if (batch.pro.kind == kGemvXNorm) INFX_CHECK(batch.n <= kGemvNormMaxTokens && batch.pro.counter != nullptr);
  if (batch.pro.kind == kGemvXScaled)
    INFX_CHECK(GemvXScaledFits(batch) && tail.route.ids == nullptr && tail.conv.out == nullptr);
  const GemvRouting& route = tail.route;
  if (route.ids != nullptr) {
    INFX_CHECK(batch.pro.kind == kGemvXPlain && batch.silu_out == nullptr && batch.res.out == nullptr &&
               batch.n <= kGemvNormMaxTokens && batch.seg[0].out_dtype == kF32 &&
               batch.seg[0].rows <= kGemvRoutingMaxExperts && route.counter != nullptr && route.top_k >= 1 &&
               route.top_k <= kRouteMaxTopK && route.top_k <= batch.seg[0].rows && tail.conv.out == nullptr);
    LaunchOneTile<kTailRoute>(s, batch, tiles, tail);
  } else if (tail.conv.out != nullptr) {
    INFX_CHECK(batch.silu_out == nullptr && batch.res.out == nullptr && batch.n <= kGemvNormMaxTokens &&
               batch.seg[0].out_dtype == kBF16 && tail.conv.kernel >= 1 && tail.conv.kernel <= kGemvConvMaxKernel &&
               tail.conv.layout.max_seq_tokens == 1 && tail.conv.layout.n_tokens == batch.n);
    LaunchOneTile<kTailConv>(s, batch, tiles, tail);
  } else if (batch.pro.kind == kGemvXNorm || batch.n <= 8 || batch.w_type != kBF16) {
    LaunchOneTile<kTailNone>(s, batch, tiles, tail);
  } else {
    Launch<2, 4, kGemvXPlain>(s, batch, tiles);
  }
  INFX_CUDA_CHECK_LAUNCH();
}

// FP8 from 2 tokens: at one token the tensor-core quantized GEMV (f16 x, E4M3 -> f16 in one conversion per
// two values) was 5% faster per Qwen3-8B step than this kernel (E4M3 -> bf16 through f32), and the fusions
// this kernel brings only made up for it in the MoE models (docs/performance.md); at 2 tokens the two
// kernels were even on Qwen3-8B and this one 0.4-2.3% faster per MoE step (its fusions); at 8 tokens it took
// 11-12% off every FP8 model's step (the quantized one multiplies bf16 x from 3 tokens on).
bool GemvTakesWeights(int w_type, int64_t n, int64_t k) {
  return w_type == kBF16 ? n >= 1 && n <= kGemvMaxTokens && k % 8 == 0
                         : w_type == kF8E4M3B128 && n >= 2 && n <= kGemvNormMaxTokens && k % 512 == 0 &&
                               k <= (int64_t{1} << 24);
}

}  // namespace infernix::cuda
