// Split-KV decode attention on tensor cores (mma.sync m16n8k16, bf16 in, f32 accumulation): the same
// contract as the CUDA-core split kernel (attention_decode.cu; kernels.h, LaunchAttentionSplit) for
// head_dim a multiple of 8 up to 256 and GQA groups of up to 16 query heads. A block owns one token, one
// KV head and one chunk of key positions (whole KV pages of 64 keys); the group's query heads are the
// 16 rows of the A operand (zero rows past the group), so K and V are read once per group (the fused
// kernel at a short context: a share of the group per block, see the kernel). The pages
// stream through a ring of shared-memory buffers (cp.async; Stages below), so that while the block
// computes on one page the next ones are in flight: at long contexts the kernel is bound by the K/V
// bytes. Each of the 4 warps takes 16 keys of every page and keeps its own online softmax in registers;
// the warps' partial results are merged through shared memory at the end. The CUDA-core kernel computes
// every score with one lane per key and was bound by instruction issue at long contexts (~1.25 TB/s of
// K/V).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backend/cuda/decode_f8_order.h"
#include "backend/cuda/qkv_prep.cuh"

namespace infernix::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kRows = 16;  // query heads of a group, padded
static_assert(kPageSize == kWarps * 16, "each warp takes 16 keys of a page");

template <int D>
__host__ __device__ constexpr int Stride() {
  return D + 8;  // bf16 per shared-memory row: 16 bytes of padding against bank conflicts
}
// f32 per row of a warp's partial output in the merge: padded so that a warp's stores to its 8 rows are at
// most 2-way bank conflicts (8-way unpadded), and little enough that the merge still fits in the bytes of
// the tiles (SmemBytes) at every head_dim.
template <int D>
__host__ __device__ constexpr int MergeStride() {
  return D + 4;
}

// Pages in shared memory at once. Three for head_dim 256 (206 KiB, one block per SM with two pages in
// flight while it computes on the third): Qwen3-Next-80B-A3B (24 layers) at 131,072 tokens of context
// took 2.865 ms of GPU time per decode step instead of 3.106 with one page and two blocks per SM
// (2.30-2.32 at depth 0). One for smaller head_dims (load, wait, compute): with three (106 KiB at
// head_dim 128), Qwen3-8B's decode steps in CUDA graphs took 23% longer even at depth 0 (GPU busy 5.67
// vs 4.61 ms), although ncu timed the kernel itself the same (5.5 us), and 19% longer at 32,768 tokens:
// its shared memory leaves the GEMVs that start after it on the same SMs too little L1 (docs/cuda.md).
template <int D>
__host__ __device__ constexpr int Stages() {
  return D <= 128 ? 1 : 3;
}

// An FP8 cache (kF8 below) is computed on as it is staged, without a bf16 copy of its pages: the pages
// (codes and scales, RawPageBytes) stream through a ring of kRawStages buffers, and each warp turns the
// codes of its 16 keys into mma fragments in registers, E4M3 -> f16 (one instruction per two codes on
// sm_89 and later; exact). S = Q K^T then runs on f16 operands: Q is staged once as f16, each row scaled by
// a power of two that keeps it in f16's range, and a key's scale and Q's row factor multiply the scores
// (exact: powers of two). A dot product does not care about the order of head_dim, so a thread takes 16
// contiguous codes of a key row per 64 columns (one 16-byte load for 4 mma steps) and Q is staged with
// its columns in the same order (QFragCol, decode_f8_order.h). For O += P V, V's codes are decoded along the row and
// transposed into B fragments with movmatrix; the output columns come out permuted (VDim), which the
// partial results undo. V's row scales multiply P before it is rounded to f16, relative to the warp's
// largest V scale so far (the factor is kept apart and applied at the end), so that P stays in [0, 1].
// Two stages: at head_dim 256 that is 82 KiB a block, two blocks per SM. (A page's K and V as cp.async
// groups of their own, K running two pages ahead, measured no faster on an H100 and 1% slower for Qwen3-8B
// at batch 8: docs/performance.md.) The form before (one raw page decoded into a bf16 buffer by the whole
// block, then the bf16 kernel's products) was issue-bound by the decoding at long contexts.
constexpr int kRawStages = 2;

// An FP8 cache's page as staged (kF8 below): the K codes [kPageSize][D], the V codes, the K scales
// [kPageSize] and the V scales, each row's 16-byte chunks in RawChunk's order (decode_f8_order.h).
template <int D>
__host__ __device__ constexpr int RawScalesAt() {  // the byte of a raw page where the scales begin
  return 2 * kPageSize * D;
}
template <int D>
__host__ __device__ constexpr int RawPageBytes() {
  return RawScalesAt<D>() + 2 * kPageSize * static_cast<int>(sizeof(float));
}

// Q (kRows rows), then kStages buffers of K and V of one page (bf16; an FP8 cache: Q again as f16, then
// kRawStages raw pages); after the pages, the bytes after Q hold the warps' partial results: o [kWarps][kRows]
// [MergeStride] f32, then m and l [kWarps][kRows]. The fused kernel has a preparation area after all that (see the kernel).
template <int D>
__host__ __device__ constexpr size_t QBytes() {
  return size_t{kRows} * Stride<D>() * sizeof(bf16);
}
template <int D, bool kF8>
__host__ __device__ constexpr size_t SmemBytes() {
  const size_t buffer = size_t{2 * kPageSize} * Stride<D>() * sizeof(bf16);
  const size_t tiles =
      QBytes<D>() + (kF8 ? QBytes<D>() + size_t{kRawStages} * RawPageBytes<D>() : buffer * Stages<D>());
  const size_t merge = QBytes<D>() + size_t{kWarps} * kRows * (MergeStride<D>() + 2) * sizeof(float);
  return tiles > merge ? tiles : merge;
}
template <int D, bool kF8>
__host__ __device__ constexpr size_t FusedSmemBytes() {
  return SmemBytes<D, kF8>() + size_t{kWarps + 3} * D * sizeof(float) + 2 * D * sizeof(bf16) +
         (kF8 ? 2 * D + 2 * sizeof(float) : 0);
}

// Whether the fused kernel writes prepared tensor i's rows (0: q, 1: k, 2: v) back in place: the preparation
// changes them and the caller has not discarded them (DecodeAttentionFusion::keep_rows).
__device__ __forceinline__ bool WritesPreparedBack(const DecodeAttentionFusion& f, int i) {
  return PrepChangesRow(f.prep.t[i]) && (f.keep_rows >> i & 1);
}

// kFused (DecodeAttentionFusion, kernels.h): q, k and v prepared here, the splits merged here. kF8: an FP8
// cache (kv_f8.cuh), whose pages are staged raw with cp.async and turned into f16 fragments by the warps
// that use them (kRawStages above).
template <int D, bool kFused, bool kF8>
__global__ void __launch_bounds__(kThreads)
    DecodeMmaKernel(DeviceLayout layout, KvCacheView kv, const bf16* q, int n_heads, float scale_log2, int n_splits,
                    float* ws_o, float* ws_ml, bf16* direct_out, DecodeAttentionFusion f) {
  constexpr int kStride = Stride<D>();
  constexpr int kChunks = D / 8;  // 16-byte chunks per padded row
  AllowDependentLaunch();
  const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z, tid = threadIdx.x;
  const int hkv = kv.n_kv_heads, d = kv.head_dim, d_chunks = d / 8;
  // The fused kernel's q and k norm weights (thread tid: elements tid, tid + kThreads of [2][D]) and RoPE's
  // frequency (tid < half), loaded first: they depend on nothing, while the page copies wait on a chain of
  // dependent loads (the token's sequence, its slot, the page table) and the block does nothing else before its
  // wait. (Loaded where they were used, after the first page's copies, they were a round trip of their own:
  // ~10% of the kernel's stall samples at batch 1, ncu's source page, thirty-seventh session.)
  constexpr int kWeightsPer = (2 * D + kThreads - 1) / kThreads;
  static_assert(!kFused || D / 2 <= kThreads, "one RoPE frequency per thread");
  float w_first[kWeightsPer] = {};
  float freq_first = 0.0f;
  if constexpr (kFused) {
#pragma unroll
    for (int j = 0; j < kWeightsPer; ++j) {
      const int i = tid + j * kThreads;
      if (i < 2 * D) {
        const HeadPrep& hp = f.prep.t[i / D];
        if (hp.norm_w != nullptr && i % D < d) w_first[j] = LoadF(hp.norm_w, hp.w_dtype, i % D);
      }
    }
    if (tid < f.prep.half) freq_first = f.prep.inv_freq[tid];
  }
  const int seq = layout.token_seq[t], slot = layout.seq_info[seq * 4], pos = layout.token_pos[t];
  // Whole pages per split; the splits past the context are empty. The fused kernel keeps a short context in
  // one split (DecodeAttentionFusion::one_split_pages).
  const int len = pos + 1, per_split = (len + n_splits - 1) / n_splits;
  const int len_pages = (len + kPageSize - 1) / kPageSize;
  const bool one_split = kFused && len_pages <= f.one_split_pages;
  const int chunk = (one_split ? len_pages : (per_split + kPageSize - 1) / kPageSize) * kPageSize;
  // The block's query heads: the group's, or in one split (the splits' blocks past the first would be empty)
  // a share of them, ceil(group / n_splits) a block, each block over the whole context: short contexts are
  // bound by the preparation's and the merge's latency per row, not by their pages, which the blocks stage
  // from L2 apiece. Each of the `sharers` blocks then prepares the new key and value from k's and v's rows for
  // itself (an FP8 cache: their codes and scales too); the first (writer) stores them to the cache, and the
  // last to finish writes the prepared rows back to k and v (once every sharer has read them).
  const int kv_group = n_heads / hkv;
  int group = kv_group, key_split = split, sharers = 1;
  int64_t head0 = static_cast<int64_t>(t) * n_heads + static_cast<int64_t>(kvh) * kv_group;
  bool writer = true;
  if constexpr (kFused) {
    if (one_split) {
      const int share = (kv_group + n_splits - 1) / n_splits, row0 = split * share;
      sharers = (kv_group + share - 1) / share;
      if (row0 < kv_group) {  // (the blocks past the rows stay empty splits)
        head0 += row0;
        group = min(share, kv_group - row0);
        key_split = 0;
        writer = split == 0;
      }
    }
  }
  const int begin = key_split * chunk, end = min(begin + chunk, len);
  if constexpr (kFused) {
    if (begin >= end) {  // the merge counts only the splits that have keys
      WaitForPrevious();
      return;
    }
  } else {
    WaitForPrevious();   // q and this token's K/V come from the kernel before
    if (begin >= end) {  // an empty partial result for the combine kernel
      for (int i = tid; i < group; i += kThreads) {
        ws_ml[((head0 + i) * n_splits + split) * 2] = -INFINITY;
        ws_ml[((head0 + i) * n_splits + split) * 2 + 1] = 0.0f;
      }
      return;
    }
  }
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int kStages = Stages<D>();
  // OnlineSoftmaxStep's skip of a unit rescale where registers do not bound the residency (shared memory
  // does, or the FP8 kernel's registers are as many without it).
  constexpr bool kSkipUnitRescale = kF8 || D > 128;
  constexpr int kBuffer = 2 * kPageSize * kStride;  // K then V of one page, bf16
  bf16* qs = reinterpret_cast<bf16*>(smem);
  bf16* pages = qs + kRows * kStride;
  const bf16* kpages = static_cast<const bf16*>(kv.k_pages);
  const bf16* vpages = static_cast<const bf16*>(kv.v_pages);
  const int first = begin / kPageSize, last = (end - 1) / kPageSize;  // the chunk's pages
  // FP8: Q as f16 (QFragCol's column order, a row's factor in q_factor), then the raw pages. Page kb's codes
  // and scales go into raw page kb % kRawStages, 16 bytes per copy (zeros for the columns past head_dim and the
  // keys outside the chunk, whose scales the warps replace with 0), as one cp.async group (empty past the last
  // page, so that the group count stays uniform). A thread's copies are of one chunk column, kRowStep rows
  // apart: the same place in every row's chunk order, and addresses a constant step apart (the index
  // arithmetic of a copy per loop pass was a fifth of the kernel's instructions, ncu). The page's number is
  // read from the page table an iteration before it is needed, so that its load does not hold up the copies.
  __half* qh = reinterpret_cast<__half*>(pages);
  uint8_t* raw = reinterpret_cast<uint8_t*>(qh + kRows * kStride);
  __shared__ float q_factor[kF8 ? kRows : 1];
  constexpr int kCopies = D / 16;  // of 16 codes (head_dim % 16 == 0: AttentionDecodeMmaFits)
  constexpr int kRowStep = kThreads / kCopies;
  static_assert(kThreads % kCopies == 0 && kRowStep % 2 == 0, "RawChunk depends on a row's parity only");
  const int copy_col = tid % kCopies, copy_row = tid / kCopies;
  const bool copy_col_in = copy_col < d / 16;
  const int copy_at = copy_row * D + RawChunk<D>(copy_row, copy_col) * 16;
  const int64_t copy_src = copy_col_in ? static_cast<int64_t>(copy_row) * d + copy_col * 16 : 0;
  const int32_t* slot_pages = kv.page_table + static_cast<int64_t>(slot) * kv.pages_per_slot;
  auto page_of = [&](int kb) { return kb <= last ? __ldg(slot_pages + kb) : 0; };
  auto load_raw = [&](int kb, int page) {
    if (kb <= last) {
      uint8_t* rk = raw + (kb % kRawStages) * RawPageBytes<D>();
      const int64_t row0 = (static_cast<int64_t>(page) * hkv + kvh) * kPageSize;
      const int key0 = kb * kPageSize + copy_row;
      const bool all_in = copy_col_in && key0 >= begin && key0 + kPageSize - kRowStep < end;
#pragma unroll
      for (int w = 0; w < 2; ++w) {  // K, then V
        const uint8_t* base = static_cast<const uint8_t*>(w == 0 ? kv.k_pages : kv.v_pages) + row0 * d;
        const uint8_t* src = base + copy_src;
        uint8_t* dst = rk + w * kPageSize * D + copy_at;
        if (all_in) {  // every row of this thread's copies is in the chunk
#pragma unroll
          for (int j = 0; j < kPageSize / kRowStep; ++j, src += kRowStep * d) CpAsync16(dst + j * kRowStep * D, src);
        } else {
#pragma unroll
          for (int j = 0; j < kPageSize / kRowStep; ++j, src += kRowStep * d) {
            const int key = key0 + j * kRowStep;
            const bool valid = copy_col_in && key >= begin && key < end;
            CpAsync16Zfill(dst + j * kRowStep * D, valid ? src : base, valid);
          }
        }
        const int st = tid - w * (kPageSize / 4);  // 4 rows' scales a copy
        if (st >= 0 && st < kPageSize / 4) {
          float* sc = reinterpret_cast<float*>(rk + RawScalesAt<D>()) + w * kPageSize;
          CpAsync16(sc + 4 * st, (w == 0 ? kv.k_scale : kv.v_scale) + row0 + 4 * st);
        }
      }
    }
    CpAsyncCommit();
  };
  int page_next = 0;  // the number of the page that the loop loads next
  auto load_first = [&]() {  // the prologue's page
    load_raw(first, page_of(first));
    page_next = page_of(first + 1);
  };
  // Page kb's K and V into buffer kb % kStages, zeros for keys outside the chunk (no NaN from stale bytes
  // reaches P V) and for columns past head_dim. One cp.async group per page, empty past the last page, so
  // that the group count stays uniform.
  auto load_page = [&](int kb) {
    if (kb <= last) {
      bf16* ks = pages + (kb % kStages) * kBuffer;
      bf16* vs = ks + kPageSize * kStride;
      const int page = kv.page_table[static_cast<int64_t>(slot) * kv.pages_per_slot + kb];
      const int64_t base = (static_cast<int64_t>(page) * hkv + kvh) * kPageSize * d;
      for (int i = tid; i < kPageSize * kChunks; i += kThreads) {
        const int r = i / kChunks, c = i - r * kChunks;
        const int key = kb * kPageSize + r;
        const bool valid = key >= begin && key < end && c < d_chunks;
        const int64_t src = valid ? base + static_cast<int64_t>(r) * d + c * 8 : 0;
        CpAsync16Zfill(ks + r * kStride + c * 8, kpages + src, valid);
        CpAsync16Zfill(vs + r * kStride + c * 8, vpages + src, valid);
      }
    }
    CpAsyncCommit();
  };
  // The fused kernel's preparation area (FusedSmemBytes): a row per warp, the q and k norm weights, RoPE's
  // cos and sin at this token's position (f32), and the new key and value (bf16 [2][D]; an FP8 cache: then
  // their codes [2][D] and scales [2]), which the blocks whose chunk holds them prepare.
  const bool owner = kFused && pos < end;
  float* prep_rows = reinterpret_cast<float*>(smem + SmemBytes<D, kF8>());
  float* norm_w = prep_rows + kWarps * D;  // [2][D]: q's, k's
  float* rope_cs = norm_w + 2 * D;         // [D / 2]
  float* rope_sn = rope_cs + D / 2;        // [D / 2]
  bf16* knew = reinterpret_cast<bf16*>(rope_sn + D / 2);
  uint8_t* knew_codes = reinterpret_cast<uint8_t*>(knew + 2 * D);
  float* knew_scale = reinterpret_cast<float*>(knew_codes + 2 * D);
  static_assert(SmemBytes<D, kF8>() % 16 == 0 && D % 16 == 0, "16-byte rows of codes");
  if constexpr (kFused) {
    // The keys before this token's were written by earlier forwards (each forward's batch layout is
    // copied in first, and a copy waits for everything before it), so their pages load before the wait;
    // the new key's row is patched in once prepared. The weights and RoPE's factors are ready before too.
    if constexpr (kF8) {
      load_first();
    } else {
#pragma unroll
      for (int j = 0; j < (kStages > 1 ? kStages - 1 : 1); ++j) load_page(first + j);
    }
    const QkvPrep& p = f.prep;
#pragma unroll
    for (int j = 0; j < kWeightsPer; ++j) {
      if (tid + j * kThreads < 2 * D) norm_w[tid + j * kThreads] = w_first[j];
    }
    if (tid < p.half) {
      float sn, cs;
      sincosf(static_cast<float>(pos) * freq_first, &sn, &cs);
      rope_cs[tid] = cs * p.rope_scale;
      rope_sn[tid] = sn * p.rope_scale;
    }
    // Items: the group's query heads, then (the owner) the key and the value, warp w taking items w, w + 4,
    // ...; each prepared as PrepHeadRow would (the same bits). A warp's first row loads right after the wait,
    // a later item's at the top of its pass: a loop that is not unrolled, so that the kernel's code stays small
    // (at batch 1 a warp has one item; unrolled for the 5 a warp can have, the preparation made the kernel
    // 107 KB of code instead of 72, most of it never run, and short contexts are bound by the instructions'
    // latency, ncu's "no instruction" stalls included).
    constexpr int kPer = D / 32;
    const int lane = tid & 31, warp = tid >> 5, items = group + (owner ? 2 : 0);
    auto row_of = [&](int it) {
      const int ti = it < group ? 0 : it - group + 1;
      return static_cast<bf16*>(p.t[ti].x) + (ti == 0 ? head0 + it : static_cast<int64_t>(t) * hkv + kvh) * d;
    };
    // The padding rows of Q's tile (past the group) are zeros: written before the wait, 16 bytes a store.
    for (int i = tid; i < (kRows - group) * (D / 8); i += kThreads)
      *reinterpret_cast<uint4*>(qs + (group + i / (D / 8)) * kStride + i % (D / 8) * 8) = make_uint4(0, 0, 0, 0);
    WaitForPrevious();  // q, k and v come from the kernel before
    float xv[kPer];
    auto load_row = [&](int it) {
      const bf16* x = row_of(it);
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        const int i = lane + 32 * e;
        xv[e] = i < d ? __bfloat162float(x[i]) : 0.0f;
      }
    };
    if (warp < items) load_row(warp);
    __syncthreads();  // the weights and factors
    float* row = prep_rows + warp * D;
#pragma unroll 1
    for (int it = warp; it < items; it += kWarps) {
      if (it != warp) load_row(it);
      const int ti = it < group ? 0 : it - group + 1;
      const HeadPrep& hp = p.t[ti];
      float ss = 0;
#pragma unroll
      for (int e = 0; e < kPer; ++e) ss += xv[e] * xv[e];
      const float inv = hp.norm_w != nullptr ? RmsInv(WarpSum(ss), d, hp.eps) : 0.0f;
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        const int i = lane + 32 * e;
        row[i] = hp.norm_w != nullptr && i < d ? RoundBf16(RmsScale(xv[e], inv, norm_w[ti * D + i], hp.w_offset))
                                               : xv[e];
      }
      __syncwarp();
      if (hp.rope) {
        for (int i = lane; i < p.half; i += 32) {
          const float a = row[i], c = row[i + p.half];
          row[i] = RoundBf16(a * rope_cs[i] - c * rope_sn[i]);
          row[i + p.half] = RoundBf16(c * rope_cs[i] + a * rope_sn[i]);
        }
        __syncwarp();
      }
      bf16* x = row_of(it);
      bf16* dst = ti == 0 ? qs + it * kStride : knew + (ti - 1) * D;
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        const int i = lane + 32 * e;
        const bf16 v = __float2bfloat16_rn(row[i]);
        dst[i] = v;  // zeros past head_dim
        // k; q is written back after the merge (the other splits read it)
        if (i < d && ti != 0 && sharers == 1 && WritesPreparedBack(f, ti)) x[i] = v;
      }
      if (ti != 0 && hp.cache != 0) {
        const int64_t crow = KvRowIndex(kv, slot, pos, kvh);
        if constexpr (kF8) {  // the codes and scale for this block's staged page, and (the writer) the cache
          uint8_t* codes = knew_codes + (ti - 1) * D;
          uint8_t* cached = static_cast<uint8_t*>(hp.cache == 1 ? kv.k_pages : kv.v_pages) + crow * d;
          const float sc = EncodeKvF8Row(d, lane, [&](int i) { return row[i]; }, [&](int i, uint8_t code, float) {
            codes[i] = code;
            if (writer) cached[i] = code;
          });
          if (lane == 0) {
            knew_scale[ti - 1] = sc;
            if (writer) (hp.cache == 1 ? kv.k_scale : kv.v_scale)[crow] = sc;
          }
        } else if (writer) {  // the same bits as v above, which the blocks that do not write it keep
          StoreKvRow<KvKind::kBf16>(
              kv, hp.cache, crow, [&](int i) { return row[i]; }, [&](int i, float v) { dst[i] = __float2bfloat16_rn(v); },
              lane);
        }
      }
      __syncwarp();  // the row is free for the warp's next item
    }
    __syncthreads();
  } else {
    for (int i = tid; i < kRows * kChunks; i += kThreads) {
      const int r = i / kChunks, c = i - r * kChunks;
      const bool valid = r < group && c < d_chunks;
      CpAsync16Zfill(qs + r * kStride + c * 8, q + (valid ? (head0 + r) * d + c * 8 : 0), valid);
    }
    if constexpr (kF8) {  // Q as a group of its own: it is made f16 before the loop
      CpAsyncCommit();
      load_first();
    } else {
#pragma unroll
      for (int j = 0; j < kStages - 1; ++j) load_page(first + j);
    }
  }

  const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // rows g and g + 8
  // FP8: Q's row factors of rows g and g + 8, and the warp's largest V scale so far (the factor of o; from
  // 2^-100, so that its inverse is finite: V rows whose values are all below ~1e-27 then weigh as zeros).
  float qf_a = 1.0f, qf_b = 1.0f, v_ref = 0x1p-100f;
  if constexpr (kF8) {
    if constexpr (!kFused) {
      CpAsyncWait<kRawStages - 1>();  // Q's group (pages may still be in flight)
      __syncthreads();
    }
    // Q as f16 in QFragCol's column order, each row times 2^-sh so that its largest magnitude is in [2^14, 2^15)
    // (exact for the elements down to about 2^-29 of the row's largest, where f16's normal range ends).
    for (int r = warp; r < kRows; r += kWarps) {
      float v[D / 32];
      float mx = 0.0f;
#pragma unroll
      for (int e = 0; e < D / 32; ++e) {
        v[e] = __bfloat162float(qs[r * kStride + lane + 32 * e]);
        mx = fmaxf(mx, fabsf(v[e]));
      }
      mx = WarpMax(mx);
      int sh = 0;
      if (mx > 0.0f && mx < INFINITY) {
        frexpf(mx, &sh);  // mx < 2^sh
        sh = max(sh - 15, -60);
      }
#pragma unroll
      for (int e = 0; e < D / 32; ++e) qh[r * kStride + QFragCol(lane + 32 * e)] = __float2half_rn(ldexpf(v[e], -sh));
      if (lane == 0) q_factor[r] = ldexpf(1.0f, sh);
    }
    __syncthreads();
    qf_a = q_factor[g];
    qf_b = q_factor[g + 8];
  }
  for (int kb = first; kb <= last; ++kb) {
    if constexpr (kF8) {
      static_assert(kRawStages == 2, "one page in flight while one is computed on");
      CpAsyncWait<0>();             // page kb has landed
      __syncthreads();              // for every thread; and every warp is done with page kb - 1's buffer,
      load_raw(kb + 1, page_next);  // which takes page kb + 1
      page_next = page_of(kb + 2);  // for the next iteration
      uint8_t* rk = raw + (kb % kRawStages) * RawPageBytes<D>();
      if (owner && kb == pos / kPageSize) {  // the new key's and value's codes (the preparation's) over the staged row
        const int r = pos % kPageSize;
        for (int i = tid; i < 2 * kCopies; i += kThreads) {
          const int which = i / kCopies, c = i - which * kCopies;
          const uint4 v =
              c < d / 16 ? *reinterpret_cast<const uint4*>(knew_codes + which * D + c * 16) : make_uint4(0, 0, 0, 0);
          *reinterpret_cast<uint4*>(rk + (which * kPageSize + r) * D + RawChunk<D>(r, c) * 16) = v;
        }
        if (tid < 2) reinterpret_cast<float*>(rk + RawScalesAt<D>())[tid * kPageSize + r] = knew_scale[tid];
        __syncthreads();
      }
      const uint8_t* rv = rk + kPageSize * D;
      const float* ksc = reinterpret_cast<const float*>(rk + RawScalesAt<D>());
      const float* vsc = ksc + kPageSize;
      const int key0 = warp * 16;
      auto word = [](const uint4& v, int j) { return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w; };
      // The scales of the accumulator's keys (key0 + nt * 8 + 2 t4 + e), 0 outside the chunk.
      float kf[2][2], vf[2][2];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int r = key0 + nt * 8 + 2 * t4 + e, key = kb * kPageSize + r;
          const bool in = key >= begin && key < end;
          kf[nt][e] = in ? ksc[r] : 0.0f;
          vf[nt][e] = in ? vsc[r] : 0.0f;
        }
      }
      // S = Q K^T: per 64 columns, 16 codes of key rows key0 + nt * 8 + g for 4 steps of k.
      float s[2][4] = {}, s_odd[2][4] = {};
#pragma unroll
      for (int kq = 0; kq < D / 64; ++kq) {
        uint4 kc[2];
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const int r = key0 + nt * 8 + g;
          kc[nt] = *reinterpret_cast<const uint4*>(rk + r * D + RawChunk<D>(r, kq * 4 + t4) * 16);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t a[4];
          LdMatrixX4(a, qh + (lane & 15) * kStride + (kq * 4 + j) * 16 + (lane >> 4) * 8);
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            uint32_t b0, b1;
            E4m3x4ToHalf(word(kc[nt], j), &b0, &b1);
            MmaF16(j % 2 == 0 ? s[nt] : s_odd[nt], a[0], a[1], a[2], a[3], b0, b1);
          }
        }
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          s[nt][e] = (s[nt][e] + s_odd[nt][e]) * (kf[nt][e] * qf_a);
          s[nt][2 + e] = (s[nt][2 + e] + s_odd[nt][2 + e]) * (kf[nt][e] * qf_b);
        }
      }
      OnlineSoftmaxStep<kSkipUnitRescale>(s, o, m_run, l_run, scale_log2, [&](int nt, int e, bool) {
        const int key = kb * kPageSize + key0 + nt * 8 + 2 * t4 + e;
        return key >= begin && key < end;
      });
      // P times V's row scales relative to the warp's largest so far (o rescaled when that grows).
      float top = fmaxf(fmaxf(vf[0][0], vf[0][1]), fmaxf(vf[1][0], vf[1][1]));
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));  // the warp's 16 keys: the same in every lane
      if (top > v_ref) {
        const float down = v_ref / top;  // powers of two: exact
#pragma unroll
        for (int i = 0; i < D / 8; ++i) o[i][0] *= down, o[i][1] *= down, o[i][2] *= down, o[i][3] *= down;
        v_ref = top;
      }
      const float inv_ref = 1.0f / v_ref;
      float vr[2][2];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) vr[nt][0] = vf[nt][0] * inv_ref, vr[nt][1] = vf[nt][1] * inv_ref;
      const uint32_t pa[4] = {
          PackHalf(s[0][0] * vr[0][0], s[0][1] * vr[0][1]), PackHalf(s[0][2] * vr[0][0], s[0][3] * vr[0][1]),
          PackHalf(s[1][0] * vr[1][0], s[1][1] * vr[1][1]), PackHalf(s[1][2] * vr[1][0], s[1][3] * vr[1][1])};
      // O += P V: codes of rows key0 + 8 h + g along the row, transposed into B fragments (b0: h = 0, b1: h = 1);
      // n-tile kq * 8 + l holds the columns VDim(kq, l, *).
#pragma unroll
      for (int kq = 0; kq < D / 64; ++kq) {
        uint4 vc[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = key0 + 8 * h + g;
          vc[h] = *reinterpret_cast<const uint4*>(rv + r * D + RawChunk<D>(r, kq * 4 + t4) * 16);
        }
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          uint32_t lo[2], hi[2];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            E4m3x4ToHalf(word(vc[h], w), &lo[h], &hi[h]);
            lo[h] = MovMatrixTrans(lo[h]);
            hi[h] = MovMatrixTrans(hi[h]);
          }
          MmaF16(o[kq * 8 + 2 * w], pa[0], pa[1], pa[2], pa[3], lo[0], lo[1]);
          MmaF16(o[kq * 8 + 2 * w + 1], pa[0], pa[1], pa[2], pa[3], hi[0], hi[1]);
        }
      }
      continue;
    } else if constexpr (kStages == 1) {
      if (!kFused || kb != first) {  // the fused kernel loaded the first page before its wait
        __syncthreads();             // every warp is done with the previous page
        load_page(kb);
      }
      CpAsyncWait<0>();
      __syncthreads();
    } else {
      CpAsyncWait<(kStages > 1 ? kStages - 2 : 0)>();  // page kb has landed (later ones may be in flight)
      __syncthreads();              // for every thread; and every warp is done with page kb - 1's buffer,
      load_page(kb + kStages - 1);  // which takes this page
    }
    bf16* ks = pages + (kb % kStages) * kBuffer;
    bf16* vs = ks + kPageSize * kStride;
    if (owner && kb == pos / kPageSize) {  // the new key and value over the row staged from the cache
      const int r = pos % kPageSize;
      for (int i = tid; i < D; i += kThreads) {
        ks[r * kStride + i] = knew[i];
        vs[r * kStride + i] = knew[D + i];
      }
      __syncthreads();
    }

    // S = Q K^T for the 16 rows and this warp's 16 keys of the page (2 tiles of 8 keys).
    // Even and odd steps of head_dim accumulate apart (two independent mma chains per tile).
    const int key0 = warp * 16;
    float s[2][4] = {}, s_odd[2][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[4];
      LdMatrixX4(a, qs + (lane & 15) * kStride + kk * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        uint32_t b[2];
        LdMatrixX2(b, ks + (key0 + nt * 8 + (lane & 7)) * kStride + kk * 16 + ((lane >> 3) & 1) * 8);
        MmaBf16(kk % 2 == 0 ? s[nt] : s_odd[nt], a[0], a[1], a[2], a[3], b[0], b[1]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] += s_odd[nt][e];
    }

    // Keys outside the chunk masked; online softmax (base-2 exponent; scale_log2 = scale * log2(e)).
    OnlineSoftmaxStep<kSkipUnitRescale>(s, o, m_run, l_run, scale_log2, [&](int nt, int e, bool) {
      const int key = kb * kPageSize + key0 + nt * 8 + 2 * t4 + e;
      return key >= begin && key < end;
    });

    // O += P V over this warp's 16 keys: P's accumulator layout is the A-fragment layout of the product.
    const uint32_t pa[4] = {PackBf16(s[0][0], s[0][1]), PackBf16(s[0][2], s[0][3]), PackBf16(s[1][0], s[1][1]),
                            PackBf16(s[1][2], s[1][3])};
#pragma unroll
    for (int nd = 0; nd < D / 8; nd += 2) {
      uint32_t b[4];
      LdMatrixX4Trans(b, vs + (key0 + (lane & 7) + ((lane >> 3) & 1) * 8) * kStride + (nd + (lane >> 4)) * 8);
      MmaBf16(o[nd], pa[0], pa[1], pa[2], pa[3], b[0], b[1]);
      MmaBf16(o[nd + 1], pa[0], pa[1], pa[2], pa[3], b[2], b[3]);
    }
  }
  CpAsyncWait<0>();  // the empty groups past the last page
  __syncthreads();   // every warp is done with the pages: their bytes take the partial results

  // The warps' partial results into shared memory (the tiles' bytes), then merged per (row, column).
  constexpr int kPo = MergeStride<D>();
  float* po = reinterpret_cast<float*>(smem + QBytes<D>());  // [kWarps][kRows][kPo]
  float* pm = po + kWarps * kRows * kPo;       // [kWarps][kRows]: running max (base 2)
  float* pl = pm + kWarps * kRows;             // [kWarps][kRows]: sum
  float l_a = l_run[0], l_b = l_run[1];
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    l_a += __shfl_xor_sync(0xffffffffu, l_a, off);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, off);
  }
  if (t4 == 0) {
    pm[warp * kRows + g] = m_run[0];
    pm[warp * kRows + g + 8] = m_run[1];
    pl[warp * kRows + g] = l_a;
    pl[warp * kRows + g + 8] = l_b;
  }
  float* pw = po + warp * kRows * kPo;
  const float of = kF8 ? v_ref : 1.0f;
#pragma unroll
  for (int nd = 0; nd < D / 8; ++nd) {
    const int col = kF8 ? VDim(nd / 8, nd % 8, 2 * t4) : nd * 8 + 2 * t4;  // col + 1 holds the next one
    *reinterpret_cast<float2*>(pw + g * kPo + col) = make_float2(o[nd][0] * of, o[nd][1] * of);
    *reinterpret_cast<float2*>(pw + (g + 8) * kPo + col) = make_float2(o[nd][2] * of, o[nd][3] * of);
  }
  __syncthreads();
  // Splits with keys: all of them for the fused kernel (it returned for the empty ones), so with one such
  // split the block writes the output itself.
  const int live = kFused ? (len + chunk - 1) / chunk : n_splits;
  bf16* out = kFused ? direct_out : nullptr;
  const bf16* gate = kFused ? static_cast<const bf16*>(f.gate) : nullptr;
  // With f.xq (d == D: every lane of a warp stores, 32 consecutive columns of one row) each warp's 32 stored
  // values are also rounded to int8 for the quantized product that reads them (row t of n_heads d values in
  // kGemvXInt8's layout, QuantXRowAt).
  auto store_out = [&](int64_t i, float v) {
    const bf16 stored =
        __float2bfloat16_rn(gate == nullptr ? v : RoundBf16(v) * SigmoidF(__bfloat162float(gate[i])));
    out[i] = stored;
    if constexpr (kFused) {
      if (f.xq != nullptr) {
        const int64_t cols = static_cast<int64_t>(n_heads) * d, col = i - static_cast<int64_t>(t) * cols;
        const QuantXRow at = QuantXRowAt(f.xq, t, layout.n_tokens, cols, f.xq_group, f.xq_block);
        if (f.xq_group == 16) {
          StoreInt8Lane<16>(__bfloat162float(stored), at, col);
        } else {
          StoreInt8Lane<32>(__bfloat162float(stored), at, col);
        }
      }
    }
  };
  // Each row's merge weights once, by thread r of the first group: the largest of the warps' maxima, each
  // warp's weight exp2(m_w - m) and the row's sum l, added in warp order as every element of the row added
  // them before (the same bits; the elements then take 4 weights from shared memory instead of 4 exp2).
  __shared__ float row_e[kRows][kWarps];
  __shared__ float row_ml[kRows][2];
  if (tid < group) {
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, pm[w * kRows + tid]);  // finite: the chunk has a key
    float l = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float e = exp2f(pm[w * kRows + tid] - m);  // 0 for a warp whose keys were all masked
      row_e[tid][w] = e;
      l += pl[w * kRows + tid] * e;
    }
    row_ml[tid][0] = m;
    row_ml[tid][1] = l;
  }
  __syncthreads();
  // The (row, column) loops below split their index by the compile-time D (shifts; the columns past head_dim
  // skipped) instead of dividing by head_dim at run time.
  for (int i = tid; i < group * D; i += kThreads) {
    const int r = i / D, c = i % D;
    if (c >= d) continue;
    const float m = row_ml[r][0], l = row_ml[r][1];
    float acc = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) acc += po[(w * kRows + r) * kPo + c] * row_e[r][w];
    if (kFused && live == 1) {
      store_out((head0 + r) * d + c, l > 0.0f ? acc / l : 0.0f);
    } else if (direct_out != nullptr && !kFused) {  // a single split: the final output
      direct_out[(head0 + r) * d + c] = __float2bfloat16_rn(l > 0.0f ? acc / l : 0.0f);
    } else {
      ws_o[((head0 + r) * n_splits + split) * d + c] = acc;
      if (c == 0) {  // the combine kernel's max is in natural-log units: exp(s - m) = 2^(s log2(e) - m / ln 2)
        ws_ml[((head0 + r) * n_splits + split) * 2] = kFused ? m : m * 0.6931471805599453f;
        ws_ml[((head0 + r) * n_splits + split) * 2 + 1] = l;
      }
    }
  }
  if constexpr (kFused) {
    if (live > 1) {  // the last of the token's and KV head's splits to finish merges them
      if (!LastBlockToArrive(f.counter + t * hkv + kvh, live)) return;
      float* wf = po;  // [group][live] each split's weight, then [group] 1 / l (base-2 maxima)
      if (tid < group) {
        const float* ml = ws_ml + (head0 + tid) * n_splits * 2;
        float m = -INFINITY;
        for (int sp = 0; sp < live; ++sp) m = fmaxf(m, __ldcg(ml + 2 * sp));
        float l = 0;
        for (int sp = 0; sp < live; ++sp) {
          const float e = exp2f(__ldcg(ml + 2 * sp) - m);
          wf[tid * live + sp] = e;
          l += __ldcg(ml + 2 * sp + 1) * e;
        }
        wf[group * live + tid] = l > 0.0f ? 1.0f / l : 0.0f;
      }
      __syncthreads();
      for (int i = tid; i < group * D; i += kThreads) {
        const int r = i / D, c = i % D;
        if (c >= d) continue;
        const float* o = ws_o + (head0 + r) * n_splits * d + c;
        float acc = 0;
#pragma unroll 8
        for (int sp = 0; sp < live; ++sp) acc += wf[r * live + sp] * __ldcg(o + static_cast<int64_t>(sp) * d);
        store_out((head0 + r) * d + c, acc * wf[group * live + r]);
      }
    }
    // Every split has read q: the prepared rows go back in place (a sharer's rows are its own), unless the
    // caller discarded them.
    if (WritesPreparedBack(f, 0)) {
      bf16* xq = static_cast<bf16*>(f.prep.t[0].x);
      for (int i = tid; i < group * D; i += kThreads) {
        const int r = i / D, c = i % D;
        if (c < d) xq[(head0 + r) * d + c] = qs[r * kStride + c];
      }
    }
    // Every sharer has read k's and v's rows: the last to finish writes its prepared key and value (the same
    // bits in every sharer) back in place. (One split only: the counter is the merge's, unused there.) Where
    // the caller discarded them no block writes, so none counts the others out (at batch 1 that count, a
    // release at GPU scope and its atomic, was ~8% of the kernel's stall samples on an H100: ncu's source page).
    if (sharers > 1 && (WritesPreparedBack(f, 1) || WritesPreparedBack(f, 2))) {
      const int64_t kv_row = static_cast<int64_t>(t) * hkv + kvh;  // (token, KV head)
      if (LastBlockToArrive(f.counter + kv_row, sharers)) {
#pragma unroll 1
        for (int i = tid; i < 2 * D; i += kThreads) {
          const int which = 1 + i / D, c = i % D;
          if (c < d && WritesPreparedBack(f, which)) static_cast<bf16*>(f.prep.t[which].x)[kv_row * d + c] = knew[i];
        }
      }
    }
  }
}

template <int D, bool kFused, bool kF8>
void Launch(cudaStream_t s, DeviceLayout layout, KvCacheView kv, const void* q, int32_t n_heads, float scale,
            int32_t n_splits, float* ws_o, float* ws_ml, void* direct_out, const DecodeAttentionFusion& f) {
  dim3 grid(static_cast<unsigned>(layout.n_tokens), static_cast<unsigned>(kv.n_kv_heads),
            static_cast<unsigned>(n_splits));
  // Just the shared memory of the blocks per SM that the grid takes in one wave: the GEMVs after the
  // attention start on its SMs before they drain, with the L1 it leaves them.
  constexpr size_t kSmem = kFused ? FusedSmemBytes<D, kF8>() : SmemBytes<D, kF8>();
  int device = 0, sms = 1;
  INFX_CUDA_CHECK(cudaGetDevice(&device));
  INFX_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t blocks = int64_t{grid.x} * grid.y * grid.z;
  const auto kernel = DecodeMmaKernel<D, kFused, kF8>;
  const int carveout = SharedCarveoutPercent(kernel, kSmem, (blocks + sms - 1) / sms);
  LaunchDependentWithCarveout(carveout, kernel, grid, kThreads, kSmem, s, layout, kv, static_cast<const bf16*>(q),
                              n_heads, scale * 1.4426950408889634f, n_splits, ws_o, ws_ml,
                              static_cast<bf16*>(direct_out), f);
}

// The widest head_dim of the fused kernel: at 256 (Qwen3-Next: one block per SM, three pages staged) it
// measured slower than the plain kernel with its prep and combine (batch-1 step +4%, docs/performance.md),
// so it is not built that wide.
constexpr int kFusedMaxHeadDim = 128;

// The kernel for this head_dim (64, 128 or 256 wide; the fused one up to kFusedMaxHeadDim) and cache type.
template <bool kFused>
void LaunchFor(cudaStream_t s, DeviceLayout layout, KvCacheView kv, const void* q, int32_t n_heads, float scale,
               int32_t n_splits, float* ws_o, float* ws_ml, void* direct_out, const DecodeAttentionFusion& f) {
  auto go = [&](auto dc, auto f8c) {
    Launch<decltype(dc)::value, kFused, decltype(f8c)::value>(s, layout, kv, q, n_heads, scale, n_splits, ws_o, ws_ml,
                                                              direct_out, f);
  };
  auto with_type = [&](auto dc) {
    if (kv.f8()) {
      go(dc, std::true_type{});
    } else {
      go(dc, std::false_type{});
    }
  };
  if (kv.head_dim <= 64) {
    with_type(std::integral_constant<int, 64>{});
  } else if (kv.head_dim <= 128) {
    with_type(std::integral_constant<int, 128>{});
  } else if constexpr (!kFused) {
    with_type(std::integral_constant<int, 256>{});
  } else {
    INFX_CHECK_MSG(false, "the fused decode attention takes head_dim <= {}, not {}", kFusedMaxHeadDim, kv.head_dim);
  }
}

template <int D, bool kF8>
void Configure(size_t max_smem_optin) {
  if (SmemBytes<D, kF8>() <= max_smem_optin)
    INFX_CUDA_CHECK(cudaFuncSetAttribute(DecodeMmaKernel<D, false, kF8>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(SmemBytes<D, kF8>())));
  if constexpr (D <= kFusedMaxHeadDim) {
    if (FusedSmemBytes<D, kF8>() <= max_smem_optin)
      INFX_CUDA_CHECK(cudaFuncSetAttribute(DecodeMmaKernel<D, true, kF8>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(FusedSmemBytes<D, kF8>())));
  }
}

// Blocks of the kernel (plain and, where there is one, fused: the fewer) resident at once.
template <int D, bool kF8>
int64_t Residency() {
  constexpr int64_t kAny = int64_t{1} << 40;
  int64_t blocks = PersistentBlocks(DecodeMmaKernel<D, false, kF8>, kThreads, SmemBytes<D, kF8>(), kAny);
  if constexpr (D <= kFusedMaxHeadDim)
    blocks = std::min<int64_t>(
        blocks, PersistentBlocks(DecodeMmaKernel<D, true, kF8>, kThreads, FusedSmemBytes<D, kF8>(), kAny));
  return std::max<int64_t>(1, blocks);
}

// Shared memory of the plain kernel for a head_dim.
template <bool kF8>
size_t PlainSmem(int head_dim) {
  return head_dim <= 64 ? SmemBytes<64, kF8>() : head_dim <= 128 ? SmemBytes<128, kF8>() : SmemBytes<256, kF8>();
}

}  // namespace

bool AttentionDecodeMmaFits(int group, int head_dim, size_t max_smem_optin, bool f8) {
  if (head_dim % (f8 ? 16 : 8) != 0 || head_dim > 256 || group > kRows) return false;
  return (f8 ? PlainSmem<true>(head_dim) : PlainSmem<false>(head_dim)) <= max_smem_optin;
}

bool AttentionDecodeRoundsOutput(int head_dim, int n_heads) {
  // The output loops' warps then cover 32 consecutive columns of one head, none past head_dim.
  return (head_dim == 64 || head_dim == 128) && (static_cast<int64_t>(n_heads) * head_dim) % 256 == 0;
}

bool AttentionDecodeFusedFits(int group, int head_dim, int n_splits, size_t max_smem_optin, bool f8) {
  if (!AttentionDecodeMmaFits(group, head_dim, max_smem_optin, f8) || n_splits < 1) return false;
  // The last split's merge keeps each split's weight per query head in the bytes after Q.
  const size_t weights = size_t{kRows} * (static_cast<size_t>(n_splits) + 1) * sizeof(float);
  auto fits = [&](auto dc) {
    constexpr int D = decltype(dc)::value;
    const size_t smem = f8 ? FusedSmemBytes<D, true>() : FusedSmemBytes<D, false>();
    return smem <= max_smem_optin && QBytes<D>() + weights <= SmemBytes<D, false>();
  };
  static_assert(kFusedMaxHeadDim == 128, "the head_dims below");
  if (head_dim <= 64) return fits(std::integral_constant<int, 64>{});
  return head_dim <= 128 && fits(std::integral_constant<int, 128>{});
}

DecodeMmaResidency AttentionDecodeMmaResidency() {
  DecodeMmaResidency r;
  r.blocks[0][0] = Residency<64, false>();
  r.blocks[0][1] = Residency<128, false>();
  r.blocks[0][2] = Residency<256, false>();
  r.blocks[1][0] = Residency<64, true>();
  r.blocks[1][1] = Residency<128, true>();
  r.blocks[1][2] = Residency<256, true>();
  return r;
}

void LaunchAttentionDecodeMma(cudaStream_t s, DeviceLayout layout, KvCacheView kv, const void* q, int32_t n_heads,
                              float scale, int32_t n_splits, float* ws_o, float* ws_ml, void* direct_out) {
  if (layout.n_tokens == 0) return;
  INFX_CHECK((n_splits == 1) == (direct_out != nullptr) && n_heads / kv.n_kv_heads <= kRows);
  LaunchFor<false>(s, layout, kv, q, n_heads, scale, n_splits, ws_o, ws_ml, direct_out, DecodeAttentionFusion{});
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchAttentionDecodeFused(cudaStream_t s, DeviceLayout layout, KvCacheView kv, int32_t n_heads, float scale,
                                int32_t n_splits, float* ws_o, float* ws_ml, void* out, DecodeAttentionFusion f) {
  if (layout.n_tokens == 0) return;
  INFX_CHECK(out != nullptr && (n_splits == 1 || (ws_o != nullptr && ws_ml != nullptr && f.counter != nullptr)) &&
             n_heads / kv.n_kv_heads <= kRows && f.prep.head_dim == kv.head_dim && f.prep.n_tensors == 3 &&
             layout.max_seq_tokens == 1);
  INFX_CHECK(f.xq == nullptr || (AttentionDecodeRoundsOutput(kv.head_dim, n_heads) &&
                                 (f.xq_group == 16 || f.xq_group == 32) && f.xq_block >= 1 &&
                                 layout.n_tokens <= kQuantGemvWideMaxTokens));
  LaunchFor<true>(s, layout, kv, f.prep.t[0].x, n_heads, scale, n_splits, ws_o, ws_ml, out, f);
  INFX_CUDA_CHECK_LAUNCH();
}

void ConfigureAttentionDecodeMma(size_t max_smem_optin) {
  Configure<64, false>(max_smem_optin);
  Configure<128, false>(max_smem_optin);
  Configure<256, false>(max_smem_optin);
  Configure<64, true>(max_smem_optin);
  Configure<128, true>(max_smem_optin);
  Configure<256, true>(max_smem_optin);
}

}  // namespace infernix::cuda
