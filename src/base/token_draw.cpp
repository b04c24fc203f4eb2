#include "base/token_draw.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "base/check.h"
#include "base/simd4.h"

namespace infernix {

using draw_detail::Candidate;
using draw_detail::CandidateSet;

namespace {

constexpr double kBoundaryTolerance = kDrawBoundaryTolerance;
constexpr int64_t kBlock = 256;  // sums accumulate f32 lanes per block, blocks in f64
constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- 4-lane kernels (base/simd4.h) ----

using simd4::AnyLane, simd4::Broadcast, simd4::F4, simd4::I4, simd4::LaneSum, simd4::Load4, simd4::LoadI4,
    simd4::Select, simd4::Store4, simd4::U4;

// 8 lanes for the exp sums: one AVX2 register where the CPU has it (a clone of BlockExpSum picked
// at load time on x86-64), two 4-lane registers elsewhere.
typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));

// x <- exp(x) for x <= 0 (including -inf), to a few ulp: x = n ln2 + r with |r| <= ln2/2 (ln2 split
// in a 9-bit head, so n * head is exact, and a tail), exp(r) by its degree-7 Taylor polynomial
// (truncation error < 6e-9), times 2^n built in the exponent bits. Below -87 the result is 0. The
// AVX2 clone has no FMA, so both x86-64 clones compute the same bits. (Arguments by reference:
// 32-byte vectors by value would depend on the AVX calling convention.)
template <typename F, typename I>
[[gnu::always_inline]] inline void ExpInPlace(F& x) {
  const I underflow = x < -87.0f;
  x = reinterpret_cast<F>((underflow & reinterpret_cast<I>(F{} - 87.0f)) | (~underflow & reinterpret_cast<I>(x)));
  const float round_magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const F t = x * 1.44269504f + round_magic;
  const F n = t - round_magic;
  F r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  F p = F{} + 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const I exponent = (reinterpret_cast<I>(t) - reinterpret_cast<I>(F{} + round_magic) + 127) << 23;
  x = reinterpret_cast<F>(reinterpret_cast<I>(p * reinterpret_cast<F>(exponent)) & ~underflow);
}

// Sum of exp((x[i] - m) * s) over n <= kBlock values (f32 lanes); stores each term in out if non-null.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx2", "default")))
#endif
float BlockExpSum(const float* x, int64_t n, float m, float s, float* out) {
  F8 acc = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    F8 v;
    std::memcpy(&v, x + i, sizeof v);
    v = (v - m) * s;
    ExpInPlace<F8, I8>(v);
    if (out != nullptr) std::memcpy(out + i, &v, sizeof v);
    acc += v;
  }
  F4 acc4 = F4{acc[0], acc[1], acc[2], acc[3]} + F4{acc[4], acc[5], acc[6], acc[7]};
  for (; i < n; i += 4) {
    float tail[4] = {-kInf, -kInf, -kInf, -kInf};
    const int64_t count = std::min<int64_t>(4, n - i);
    std::memcpy(tail, x + i, static_cast<size_t>(count) * sizeof(float));
    F4 v = (Load4(tail) - m) * s;
    ExpInPlace<F4, I4>(v);
    if (out != nullptr)
      for (int64_t j = 0; j < count; ++j) out[i + j] = v[j];
    acc4 += v;
  }
  return LaneSum(acc4);
}

// ---- Candidates ----

// Candidate order: higher logit first, then lower id. A strict total order, so every "top" set is unique.
struct BetterFn {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
};
constexpr BetterFn Better;

void Reserve(CandidateSet& set, size_t capacity) {
  if (set.logit.size() >= capacity) return;
  capacity = std::max(capacity, 2 * set.logit.size());
  set.logit.resize(capacity);
  set.weight.resize(capacity);
  set.id.resize(capacity);
}

// Ends a set of `count` entries: pads it to a multiple of 4 with weight-0 entries.
void Finish(CandidateSet& set, size_t count) {
  const size_t padded = (count + 3) & ~size_t{3};
  Reserve(set, padded);
  for (size_t i = count; i < padded; ++i) {
    set.logit[i] = -kInf;
    set.id[i] = std::numeric_limits<int32_t>::max();
  }
  set.size = count;
}

// Every token with logit >= min_logit, in ascending id order.
void GatherAbove(std::span<const float> logits, float min_logit, CandidateSet& set) {
  const int64_t n = static_cast<int64_t>(logits.size());
  size_t count = 0;
  auto take = [&](int64_t j) {  // branch-free: write, then keep it or not
    set.logit[count] = logits[j];
    set.id[count] = static_cast<int32_t>(j);
    count += logits[j] >= min_logit;
  };
  const F4 t = Broadcast(min_logit);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const float* p = logits.data() + i;
    if (!AnyLane((Load4(p) >= t) | (Load4(p + 4) >= t) | (Load4(p + 8) >= t) | (Load4(p + 12) >= t))) continue;
    Reserve(set, count + 16);
    for (int64_t j = i; j < i + 16; ++j) take(j);
  }
  Reserve(set, count + 16);
  for (; i < n; ++i) take(i);
  Finish(set, count);
}

// The weights of a finished set; returns their sum.
double ComputeWeights(CandidateSet& set, float max_logit, float inv_temp) {
  double total = 0;
  const int64_t n = static_cast<int64_t>(set.size + 3) & ~int64_t{3};
  for (int64_t b = 0; b < n; b += kBlock)
    total += BlockExpSum(set.logit.data() + b, std::min(kBlock, n - b), max_logit, inv_temp, set.weight.data() + b);
  return total;
}

// The top-p boundary: the worst candidate of the smallest best-first set whose weight reaches
// `target`, or nullopt when all of them together do not (rounding). Buckets the weights by their
// f32 bits (exponent and 4 mantissa bits, monotonic in the weight and so in the logit), finds the
// bucket where the running weight crosses `target`, and sorts only that bucket.
std::optional<Candidate> NucleusBoundary(const CandidateSet& set, double target, std::vector<double>& mass,
                                         std::vector<Candidate>& work) {
  constexpr int kShift = 19;
  constexpr uint32_t kBuckets = (0x3F800000u >> kShift) + 1;  // weights are in [0, 1]
  auto bucket = [](float w) {
    uint32_t bits;
    std::memcpy(&bits, &w, sizeof bits);
    return std::min(bits >> kShift, kBuckets - 1);
  };
  mass.assign(kBuckets, 0.0);
  for (size_t i = 0; i < set.size; ++i) mass[bucket(set.weight[i])] += set.weight[i];
  double above = 0;
  uint32_t crossing = kBuckets;
  for (uint32_t b = kBuckets; b-- > 0;) {
    if (above + mass[b] >= target) {
      crossing = b;
      break;
    }
    above += mass[b];
  }
  if (crossing == kBuckets) return std::nullopt;
  work.clear();
  for (size_t i = 0; i < set.size; ++i)
    if (bucket(set.weight[i]) == crossing) work.push_back({set.logit[i], set.id[i], set.weight[i]});
  std::sort(work.begin(), work.end(), Better);
  for (const Candidate& c : work) {
    above += c.weight;
    if (above >= target) return c;
  }
  return work.back();  // rounding between the bucket's sum and this walk
}

// Which candidates survive min-p and top-p: positive weight, weight >= min_weight, and not worse
// than the top-p boundary (bound_logit, bound_id).
struct KeepRule {
  float min_weight = 0;
  float bound_logit = -kInf;
  int32_t bound_id = std::numeric_limits<int32_t>::max();
};

// Sum of the kept weights of entries [begin, begin + n) (n a multiple of 4, at most kBlock); stores
// each kept weight, 0 for the others, in out if non-null. Branch-free: kept ids are scattered.
float KeptBlockSum(const CandidateSet& set, size_t begin, size_t n, const KeepRule& rule, float* out) {
  F4 acc = {};
  const F4 min_weight = Broadcast(rule.min_weight), bound = Broadcast(rule.bound_logit), zero = {};
  const I4 bound_id = {rule.bound_id, rule.bound_id, rule.bound_id, rule.bound_id};
  for (size_t i = 0; i < n; i += 4) {
    const F4 w = Load4(set.weight.data() + begin + i);
    const F4 l = Load4(set.logit.data() + begin + i);
    const I4 id = LoadI4(set.id.data() + begin + i);
    const I4 keep = (w > zero) & (w >= min_weight) & ((l > bound) | ((l == bound) & (id <= bound_id)));
    const F4 kept = Select(keep, w, zero);
    if (out != nullptr) Store4(out + i, kept);
    acc += kept;
  }
  return LaneSum(acc);
}

// Inverse CDF over n entries in order: the first whose running weight passes target, found by block sums
// (f32 lanes in a block, the blocks in f64) and then a walk inside the block. weights(b, len, out) stores the
// weights of entries [b, b + len) in out and returns their f32 sum; id(i) is entry i's token.
template <typename Weights, typename Id>
int32_t InverseCdf(int64_t n, double target, Weights weights, Id id) {
  double cum = 0;
  int64_t last_block = n;  // the last block with a weight, for when rounding leaves target unreached
  float w[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t len = std::min(kBlock, n - b);
    const float block = weights(b, len, w);
    if (block > 0) last_block = b;
    if (cum + block <= target) {
      cum += block;
      continue;
    }
    int32_t last = -1;
    for (int64_t j = 0; j < len; ++j) {
      if (w[j] <= 0) continue;
      last = id(b + j);
      cum += w[j];
      if (cum > target) break;
    }
    return last;  // the block's f32 sum may overshoot its f64 walk by rounding: then its last weighted entry
  }
  INFX_CHECK(last_block < n);  // the most likely token has weight 1 and passes every filter
  const int64_t len = std::min(kBlock, n - last_block);
  weights(last_block, len, w);
  for (int64_t j = len; j-- > 0;)
    if (w[j] > 0) return id(last_block + j);
  INFX_CHECK(false);
  return -1;
}

// Inverse CDF at u over the kept candidates, in ascending id order.
int32_t DrawFromSet(const CandidateSet& set, const KeepRule& rule, double u) {
  const size_t n = (set.size + 3) & ~size_t{3};
  double mass = 0;
  for (size_t b = 0; b < n; b += kBlock) mass += KeptBlockSum(set, b, std::min<size_t>(kBlock, n - b), rule, nullptr);
  return InverseCdf(
      static_cast<int64_t>(n), u * mass,
      [&](int64_t b, int64_t len, float* out) {
        return KeptBlockSum(set, static_cast<size_t>(b), static_cast<size_t>(len), rule, out);
      },
      [&](int64_t i) { return set.id[static_cast<size_t>(i)]; });
}

// Inverse CDF at u over every token (no filters), the weights computed block by block as in ExpSum.
int32_t DrawFromAll(std::span<const float> logits, float max_logit, float inv_temp, double u) {
  return InverseCdf(
      static_cast<int64_t>(logits.size()), u * ExpSum(logits, max_logit, inv_temp),
      [&](int64_t b, int64_t len, float* out) { return BlockExpSum(logits.data() + b, len, max_logit, inv_temp, out); },
      [](int64_t i) { return static_cast<int32_t>(i); });
}

}  // namespace

// Sum of exp((x[i] - m) * s) over all of x, blocks of kBlock from index 0.
double ExpSum(std::span<const float> x, float m, float s) {
  double total = 0;
  const int64_t n = static_cast<int64_t>(x.size());
  for (int64_t b = 0; b < n; b += kBlock) total += BlockExpSum(x.data() + b, std::min(kBlock, n - b), m, s, nullptr);
  return total;
}

// The k best tokens with a finite logit (k <= vocabulary), best first or in ascending id order.
// Appends every token that beats the current k-th best to a buffer of about 2k; when it fills,
// nth_element keeps the best k and raises the bar. Ids grow, so a later token equal to the k-th
// best never beats it.
void SelectTopK(std::span<const float> logits, int64_t k, TopKOrder order, std::vector<Candidate>& out) {
  const int64_t n = static_cast<int64_t>(logits.size());
  const size_t keep = static_cast<size_t>(std::min(k, n));
  const size_t cap = keep + std::max<size_t>(keep, 64);
  out.resize(cap + 16);
  size_t count = 0;
  float bar = -kInf;
  auto offer = [&](int64_t j) {  // branch-free append
    out[count] = {logits[j], static_cast<int32_t>(j), 0};
    count += logits[j] > bar;
  };
  auto compact = [&] {
    if (count <= keep) return;
    std::nth_element(out.begin(), out.begin() + static_cast<ptrdiff_t>(keep - 1), out.begin() + count, Better);
    count = keep;
    bar = out[keep - 1].logit;
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const F4 b = Broadcast(bar);
    const float* p = logits.data() + i;
    if (!AnyLane((Load4(p) > b) | (Load4(p + 4) > b) | (Load4(p + 8) > b) | (Load4(p + 12) > b))) continue;
    for (int64_t j = i; j < i + 16; ++j) offer(j);
    if (count >= cap) compact();
  }
  for (; i < n; ++i) offer(i);
  compact();
  out.resize(count);
  if (order == TopKOrder::kBestFirst)
    std::sort(out.begin(), out.end(), Better);
  else
    std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
}

int32_t DrawToken(std::span<const float> logits, float max_logit, const DrawRule& rule, double u,
                  DrawScratch& scratch) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  const float inv_temp = rule.inv_temp;
  const bool top_k_on = rule.top_k > 0 && rule.top_k < vocab;
  const bool top_p_on = rule.top_p < 1.0;
  const bool min_p_on = rule.min_p > 0.0;
  CandidateSet& cands = scratch.cands;

  double reference = 0;  // the mass top-p is a fraction of
  auto top_p_target = [&] { return rule.top_p * reference * (1 - kBoundaryTolerance); };
  if (top_k_on) {
    SelectTopK(logits, rule.top_k, TopKOrder::kById, scratch.top);
    Reserve(cands, scratch.top.size() + 4);
    for (size_t i = 0; i < scratch.top.size(); ++i) {
      cands.logit[i] = scratch.top[i].logit;
      cands.id[i] = scratch.top[i].id;
    }
    Finish(cands, scratch.top.size());
    reference = ComputeWeights(cands, max_logit, inv_temp);
  } else if (top_p_on || min_p_on) {
    // Every kept token has weight >= min_p, and the tokens of weight < (1 - top_p) * Z / vocab weigh
    // at most (1 - top_p) * Z together, so the nucleus lies among those above both bounds. Any
    // higher bound whose tokens already weigh top_p * Z works too: try two tight ones first (a
    // peaked distribution's nucleus is a handful of tokens).
    double floor = min_p_on ? rule.min_p * (1 - kBoundaryTolerance) : 0.0;
    if (top_p_on) {
      reference = ExpSum(logits, max_logit, inv_temp);
      floor = std::max(floor, (1 - rule.top_p) * reference / static_cast<double>(vocab));
    }
    for (double guess : {1e-3, 1e-5, 0.0}) {
      const double bound = top_p_on ? std::max(floor, guess) : floor;
      const double slack = 1e-3;  // gather a little below the bound; the exact tests use the weights
      GatherAbove(logits, static_cast<float>(max_logit + (std::log(bound) - slack) / inv_temp), cands);
      const double mass = ComputeWeights(cands, max_logit, inv_temp);
      if (bound == floor || mass >= top_p_target()) break;
    }
  } else {
    return DrawFromAll(logits, max_logit, inv_temp, u);
  }

  KeepRule keep;
  keep.min_weight = MinWeight(rule);
  if (top_p_on) {
    if (std::optional<Candidate> boundary = NucleusBoundary(cands, top_p_target(), scratch.histogram, scratch.work)) {
      keep.bound_logit = boundary->logit;
      keep.bound_id = boundary->id;
    }
  }
  return DrawFromSet(cands, keep, u);
}

}  // namespace infernix
