// The draw of one sampled token from processed logits (steps 5-9 of engine/sampling.h's order): the
// temperature, the top-k / top-p / min-p filters, and the token at a uniform u by inverse CDF over the kept
// tokens in ascending id order. The engine's Sampler draws with it, so do the backends' host picks
// (backend/pick.h), and the CUDA backend's draw kernel computes the same bits for the top-k draws it takes.
//
// Filter boundaries (top-p, min-p) are inclusive within a relative kDrawBoundaryTolerance, the precision of
// f32 logits. The exp is a polynomial in f32 without fused multiply-adds (the same bits with or without
// AVX2, and on the GPU), sums accumulate f32 lanes per block of 256 and the blocks in f64: the draw is a
// deterministic function of the logits, the rule and u.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace infernix {

inline constexpr double kDrawBoundaryTolerance = 1e-6;
// The largest top_k of a draw that a backend picks (Backend::QueuePick; the CUDA draw kernel's bound).
inline constexpr int64_t kMaxPickTopK = 64;

// The filters of a draw, as the sampler derives them from its parameters.
struct DrawRule {
  float inv_temp = 1;  // float(1 / temperature), temperature >= 1e-5
  int64_t top_k = 0;   // 0 = off; a count >= the logits' length is off too
  double top_p = 1;    // (0, 1]; 1 = off
  double min_p = 0;    // [0, 1]; 0 = off
};

// One logit row's pick on a backend: greedy (the argmax over the sampleable ids, ties to the lowest id),
// or DrawToken's draw at u with the rule, whose top_k is in [1, kMaxPickTopK].
struct TokenDraw {
  bool greedy = true;
  DrawRule rule;
  double u = 0;
};

// The least weight (exp((logit - max) / temperature), the best token's 1) min-p keeps: min_p within the
// boundary tolerance, 0 without min-p. The CUDA draw kernel takes it as computed here.
inline float MinWeight(const DrawRule& rule) {
  return rule.min_p > 0 ? static_cast<float>(rule.min_p * (1 - kDrawBoundaryTolerance)) : 0.0f;
}

namespace draw_detail {
struct Candidate {
  float logit;  // processed logit
  int32_t id;
  float weight;  // exp((logit - max) / temperature)
};
// Candidates in ascending id order as a structure of arrays, padded to a multiple of 4 entries of weight 0.
struct CandidateSet {
  size_t size = 0;
  std::vector<float> logit, weight;
  std::vector<int32_t> id;
};
}  // namespace draw_detail

// Scratch a caller reuses across draws (sized by the candidate count: up to the vocabulary for top-p without
// top-k over a flat distribution).
struct DrawScratch {
  draw_detail::CandidateSet cands;
  std::vector<draw_detail::Candidate> top, work;
  std::vector<double> histogram;
};

// The token drawn at u in [0, 1) from `logits` (no NaN or +inf; -inf for tokens that may not be drawn), whose
// largest value max_logit is finite. Cost: see engine/sampling.h.
int32_t DrawToken(std::span<const float> logits, float max_logit, const DrawRule& rule, double u, DrawScratch& scratch);

// Sum of exp((x[i] - m) * s) over x (the draw's exp and summation order).
double ExpSum(std::span<const float> x, float m, float s);

// The k best tokens with a finite logit (higher logit first, ties to the lower id; k <= the logits' length),
// best first or in ascending id order. Appends every token that beats the current k-th best to a buffer of
// about 2k; when it fills, nth_element keeps the best k and raises the bar.
enum class TopKOrder { kBestFirst, kById };
void SelectTopK(std::span<const float> logits, int64_t k, TopKOrder order, std::vector<draw_detail::Candidate>& out);

}  // namespace infernix
