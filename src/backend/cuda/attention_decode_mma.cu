// Split-KV decode attention on tensor cores (mma.sync m16n8k16, bf16 in, f32 accumulation): the same
// contract as the CUDA-core split kernel (attention_decode.cu; kernels.h, LaunchAttentionSplit) for
// head_dim a multiple of 8 up to 256 and GQA groups of up to 16 query heads. A block owns one token, one
// KV head and one chunk of key positions (whole KV pages of 64 keys); the group's query heads are the
// 16 rows of the A operand (zero rows past the group), so K and V are read once per group. The pages
// stream through a ring of shared-memory buffers (cp.async; Stages below), so that while the block
// computes on one page the next ones are in flight: at long contexts the kernel is bound by the K/V
// bytes. Each of the 4 warps takes 16 keys of every page and keeps its own online softmax in registers;
// the warps' partial results are merged through shared memory at the end. The CUDA-core kernel computes
// every score with one lane per key and was bound by instruction issue at long contexts (~1.25 TB/s of
// K/V).
#include <cmath>

#include <algorithm>
#include <type_traits>

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

// Raw pages of an FP8 cache in flight (kF8 below): one, decoded into the bf16 buffer and then refilled with the
// next page while the buffer is computed on. At head_dim 256 that leaves room for two blocks per SM (107 KiB
// each), whose 8 warps share the decoding; with three raw pages and one block (4 warps), the decoding's
// instructions made Qwen3-Next's decode at 131,072 tokens slower than with the bf16 cache (issue-bound at 2.7
// cycles per instruction, DRAM at 23%: docs/performance.md).
constexpr int kRawStages = 1;

// An FP8 cache's page as staged (kF8 below): the K codes [kPageSize][D], the V codes, the K scales
// [kPageSize] and the V scales.
template <int D>
__host__ __device__ constexpr int RawPageBytes() {
  return 2 * kPageSize * D + 2 * kPageSize * static_cast<int>(sizeof(float));
}

// Q (kRows rows), then kStages buffers of K and V of one page (bf16; an FP8 cache: one such buffer, then
// kRawStages raw pages, each decoded into the buffer when its turn comes); after the pages, the bytes after Q
// hold the warps' partial results: o [kWarps][kRows][D] f32, then m and l [kWarps][kRows]. The fused
// kernel has a preparation area after all that (see the kernel).
template <int D>
__host__ __device__ constexpr size_t QBytes() {
  return size_t{kRows} * Stride<D>() * sizeof(bf16);
}
template <int D, bool kF8>
__host__ __device__ constexpr size_t SmemBytes() {
  const size_t buffer = size_t{2 * kPageSize} * Stride<D>() * sizeof(bf16);
  const size_t tiles = QBytes<D>() + (kF8 ? buffer + size_t{kRawStages} * RawPageBytes<D>() : buffer * Stages<D>());
  const size_t merge = QBytes<D>() + size_t{kWarps} * kRows * (D + 2) * sizeof(float);
  return tiles > merge ? tiles : merge;
}
template <int D, bool kF8>
__host__ __device__ constexpr size_t FusedSmemBytes() {
  return SmemBytes<D, kF8>() + size_t{kWarps + 3} * D * sizeof(float) + 2 * D * sizeof(bf16);
}

// kFused (DecodeAttentionFusion, kernels.h): q, k and v prepared here, the splits merged here. kF8: an FP8
// cache (kv_f8.cuh), whose pages are staged raw with cp.async and decoded into one bf16 buffer, so that
// the products are the bf16 cache's.
template <int D, bool kFused, bool kF8>
__global__ void __launch_bounds__(kThreads)
    DecodeMmaKernel(DeviceLayout layout, KvCacheView kv, const bf16* q, int n_heads, float scale_log2, int n_splits,
                    float* ws_o, float* ws_ml, bf16* direct_out, DecodeAttentionFusion f) {
  constexpr int kStride = Stride<D>();
  constexpr int kChunks = D / 8;  // 16-byte chunks per padded row
  AllowDependentLaunch();
  const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z, tid = threadIdx.x;
  const int hkv = kv.n_kv_heads, d = kv.head_dim, d_chunks = d / 8, group = n_heads / hkv;
  const int seq = layout.token_seq[t], slot = layout.seq_info[seq * 4], pos = layout.token_pos[t];
  // Whole pages per split; the splits past the context are empty. The fused kernel keeps a short context in
  // one split (DecodeAttentionFusion::one_split_pages).
  const int len = pos + 1, per_split = (len + n_splits - 1) / n_splits;
  const int len_pages = (len + kPageSize - 1) / kPageSize;
  const int chunk =
      (kFused && len_pages <= f.one_split_pages ? len_pages : (per_split + kPageSize - 1) / kPageSize) * kPageSize;
  const int begin = split * chunk, end = min(begin + chunk, len);
  const int64_t head0 = static_cast<int64_t>(t) * n_heads + static_cast<int64_t>(kvh) * group;
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
  constexpr int kBuffer = 2 * kPageSize * kStride;  // K then V of one page, bf16
  bf16* qs = reinterpret_cast<bf16*>(smem);
  bf16* pages = qs + kRows * kStride;
  const bf16* kpages = static_cast<const bf16*>(kv.k_pages);
  const bf16* vpages = static_cast<const bf16*>(kv.v_pages);
  const int first = begin / kPageSize, last = (end - 1) / kPageSize;  // the chunk's pages
  // FP8: page kb's codes and scales into raw page kb % kRawStages, 16 bytes per copy (zeros for the columns past
  // head_dim and the keys outside the chunk, whose scales the decoding replaces with 0), one cp.async group per page as
  // load_page; decode(kb) makes them the bf16 buffer's values.
  uint8_t* raw = reinterpret_cast<uint8_t*>(pages + kBuffer);
  constexpr int kCopies = D / 16;  // of 16 codes (head_dim % 16 == 0: AttentionDecodeMmaFits)
  auto load_raw = [&](int kb) {
    if (kb <= last) {
      uint8_t* rk = raw + (kb % kRawStages) * RawPageBytes<D>();
      const int page = kv.page_table[static_cast<int64_t>(slot) * kv.pages_per_slot + kb];
      const int64_t row0 = (static_cast<int64_t>(page) * hkv + kvh) * kPageSize;
      const uint8_t* kc = static_cast<const uint8_t*>(kv.k_pages) + row0 * d;
      const uint8_t* vc = static_cast<const uint8_t*>(kv.v_pages) + row0 * d;
      for (int i = tid; i < kPageSize * kCopies; i += kThreads) {
        const int r = i / kCopies, c = i - r * kCopies;
        const int key = kb * kPageSize + r;
        const bool valid = key >= begin && key < end && c < d / 16;
        const int64_t src = valid ? static_cast<int64_t>(r) * d + c * 16 : 0;
        CpAsync16Zfill(rk + r * D + c * 16, kc + src, valid);
        CpAsync16Zfill(rk + (kPageSize + r) * D + c * 16, vc + src, valid);
      }
      float* sc = reinterpret_cast<float*>(rk + 2 * kPageSize * D);
      for (int i = tid; i < kPageSize / 2; i += kThreads) {  // 4 rows' scales at a time, K's then V's
        const int which = i / (kPageSize / 4), r = (i - which * (kPageSize / 4)) * 4;
        CpAsync16(sc + which * kPageSize + r, (which == 0 ? kv.k_scale : kv.v_scale) + row0 + r);
      }
    }
    CpAsyncCommit();
  };
  auto decode = [&](int kb) {  // 16 codes at a time
    const uint8_t* rk = raw + (kb % kRawStages) * RawPageBytes<D>();
    const float* sc = reinterpret_cast<const float*>(rk + 2 * kPageSize * D);
    for (int i = tid; i < 2 * kPageSize * kCopies; i += kThreads) {
      const int row = i / kCopies, c = i - row * kCopies;  // rows: K's, then V's
      const int key = kb * kPageSize + row % kPageSize;
      const float scale = key >= begin && key < end ? sc[row] : 0.0f;
      const uint4 codes = *reinterpret_cast<const uint4*>(rk + row * D + c * 16);
      uint4* dst = reinterpret_cast<uint4*>(pages + row * kStride + c * 16);
      dst[0] = KvF8x8ToBf16(make_uint2(codes.x, codes.y), scale);
      dst[1] = KvF8x8ToBf16(make_uint2(codes.z, codes.w), scale);
    }
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
  // cos and sin at this token's position (f32), and the new key and value (bf16 [2][D]), which the block
  // whose chunk holds them prepares.
  const bool owner = kFused && pos < end;
  float* prep_rows = reinterpret_cast<float*>(smem + SmemBytes<D, kF8>());
  float* norm_w = prep_rows + kWarps * D;  // [2][D]: q's, k's
  float* rope_cs = norm_w + 2 * D;         // [D / 2]
  float* rope_sn = rope_cs + D / 2;        // [D / 2]
  bf16* knew = reinterpret_cast<bf16*>(rope_sn + D / 2);
  if constexpr (kFused) {
    // The keys before this token's were written by earlier forwards (each forward's batch layout is
    // copied in first, and a copy waits for everything before it), so their pages load before the wait;
    // the new key's row is patched in once prepared. The weights and RoPE's factors are ready before too.
    if constexpr (kF8) {
#pragma unroll
      for (int j = 0; j < kRawStages; ++j) load_raw(first + j);
    } else {
#pragma unroll
      for (int j = 0; j < (kStages > 1 ? kStages - 1 : 1); ++j) load_page(first + j);
    }
    const QkvPrep& p = f.prep;
    for (int i = tid; i < 2 * D; i += kThreads) {
      const HeadPrep& hp = p.t[i / D];
      norm_w[i] = hp.norm_w != nullptr && i % D < d ? LoadF(hp.norm_w, hp.w_dtype, i % D) : 0.0f;
    }
    for (int i = tid; i < p.half; i += kThreads) {
      float sn, cs;
      sincosf(static_cast<float>(pos) * p.inv_freq[i], &sn, &cs);
      rope_cs[i] = cs * p.rope_scale;
      rope_sn[i] = sn * p.rope_scale;
    }
    // Items: the group's query heads, then (the owner) the key and the value; a warp loads all of its
    // items' rows before it prepares them one by one, as PrepHeadRow would (the same bits).
    constexpr int kPer = D / 32, kMaxItems = (kRows + 2 + kWarps - 1) / kWarps;
    const int lane = tid & 31, warp = tid >> 5, items = group + (owner ? 2 : 0);
    auto row_of = [&](int it) {
      const int ti = it < group ? 0 : it - group + 1;
      return static_cast<bf16*>(p.t[ti].x) + (ti == 0 ? head0 + it : static_cast<int64_t>(t) * hkv + kvh) * d;
    };
    WaitForPrevious();  // q, k and v come from the kernel before
    float xv[kMaxItems][kPer];
#pragma unroll
    for (int j = 0; j < kMaxItems; ++j) {
      const int it = warp + j * kWarps;
      const bf16* x = it < items ? row_of(it) : nullptr;
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        const int i = lane + 32 * e;
        xv[j][e] = x != nullptr && i < d ? __bfloat162float(x[i]) : 0.0f;
      }
    }
    __syncthreads();  // the weights and factors
    float* row = prep_rows + warp * D;
#pragma unroll
    for (int j = 0; j < kMaxItems; ++j) {
      const int it = warp + j * kWarps;
      if (it >= items) break;
      const int ti = it < group ? 0 : it - group + 1;
      const HeadPrep& hp = p.t[ti];
      float ss = 0;
#pragma unroll
      for (int e = 0; e < kPer; ++e) ss += xv[j][e] * xv[j][e];
      const float inv = hp.norm_w != nullptr ? RmsInv(WarpSum(ss), d, hp.eps) : 0.0f;
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        const int i = lane + 32 * e;
        row[i] = hp.norm_w != nullptr && i < d ? RoundBf16(RmsScale(xv[j][e], inv, norm_w[ti * D + i], hp.w_offset))
                                               : xv[j][e];
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
        if (i < d && ti != 0 && PrepChangesRow(hp)) x[i] = v;
      }
      if (ti != 0 && hp.cache != 0)  // the new key or value as the cache holds it (FP8: decoded)
        StoreKvRow(
            kv, hp.cache, KvRowIndex(kv, slot, pos, kvh), [&](int i) { return row[i]; },
            [&](int i, float v) { dst[i] = __float2bfloat16_rn(v); }, lane);
      __syncwarp();  // the row is free for the warp's next item
    }
    for (int i = tid; i < (kRows - group) * D; i += kThreads)
      qs[(group + i / D) * kStride + i % D] = __float2bfloat16_rn(0.0f);
    __syncthreads();
  } else {
    for (int i = tid; i < kRows * kChunks; i += kThreads) {
      const int r = i / kChunks, c = i - r * kChunks;
      const bool valid = r < group && c < d_chunks;
      CpAsync16Zfill(qs + r * kStride + c * 8, q + (valid ? (head0 + r) * d + c * 8 : 0), valid);
    }
    if constexpr (kF8) {  // Q travels with the first page's group
#pragma unroll
      for (int j = 0; j < kRawStages; ++j) load_raw(first + j);
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
  for (int kb = first; kb <= last; ++kb) {
    if constexpr (kF8) {              // kRawStages raw pages in flight while the buffer is computed on
      CpAsyncWait<kRawStages - 1>();  // page kb has landed
      __syncthreads();                // for every thread; and every warp is done with the buffer
      decode(kb);
      __syncthreads();
      load_raw(kb + kRawStages);  // into the raw page just decoded
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
    bf16* ks = pages + (kF8 ? 0 : kb % kStages) * kBuffer;
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
    OnlineSoftmaxStep(s, o, m_run, l_run, scale_log2, [&](int nt, int e, bool) {
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
  float* po = reinterpret_cast<float*>(smem + QBytes<D>());  // [kWarps][kRows][D]
  float* pm = po + kWarps * kRows * D;         // [kWarps][kRows]: running max (base 2)
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
  float* pw = po + warp * kRows * D;
#pragma unroll
  for (int nd = 0; nd < D / 8; ++nd) {
    const int col = nd * 8 + 2 * t4;
    pw[g * D + col] = o[nd][0];
    pw[g * D + col + 1] = o[nd][1];
    pw[(g + 8) * D + col] = o[nd][2];
    pw[(g + 8) * D + col + 1] = o[nd][3];
  }
  __syncthreads();
  // Splits with keys: all of them for the fused kernel (it returned for the empty ones), so with one such
  // split the block writes the output itself.
  const int live = kFused ? (len + chunk - 1) / chunk : n_splits;
  bf16* out = kFused ? direct_out : nullptr;
  const bf16* gate = kFused ? static_cast<const bf16*>(f.gate) : nullptr;
  auto store_out = [&](int64_t i, float v) {
    out[i] = __float2bfloat16_rn(gate == nullptr ? v : RoundBf16(v) * SigmoidF(__bfloat162float(gate[i])));
  };
  for (int i = tid; i < group * d; i += kThreads) {
    const int r = i / d, c = i - r * d;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, pm[w * kRows + r]);  // finite: the chunk has a key
    float l = 0, acc = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float e = exp2f(pm[w * kRows + r] - m);  // 0 for a warp whose keys were all masked
      l += pl[w * kRows + r] * e;
      acc += po[(w * kRows + r) * D + c] * e;
    }
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
      for (int i = tid; i < group * d; i += kThreads) {
        const int r = i / d, c = i - r * d;
        const float* o = ws_o + (head0 + r) * n_splits * d + c;
        float acc = 0;
#pragma unroll 8
        for (int sp = 0; sp < live; ++sp) acc += wf[r * live + sp] * __ldcg(o + static_cast<int64_t>(sp) * d);
        store_out((head0 + r) * d + c, acc * wf[group * live + r]);
      }
    }
    // Every split has read q: the prepared rows go back in place.
    if (PrepChangesRow(f.prep.t[0])) {
      bf16* xq = static_cast<bf16*>(f.prep.t[0].x);
      for (int i = tid; i < group * d; i += kThreads) {
        const int r = i / d, c = i - r * d;
        xq[(head0 + r) * d + c] = qs[r * kStride + c];
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
