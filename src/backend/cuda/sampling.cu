// Sampling-side reductions over f32 logit rows: greedy picks (pick.h's PickGreedyRows on the device, each
// row split over kGreedySplits blocks), top-k draws (pick.h's PickRows: base/token_draw.h's DrawToken to the
// bit, each row split over kDrawSplits blocks), and, one block per row, the top-k candidates (descending,
// ties to the lower index) and logsumexp for log-probabilities. Ties always go to the lower index, as
// torch.argmax does.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "backend/cuda/device_util.cuh"

namespace infernix::cuda {
namespace {

constexpr int kThreads = 256;

struct Best {
  float v;
  int i;
};

__device__ __forceinline__ Best Better(Best a, Best b) {
  // NaN never wins; equal values go to the lower index.
  if (isnan(b.v)) return a;
  if (isnan(a.v)) return b;
  if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
  return a;
}

__device__ __forceinline__ Best BlockBest(Best b, Best* shared) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    Best o{__shfl_xor_sync(0xffffffffu, b.v, off), __shfl_xor_sync(0xffffffffu, b.i, off)};
    b = Better(b, o);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) shared[warp] = b;
  __syncthreads();
  Best r = shared[0];
  for (int w = 1; w < kThreads / 32; ++w) r = Better(r, shared[w]);
  return r;
}

// Block (row, part) of a greedy pick: the best (value, index) among the part's share of the row's first
// `sampleable` values and whether one of them is NaN or +inf, into parts[row * kGreedySplits + part]; the
// last block of the row to arrive combines the parts (Better orders (value, index) totally, so the order
// of arrival does not matter) into ids[row]: the index, or -1 (a NaN or +inf, or only -inf).
__global__ void __launch_bounds__(kThreads)
    GreedyKernel(const float* logits, int64_t cols, int64_t sampleable, GreedyPart* parts, int32_t* counters,
                 int32_t* ids) {
  __shared__ Best shared[kThreads / 32];
  const int row = static_cast<int>(blockIdx.x) / kGreedySplits, part = static_cast<int>(blockIdx.x) % kGreedySplits;
  const float* l = logits + static_cast<int64_t>(row) * cols;
  const int64_t per = (sampleable + kGreedySplits - 1) / kGreedySplits;
  const int64_t begin = part * per, end = min(sampleable, begin + per);
  Best b{-INFINITY, INT32_MAX};
  bool bad = false;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float v = __ldg(l + i);
    bad |= isnan(v) || v == INFINITY;
    if (v > b.v) b = Best{v, static_cast<int>(i)};  // strict, i rising: this thread's lowest index
  }
  bad = __syncthreads_or(bad) != 0;
  b = BlockBest(b, shared);
  if (threadIdx.x == 0) parts[blockIdx.x] = GreedyPart{b.v, b.i, bad ? 1 : 0};
  if (!LastBlockToArrive(counters + row, kGreedySplits)) return;
  if (threadIdx.x >= 32) return;
  static_assert(kGreedySplits == 32, "a lane per part");
  const GreedyPart* p = parts + row * kGreedySplits + threadIdx.x;  // other blocks' writes: through L2
  Best c{__ldcg(&p->v), __ldcg(&p->i)};
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    Best o{__shfl_xor_sync(0xffffffffu, c.v, off), __shfl_xor_sync(0xffffffffu, c.i, off)};
    c = Better(c, o);
  }
  const bool any_bad = __any_sync(0xffffffffu, __ldcg(&p->bad) != 0);
  if (threadIdx.x == 0) ids[row] = any_bad || c.i == INT32_MAX ? -1 : c.i;
}

// k rounds of a block argmax, each excluding what earlier rounds took (a strict order on (value, index)).
__global__ void __launch_bounds__(kThreads)
    TopKKernel(const float* logits, int64_t cols, int k, float* values, int32_t* ids) {
  __shared__ Best shared[kThreads / 32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * cols;
  Best prev{INFINITY, -1};  // everything strictly "after" prev in the order is still available
  for (int j = 0; j < k; ++j) {
    Best b{-INFINITY, INT32_MAX};
    for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
      float v = row[i];
      bool after = v < prev.v || (v == prev.v && static_cast<int>(i) > prev.i);
      if (after && !isnan(v)) b = Better(b, Best{v, static_cast<int>(i)});
    }
    b = BlockBest(b, shared);
    if (threadIdx.x == 0) {
      values[static_cast<int64_t>(blockIdx.x) * k + j] = b.v;
      ids[static_cast<int64_t>(blockIdx.x) * k + j] = b.i == INT32_MAX ? -1 : b.i;
    }
    prev = b;
  }
}

__global__ void __launch_bounds__(kThreads) LogSumExpKernel(const float* logits, int64_t cols, float* out) {
  __shared__ float shared[32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * cols;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) mx = fmaxf(mx, row[i]);
  mx = WarpMax(mx);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) shared[threadIdx.x >> 5] = mx;
  __syncthreads();
  mx = shared[0];
  for (int w = 1; w < kThreads / 32; ++w) mx = fmaxf(mx, shared[w]);
  float sum = 0;
  if (mx != -INFINITY)
    for (int64_t i = threadIdx.x; i < cols; i += kThreads) sum += expf(row[i] - mx);
  sum = BlockSum(sum, shared);
  if (threadIdx.x == 0) out[blockIdx.x] = mx == -INFINITY ? -INFINITY : mx + logf(sum);
}

// ---- top-k draws ----

// Logits as unsigned keys in the same order (-0 as +0: equal logits, ranked by id); 0 for -inf and NaN,
// which are never candidates.
__device__ __forceinline__ uint32_t OrderedKey(float v) {
  if (isnan(v) || v == -INFINITY) return 0;
  const uint32_t u = v == 0.0f ? 0u : __float_as_uint(v);
  return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float KeyValue(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) != 0 ? (key & 0x7fffffffu) : ~key);
}

// Exclusive prefix sum of v over the block's threads in thread order; *total gets the sum. Every thread
// calls it. shared: kThreads / 32 + 1 ints.
__device__ __forceinline__ int BlockExclusiveScan(int v, int* shared, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int inclusive = WarpInclusiveSum(v);
  __syncthreads();
  if (lane == 31) shared[warp] = inclusive;
  __syncthreads();
  if (threadIdx.x == 0) {
    int running = 0;
    for (int w = 0; w < kThreads / 32; ++w) {
      const int t = shared[w];
      shared[w] = running;
      running += t;
    }
    shared[kThreads / 32] = running;
  }
  __syncthreads();
  *total = shared[kThreads / 32];
  return shared[warp] + inclusive - v;
}

// The k largest of n keys (key(i), i < n; zeros are empty), found by 8-bit digits from the top: the keys
// above `threshold` (`above` of them) and `equal` of the `ties` keys equal to it. With fewer than k nonzero
// keys, threshold 0 and `above` their count. Every thread calls it. hist: 256 ints of shared memory; shared: 3.
struct KeySelect {
  uint32_t threshold;
  int above, equal, ties;
};
template <typename Key>
__device__ KeySelect SelectKeys(Key key, int n, int k, int* hist, int* shared) {
  const int lane = threadIdx.x & 31;
  uint32_t prefix = 0, mask = 0;
  int remaining = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kThreads) hist[b] = 0;
    __syncthreads();
    for (int base = 0; base < n; base += kThreads) {  // a uniform trip count: whole warps match
      const int i = base + static_cast<int>(threadIdx.x);
      const uint32_t kk = i < n ? key(i) : 0u;
      const bool take = kk != 0 && (kk & mask) == prefix;
      const int bin = take ? static_cast<int>((kk >> shift) & 255u) : 256;
      const unsigned peers = __match_any_sync(0xffffffffu, bin);
      if (take && lane == __ffs(peers) - 1) atomicAdd(&hist[bin], __popc(peers));
    }
    __syncthreads();
    if (threadIdx.x < 32) {  // lane l: bins 255 - 8l down to 248 - 8l
      int c[8], sum = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) sum += c[j] = hist[255 - 8 * lane - j];
      const int inclusive = WarpInclusiveSum(sum);
      const unsigned crossing = __ballot_sync(0xffffffffu, inclusive >= remaining);
      if (crossing == 0) {
        if (lane == 31) shared[0] = -1, shared[1] = inclusive;  // fewer than `remaining` keys match
      } else if (lane == __ffs(crossing) - 1) {
        int acc = inclusive - sum;
        for (int j = 0; j < 8; ++j) {
          if (acc + c[j] >= remaining) {
            shared[0] = 255 - 8 * lane - j;
            shared[1] = acc;
            shared[2] = c[j];
            break;
          }
          acc += c[j];
        }
      }
    }
    __syncthreads();
    const int digit = shared[0], before = shared[1], in_bin = shared[2];
    __syncthreads();
    if (digit < 0) return KeySelect{0, before, 0, 0};  // only at the first digit: every nonzero key is taken
    prefix |= static_cast<uint32_t>(digit) << shift;
    mask |= 255u << shift;
    remaining -= before;
    if (shift == 0) return KeySelect{prefix, k - remaining, remaining, in_bin};
  }
  return KeySelect{};
}

// ExpInPlace of base/token_draw.cpp: the same operations, each rounded (no fused multiply-adds).
__device__ __forceinline__ float DrawExp(float x) {
  const bool underflow = x < -87.0f;
  if (underflow) x = -87.0f;
  const float magic = 12582912.0f;
  const float t = __fadd_rn(__fmul_rn(x, 1.44269504f), magic);
  const float n = __fsub_rn(t, magic);
  float r = __fsub_rn(x, __fmul_rn(n, 0.693359375f));
  r = __fsub_rn(r, __fmul_rn(n, -2.12194440e-4f));
  float p = 1.0f / 5040.0f;
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 720.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 120.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 24.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 6.0f);
  p = __fadd_rn(__fmul_rn(p, r), 0.5f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f);
  const int e = (__float_as_int(t) - __float_as_int(magic) + 127) << 23;
  const float v = __fmul_rn(p, __int_as_float(e));
  return underflow ? 0.0f : v;
}

// base/token_draw.cpp's top-p bucket of a weight.
__device__ __forceinline__ uint32_t NucleusBucket(float w) {
  constexpr uint32_t kBuckets = (0x3F800000u >> 19) + 1;
  return min(__float_as_uint(w) >> 19, kBuckets - 1);
}

// The draw over a row's top-k candidates: n of them in ascending id order (logit, id, weight), padded with
// weight-0 entries to a multiple of 4; best[r] is the position of the r-th best and bucket[j] candidate j's
// top-p bucket (NucleusBucket); the n_buckets distinct buckets, highest first, with their masses (each the
// sum of its candidates' weights in id order), in top_bucket and top_mass. DrawToken's top-k branch
// (ComputeWeights, NucleusBoundary, DrawFromSet and its InverseCdf) operation for operation, on one thread.
__device__ int32_t DrawFromCandidates(const float* logit, const int32_t* id, const float* w, const int* best,
                                      const uint32_t* bucket, const uint32_t* top_bucket, const double* top_mass,
                                      int n_buckets, int n, const DrawRow& d) {
  const int n4 = (n + 3) & ~3;
  // ComputeWeights: BlockExpSum's lanes (8, folded to 4, then a 4-entry tail), one block.
  float acc8[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n4; i += 8)
    for (int l = 0; l < 8; ++l) acc8[l] = __fadd_rn(acc8[l], w[i + l]);
  float acc4[4];
  for (int l = 0; l < 4; ++l) acc4[l] = __fadd_rn(acc8[l], acc8[l + 4]);
  for (; i < n4; i += 4)
    for (int l = 0; l < 4; ++l) acc4[l] = __fadd_rn(acc4[l], w[i + l]);
  const float weights = __fadd_rn(__fadd_rn(acc4[0], acc4[1]), __fadd_rn(acc4[2], acc4[3]));
  const double reference = __dadd_rn(0.0, static_cast<double>(weights));
  float bound_logit = -INFINITY;
  int32_t bound_id = INT32_MAX;
  if (d.top_p < 1.0) {
    // NucleusBoundary: the bucket masses from the highest bucket down until one crosses the target, then
    // that bucket's candidates best first.
    const double target = __dmul_rn(__dmul_rn(d.top_p, reference), 1 - 1e-6);
    double above = 0;
    for (int b = 0; b < n_buckets; ++b) {
      if (__dadd_rn(above, top_mass[b]) >= target) {
        int last = -1;
        for (int r = 0; r < n; ++r) {
          if (bucket[best[r]] != top_bucket[b]) continue;
          last = best[r];
          above = __dadd_rn(above, static_cast<double>(w[last]));
          if (above >= target) break;
        }
        bound_logit = logit[last];
        bound_id = id[last];
        break;
      }
      above = __dadd_rn(above, top_mass[b]);
    }
  }
  // DrawFromSet: the kept weights' sum (4 lanes), then the walk in id order.
  auto kept = [&](int j) {
    const bool keep =
        w[j] > 0 && w[j] >= d.min_weight && (logit[j] > bound_logit || (logit[j] == bound_logit && id[j] <= bound_id));
    return keep ? w[j] : 0.0f;
  };
  float lanes[4] = {0, 0, 0, 0};
  for (int j = 0; j < n4; j += 4)
    for (int l = 0; l < 4; ++l) lanes[l] = __fadd_rn(lanes[l], kept(j + l));
  const float block = __fadd_rn(__fadd_rn(lanes[0], lanes[1]), __fadd_rn(lanes[2], lanes[3]));
  const double target = __dmul_rn(d.u, __dadd_rn(0.0, static_cast<double>(block)));
  double cum = 0;
  if (__dadd_rn(cum, static_cast<double>(block)) <= target) {  // rounding: the last kept candidate
    for (int j = n4; j-- > 0;)
      if (kept(j) > 0) return id[j];
    return -1;
  }
  int32_t last = -1;
  for (int j = 0; j < n4; ++j) {
    const float kj = kept(j);
    if (kj <= 0) continue;
    last = id[j];
    cum = __dadd_rn(cum, static_cast<double>(kj));
    if (cum > target) break;
  }
  return last;
}

// Block (row, part) of a draw: its top_k best candidates (higher logit first, ties to the lower index) among
// the part's share of the row's first `sampleable` values, into its part of `parts` (a count, or -1 where a
// value is NaN or +inf; its best key; then (key, index) pairs). The last block of the row to arrive
// takes the row's top_k best from the parts (those at or above the k-th largest of the parts' best keys;
// ranked directly where they are few, else by a radix select) and draws (DrawFromCandidates) into ids[row],
// or -1 (NaN or +inf, or only -inf).
// Dynamic shared memory: DrawSharedBytes(the part's length), the part's keys, and then the row's candidates.
__global__ void __launch_bounds__(kThreads)
    DrawKernel(const float* logits, int64_t cols, int64_t sampleable, const DrawRow* draws, int32_t* parts,
               int32_t* counters, int32_t* ids) {
  extern __shared__ uint32_t slice[];  // the part's keys; in the combining block, the row's candidates
  __shared__ int hist[256];
  __shared__ int scan[kThreads / 32 + 1];
  __shared__ int picked[3];
  __shared__ uint32_t win_key[kDrawMaxTopK];
  __shared__ int32_t win_index[kDrawMaxTopK];
  __shared__ float set_logit[kDrawMaxTopK], set_w[kDrawMaxTopK];
  __shared__ int32_t set_id[kDrawMaxTopK];
  __shared__ int set_best[kDrawMaxTopK];
  __shared__ uint32_t set_bucket[kDrawMaxTopK], top_bucket[kDrawMaxTopK];
  __shared__ double set_mass[kDrawMaxTopK], top_mass[kDrawMaxTopK];
  __shared__ bool set_first[kDrawMaxTopK];
  const int row = static_cast<int>(blockIdx.x) / kDrawSplits, part = static_cast<int>(blockIdx.x) % kDrawSplits;
  const DrawRow d = draws[row];
  const int k = d.top_k;
  const float* l = logits + static_cast<int64_t>(row) * cols;
  const int64_t per = (sampleable + kDrawSplits - 1) / kDrawSplits;
  const int64_t begin = part * per;
  const int n = static_cast<int>(max(int64_t{0}, min(sampleable, begin + per) - begin));
  int32_t* out = parts + (static_cast<int64_t>(row) * kDrawSplits + part) * kDrawPartWords;

  bool bad = false;
  uint32_t best_key = 0;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float v = __ldg(l + begin + i);
    bad |= isnan(v) || v == INFINITY;
    slice[i] = OrderedKey(v);
    best_key = max(best_key, slice[i]);
  }
  if (threadIdx.x == 0) picked[0] = 0;
  __syncthreads();
  best_key = __reduce_max_sync(0xffffffffu, best_key);
  if ((threadIdx.x & 31) == 0) atomicMax(reinterpret_cast<unsigned*>(&picked[0]), best_key);
  bad = __syncthreads_or(bad) != 0;
  if (threadIdx.x == 0) out[1] = picked[0];
  if (!bad) {
    const KeySelect sel = SelectKeys([&](int i) { return slice[i]; }, n, k, hist, picked);
    // Each thread's contiguous run of the part, in index order: the keys above the threshold, then the
    // first `equal` keys equal to it.
    const int run = (n + kThreads - 1) / kThreads;
    const int from = min(n, static_cast<int>(threadIdx.x) * run), to = min(n, from + run);
    const bool ties = sel.threshold != 0;
    int above = 0, equal = 0;
    for (int i = from; i < to; ++i) {
      above += slice[i] > sel.threshold;
      equal += ties && slice[i] == sel.threshold;
    }
    int total = 0;
    const int packed = BlockExclusiveScan((above << 16) | equal, scan, &total);
    int at_above = packed >> 16, at_equal = packed & 0xffff;
    for (int i = from; i < to; ++i) {
      const uint32_t kk = slice[i];
      int at = -1;
      if (kk > sel.threshold) {
        at = at_above++;
      } else if (ties && kk == sel.threshold) {
        if (at_equal < sel.equal) at = sel.above + at_equal;
        ++at_equal;
      }
      if (at >= 0) {
        out[2 + 2 * at] = static_cast<int32_t>(kk);
        out[3 + 2 * at] = static_cast<int32_t>(begin + i);
      }
    }
    if (threadIdx.x == 0) out[0] = sel.above + sel.equal;
  } else if (threadIdx.x == 0) {
    out[0] = -1;
  }
  __threadfence();  // this block's writes before its arrival, for the block that combines
  if (!LastBlockToArrive(counters + row, kDrawSplits)) return;

  // The row's candidates (other blocks' writes: through L2). The k-th largest of the parts' best keys bounds
  // the row's k-th key from below (k parts hold a key at or above it), so only the candidates at or above it
  // are gathered (in no order: they are ranked below).
  uint32_t* keys = slice;
  auto* index = reinterpret_cast<int32_t*>(slice + kDrawSplits * kDrawMaxTopK);
  __shared__ int part_count[kDrawSplits];
  __shared__ uint32_t part_best[kDrawSplits];
  __shared__ uint32_t bound;
  __shared__ int gathered;
  const int32_t* row_parts = parts + static_cast<int64_t>(row) * kDrawSplits * kDrawPartWords;
  const int t = static_cast<int>(threadIdx.x);
  bool any_bad = false;
  if (t < kDrawSplits) {
    part_count[t] = __ldcg(row_parts + t * kDrawPartWords);
    part_best[t] = static_cast<uint32_t>(__ldcg(row_parts + t * kDrawPartWords + 1));
    any_bad = part_count[t] < 0;
  }
  if (t == 0) bound = 0, gathered = 0;
  if (__syncthreads_or(any_bad) != 0) {
    if (t == 0) ids[row] = -1;
    return;
  }
  if (t < kDrawSplits) {  // the part whose best key is the k-th largest of them (ties: by part) sets the bound
    int above = 0;
    for (int o = 0; o < kDrawSplits; ++o)
      above += part_best[o] > part_best[t] || (part_best[o] == part_best[t] && o < t);
    if (above == k - 1) bound = part_best[t];
  }
  __syncthreads();
  const int m = kDrawSplits * k;
  for (int j = t; j < m; j += kThreads) {
    const int p = j / k, e = j % k;
    if (e >= part_count[p]) continue;
    const int2 pair = __ldcg(reinterpret_cast<const int2*>(row_parts + p * kDrawPartWords + 2) + e);
    if (static_cast<uint32_t>(pair.x) < bound) continue;
    const int at = atomicAdd(&gathered, 1);
    keys[at] = static_cast<uint32_t>(pair.x);
    index[at] = pair.y;
  }
  __syncthreads();
  const int c = gathered;
  int count = 0;  // the winners: the row's top_k (fewer where it has fewer finite values)
  if (c <= kThreads) {  // few: each ranks itself among them
    if (t < c) {
      int better = 0;
      for (int o = 0; o < c; ++o) better += keys[o] > keys[t] || (keys[o] == keys[t] && index[o] < index[t]);
      if (better < k) {
        win_key[better] = keys[t];
        win_index[better] = index[t];
      }
    }
    count = min(c, k);
  } else {  // many (ties): a radix select, then the tied keys of lowest index
    const KeySelect sel = SelectKeys([&](int i) { return keys[i]; }, c, k, hist, picked);
    const bool ties = sel.threshold != 0, rank_ties = ties && sel.ties > sel.equal;
    for (int base = 0; base < c; base += kThreads) {
      const int i = base + t;
      bool win = false;
      if (i < c) {
        const uint32_t kk = keys[i];
        if (kk > sel.threshold) {
          win = true;
        } else if (ties && kk == sel.threshold) {
          int rank = 0;
          for (int j = 0; rank_ties && j < c; ++j) rank += keys[j] == kk && index[j] < index[i];
          win = rank < sel.equal;
        }
      }
      int total = 0;
      const int at = count + BlockExclusiveScan(win ? 1 : 0, scan, &total);
      if (win) {
        win_key[at] = keys[i];
        win_index[at] = index[i];
      }
      count += total;
    }
  }
  __syncthreads();
  // Each winner's place best first and in id order.
  const int n4 = (count + 3) & ~3;
  if (static_cast<int>(threadIdx.x) < count) {
    const uint32_t kj = win_key[threadIdx.x];
    const int32_t ij = win_index[threadIdx.x];
    int better = 0, lower = 0;
    for (int o = 0; o < count; ++o) {
      better += win_key[o] > kj || (win_key[o] == kj && win_index[o] < ij);
      lower += win_index[o] < ij;
    }
    set_logit[lower] = KeyValue(kj);
    set_id[lower] = ij;
    set_best[better] = lower;
  } else if (static_cast<int>(threadIdx.x) < n4) {
    set_logit[threadIdx.x] = -INFINITY;
    set_id[threadIdx.x] = INT32_MAX;
  }
  __syncthreads();
  if (count == 0) {
    if (threadIdx.x == 0) ids[row] = -1;  // only -inf
    return;
  }
  const float max_logit = set_logit[set_best[0]];
  if (static_cast<int>(threadIdx.x) < n4) {
    const float w = DrawExp(__fmul_rn(__fsub_rn(set_logit[threadIdx.x], max_logit), d.inv_temp));
    set_w[threadIdx.x] = w;
    set_bucket[threadIdx.x] = NucleusBucket(w);
  }
  __syncthreads();
  // The distinct buckets highest first with their masses: each bucket's mass (in id order) by its first
  // candidate, placed after the buckets above it.
  if (t < count) {
    double mass = 0;
    bool first = true;
    for (int j = 0; j < count; ++j) {
      if (set_bucket[j] != set_bucket[t]) continue;
      mass = __dadd_rn(mass, static_cast<double>(set_w[j]));
      first &= j >= t;
    }
    set_mass[t] = mass;
    set_first[t] = first;
  }
  __syncthreads();
  int n_buckets = 0;
  for (int j = 0; j < count; ++j) n_buckets += set_first[j];
  if (t < count && set_first[t]) {
    int place = 0;
    for (int j = 0; j < count; ++j) place += set_first[j] && set_bucket[j] > set_bucket[t];
    top_bucket[place] = set_bucket[t];
    top_mass[place] = set_mass[t];
  }
  __syncthreads();
  if (t == 0)
    ids[row] =
        DrawFromCandidates(set_logit, set_id, set_w, set_best, set_bucket, top_bucket, top_mass, n_buckets, count, d);
}

// The dynamic shared memory of a DrawKernel block: a part's keys, or the row's candidates (keys and indices).
size_t DrawSharedBytes(int64_t sampleable) {
  const int64_t per = (sampleable + kDrawSplits - 1) / kDrawSplits;
  return static_cast<size_t>(std::max<int64_t>(per, 2 * kDrawSplits * kDrawMaxTopK)) * sizeof(uint32_t);
}

__global__ void FeedTokensKernel(const int32_t* picks, const int32_t* rows, int64_t n, int32_t* ids) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    ids[i] = max(picks[rows[i]], 0);
}

}  // namespace

void LaunchFeedTokens(cudaStream_t s, const int32_t* picks, const int32_t* rows, int64_t n, int32_t* ids) {
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 64);
  FeedTokensKernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(picks, rows, n, ids);
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchGreedyRows(cudaStream_t s, const float* logits, int64_t rows, int64_t cols, int64_t sampleable,
                      GreedyPart* parts, int32_t* counters, int32_t* ids) {
  if (rows == 0) return;
  INFX_CHECK(sampleable >= 1 && sampleable <= cols && rows <= kGreedyMaxRows);
  GreedyKernel<<<static_cast<unsigned>(rows * kGreedySplits), kThreads, 0, s>>>(logits, cols, sampleable, parts,
                                                                                  counters, ids);
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchDrawRows(cudaStream_t s, const float* logits, int64_t rows, int64_t cols, int64_t sampleable,
                    const DrawRow* draws, int32_t* parts, int32_t* counters, int32_t* ids) {
  if (rows == 0) return;
  INFX_CHECK(sampleable >= 1 && sampleable <= cols && rows <= kGreedyMaxRows);
  const size_t shared = DrawSharedBytes(sampleable);
  INFX_CHECK_MSG(shared <= kDrawMaxSharedBytes, "draws over {} ids (the CUDA draw kernel takes up to {})", sampleable,
                 kDrawMaxSampleable);
  if (shared > 48 * 1024)
    INFX_CUDA_CHECK(cudaFuncSetAttribute(DrawKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kDrawMaxSharedBytes)));
  DrawKernel<<<static_cast<unsigned>(rows * kDrawSplits), kThreads, shared, s>>>(logits, cols, sampleable, draws, parts,
                                                                                 counters, ids);
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchTopKRows(cudaStream_t s, const float* logits, int64_t rows, int64_t cols, int32_t k, float* values,
                    int32_t* ids) {
  if (rows == 0 || k == 0) return;
  TopKKernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(logits, cols, k, values, ids);
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchLogSumExpRows(cudaStream_t s, const float* logits, int64_t rows, int64_t cols, float* out) {
  if (rows == 0) return;
  LogSumExpKernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(logits, cols, out);
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
