// Token sampling for one request: penalties, logit bias, an optional allowed-token mask, temperature
// and the top-k / top-p / min-p filters, then a draw from a per-request seeded RNG.
//
// Processing order of Sampler::Sample (the vLLM / OpenAI conventions):
//   1. repetition_penalty over every distinct token of the prompt and the output so far
//      (HF/CTRL: logit > 0 ? logit / p : logit * p);
//   2. presence and frequency penalties over the output so far (OpenAI:
//      logit -= presence * (count > 0) + frequency * count);
//   3. logit_bias (added);
//   4. the allowed mask (tokens whose bit is 0 get -inf), and padding ids (those at or past the
//      sampleable size: a model's vocabulary padded past its tokenizer's) get -inf too.
//   The result is the "processed" distribution: logprobs are its log-softmax at temperature 1.
//   5. temperature < 1e-5: greedy, the argmax of the processed logits (ties to the lowest id); no
//      RNG draw and no filters. Otherwise the logits are divided by the temperature and
//   6. top-k keeps the k most likely tokens (ties to the lowest id);
//   7. top-p keeps the smallest most-likely-first set whose mass, renormalized over what top-k kept,
//      is >= top_p;
//   8. min-p keeps the tokens whose probability is >= min_p times the most likely one's;
//   9. one uniform draw u in [0, 1) from the request's std::mt19937_64 picks the token by inverse CDF
//      over the kept tokens in ascending id order.
// Steps 5-9 are base/token_draw.h's DrawToken. Filter boundaries (7, 8) are inclusive within a relative
// 1e-6, the precision of f32 logits. The result is a deterministic function of the inputs, the parameters
// and the seed: a seeded request replays the same tokens given the same logits (on x86-64 the exp kernel
// computes the same bits with or without AVX2, and the CUDA backend's draws of NextDraw the same bits too).
//
// Cost over a vocabulary V (bench/sampling_bench.cpp): greedy and top-k are one or two vectorized
// passes without exp and no full sort (top-k keeps a ~2k buffer trimmed by nth_element); top-p /
// min-p without top-k add one exp pass for the normalizer, then work only on the tokens above a
// bound that provably contains the nucleus (bucketed by weight, sorting only the bucket where the
// mass crosses top_p); logprobs add one exp pass.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/token_draw.h"

namespace infernix {

struct SamplingParams {
  double temperature = 1.0;         // >= 0; < 1e-5 = greedy (argmax; ties to the lowest id)
  double top_p = 1.0;               // (0, 1]
  int top_k = 0;                    // 0 or -1 = off; >= vocabulary size = off
  double min_p = 0.0;               // [0, 1]
  double presence_penalty = 0.0;    // [-2, 2]
  double frequency_penalty = 0.0;   // [-2, 2]
  double repetition_penalty = 1.0;  // > 0 (1 = off)
  std::optional<uint64_t> seed;     // reproducible when set
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token, bias in [-100, 100]); a token at most once
  int top_logprobs = 0;             // 0..20 alternatives to report; > 0 requires logprobs
  bool logprobs = false;

  // Throws Error(kInvalidArgument) naming the first field at fault.
  void Validate(int64_t vocab_size) const;
};

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct SampleResult {
  int32_t token = 0;
  // When params.logprobs (else 0): log-softmax of the chosen token over the processed logits (after
  // penalties, logit_bias and the mask; at temperature 1; before top-k/top-p/min-p), as OpenAI
  // reports it. Computing it costs a pass of exp over the vocabulary.
  float logprob = 0;
  // When params.logprobs: the top_logprobs most likely tokens of that same distribution, descending
  // (ties to the lowest id); tokens excluded by the mask are never listed, so there may be fewer.
  std::vector<TokenLogprob> top;
};

// Per-request sampler: owns the RNG (seeded from params.seed, else from std::random_device) and the
// token counts the penalties need. Not thread-safe; one per request.
class Sampler {
 public:
  // Validates params (kInvalidArgument) and the prompt's token ids (kInvalidArgument naming
  // prompt_tokens). vocab_size (the logits' length) must be in [1, 2^31). Ids in
  // [sampleable_size, vocab_size) are never sampled nor listed in SampleResult::top, whatever the
  // mode (the engine passes the tokenizer's vocabulary size: the model's logits may be padded past
  // it, and such ids have no text); sampleable_size is in [1, vocab_size], 0 meaning vocab_size.
  Sampler(SamplingParams params, int64_t vocab_size, std::span<const int32_t> prompt_tokens,
          int64_t sampleable_size = 0);

  // logits: [vocab] f32, used as scratch (penalties, bias and the mask are applied in place).
  // allowed_mask: empty, or ceil(vocab / 32) words, bit (id % 32) of word (id / 32) set = token id
  // allowed. Errors: kInternal when the logits hold NaN or +inf, or when no token is allowed.
  SampleResult Sample(std::span<float> logits, std::span<const uint32_t> allowed_mask = {});

  // Records a token the request produced (the one Sample chose, or a forced token) for the penalties.
  void Accept(int32_t token);

  const SamplingParams& params() const { return params_; }
  // Whether Sample is the argmax of the raw logits over the sampleable ids alone (greedy, no penalties,
  // no logit_bias, no logprobs): the engine may then take a backend's greedy pick instead
  // (Backend::PickGreedy), given the same allowed mask (none).
  bool PlainGreedy() const;
  // Whether a backend may pick this sampler's tokens (Backend::QueuePick): PlainGreedy, or a draw with
  // 1 <= top_k <= kMaxPickTopK (< the vocabulary) and no penalties, logit_bias or logprobs, from the raw
  // logits over the sampleable ids (given no allowed mask).
  bool PlainDraw() const;
  // The next token's draw for a backend (PlainDraw): greedy, or the filters and one uniform from the RNG,
  // which Sample would have drawn for that token: a request's tokens are the same whichever drew each.
  TokenDraw NextDraw();
  int64_t sampleable() const { return sampleable_; }

 private:
  int32_t SampleStochastic(std::span<const float> logits, float max_logit);
  DrawRule Rule() const;
  // No penalties, logit_bias or logprobs: Sample changes nothing in the logits (given no allowed mask) and
  // asks nothing of them but the token.
  bool TakesTheRawLogits() const;
  void ApplyProcessing(std::span<float> logits, std::span<const uint32_t> allowed_mask) const;

  SamplingParams params_;
  int64_t vocab_;
  int64_t sampleable_;  // ids [sampleable_, vocab_) are padding
  bool greedy_;
  std::mt19937_64 rng_;
  // Repetition penalty: distinct tokens of the prompt and output, with a membership bitmap.
  std::vector<uint64_t> seen_bits_;
  std::vector<int32_t> seen_tokens_;
  // Presence / frequency penalties: output token -> count.
  std::unordered_map<int32_t, int32_t> output_counts_;
  DrawScratch scratch_;  // reused across steps
};

}  // namespace infernix
