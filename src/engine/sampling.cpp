#include "engine/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "base/check.h"
#include "base/error.h"
#include "base/logit_scan.h"
#include "base/simd4.h"
#include "base/token_draw.h"

namespace infernix {

namespace {

constexpr double kGreedyTemperature = 1e-5;
constexpr int kMaxTopLogprobs = 20;
constexpr float kInf = std::numeric_limits<float>::infinity();

using draw_detail::Candidate;
using simd4::Broadcast, simd4::Load4, simd4::Select, simd4::Store4, simd4::U4;

double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

// ---- SamplingParams ----

void SamplingParams::Validate(int64_t vocab_size) const {
  if (!std::isfinite(temperature) || temperature < 0)
    ThrowError(ErrorCode::kInvalidArgument, "temperature: expected a finite number >= 0, got {}", temperature);
  if (!(top_p > 0 && top_p <= 1))
    ThrowError(ErrorCode::kInvalidArgument, "top_p: expected a number in (0, 1], got {}", top_p);
  if (top_k < -1)
    ThrowError(ErrorCode::kInvalidArgument, "top_k: expected -1 or 0 (off) or a positive count, got {}", top_k);
  if (!(min_p >= 0 && min_p <= 1))
    ThrowError(ErrorCode::kInvalidArgument, "min_p: expected a number in [0, 1], got {}", min_p);
  if (!(presence_penalty >= -2 && presence_penalty <= 2))
    ThrowError(ErrorCode::kInvalidArgument, "presence_penalty: expected a number in [-2, 2], got {}",
               presence_penalty);
  if (!(frequency_penalty >= -2 && frequency_penalty <= 2))
    ThrowError(ErrorCode::kInvalidArgument, "frequency_penalty: expected a number in [-2, 2], got {}",
               frequency_penalty);
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0)
    ThrowError(ErrorCode::kInvalidArgument, "repetition_penalty: expected a finite number > 0, got {}",
               repetition_penalty);
  std::vector<int32_t> ids;
  ids.reserve(logit_bias.size());
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0 || token >= vocab_size)
      ThrowError(ErrorCode::kInvalidArgument, "logit_bias: token id {} is outside the vocabulary [0, {})", token,
                 vocab_size);
    if (!(bias >= -100 && bias <= 100))
      ThrowError(ErrorCode::kInvalidArgument, "logit_bias: the bias of token {} must be in [-100, 100], got {}",
                 token, bias);
    ids.push_back(token);
  }
  std::sort(ids.begin(), ids.end());
  if (auto dup = std::adjacent_find(ids.begin(), ids.end()); dup != ids.end())
    ThrowError(ErrorCode::kInvalidArgument, "logit_bias: token id {} appears more than once", *dup);
  if (top_logprobs < 0 || top_logprobs > kMaxTopLogprobs)
    ThrowError(ErrorCode::kInvalidArgument, "top_logprobs: expected an integer in [0, {}], got {}", kMaxTopLogprobs,
               top_logprobs);
  if (top_logprobs > 0 && !logprobs)
    ThrowError(ErrorCode::kInvalidArgument, "top_logprobs: requires logprobs to be true");
}

// ---- Sampler ----

Sampler::Sampler(SamplingParams params, int64_t vocab_size, std::span<const int32_t> prompt_tokens,
                 int64_t sampleable_size)
    : params_(std::move(params)), vocab_(vocab_size), sampleable_(sampleable_size == 0 ? vocab_size : sampleable_size) {
  INFX_CHECK_MSG(vocab_size > 0 && vocab_size <= std::numeric_limits<int32_t>::max(), "vocab_size {}", vocab_size);
  INFX_CHECK_MSG(sampleable_ > 0 && sampleable_ <= vocab_, "sampleable_size {} for a vocabulary of {}",
                 sampleable_size, vocab_size);
  params_.Validate(vocab_size);
  greedy_ = params_.temperature < kGreedyTemperature;
  uint64_t seed = 0;
  if (params_.seed) {
    seed = *params_.seed;
  } else {
    std::random_device device;
    seed = (static_cast<uint64_t>(device()) << 32) ^ device();
  }
  rng_.seed(seed);
  for (size_t i = 0; i < prompt_tokens.size(); ++i)
    if (prompt_tokens[i] < 0 || prompt_tokens[i] >= vocab_)
      ThrowError(ErrorCode::kInvalidArgument, "prompt_tokens[{}]: token id {} is outside the vocabulary [0, {})", i,
                 prompt_tokens[i], vocab_);
  if (params_.repetition_penalty != 1.0) {
    seen_bits_.assign(static_cast<size_t>((vocab_ + 63) / 64), 0);
    for (int32_t token : prompt_tokens) {
      uint64_t& word = seen_bits_[static_cast<size_t>(token) / 64];
      const uint64_t bit = uint64_t{1} << (token % 64);
      if (!(word & bit)) {
        word |= bit;
        seen_tokens_.push_back(token);
      }
    }
  }
}

bool Sampler::TakesTheRawLogits() const {
  return params_.repetition_penalty == 1.0 && params_.presence_penalty == 0.0 && params_.frequency_penalty == 0.0 &&
         params_.logit_bias.empty() && !params_.logprobs;
}

bool Sampler::PlainGreedy() const { return greedy_ && TakesTheRawLogits(); }

bool Sampler::PlainDraw() const {
  if (!TakesTheRawLogits()) return false;
  if (greedy_) return true;
  const int64_t top_k = Rule().top_k;
  return top_k >= 1 && top_k <= kMaxPickTopK;
}

TokenDraw Sampler::NextDraw() {
  INFX_CHECK_MSG(PlainDraw(), "a backend draw for a sampler that draws on the host");
  TokenDraw draw;
  draw.greedy = greedy_;
  if (!greedy_) {
    draw.rule = Rule();
    draw.u = Uniform(rng_);
  }
  return draw;
}

void Sampler::Accept(int32_t token) {
  INFX_CHECK_MSG(token >= 0 && token < vocab_, "token {} outside the vocabulary [0, {})", token, vocab_);
  if (!seen_bits_.empty()) {
    uint64_t& word = seen_bits_[static_cast<size_t>(token) / 64];
    const uint64_t bit = uint64_t{1} << (token % 64);
    if (!(word & bit)) {
      word |= bit;
      seen_tokens_.push_back(token);
    }
  }
  if (params_.presence_penalty != 0 || params_.frequency_penalty != 0) ++output_counts_[token];
}

void Sampler::ApplyProcessing(std::span<float> logits, std::span<const uint32_t> allowed_mask) const {
  if (params_.repetition_penalty != 1.0) {
    const double p = params_.repetition_penalty;
    for (int32_t token : seen_tokens_) {
      const double l = logits[token];
      logits[token] = static_cast<float>(l > 0 ? l / p : l * p);
    }
  }
  for (const auto& [token, count] : output_counts_)
    logits[token] =
        static_cast<float>(logits[token] - params_.presence_penalty - params_.frequency_penalty * count);
  for (const auto& [token, bias] : params_.logit_bias) logits[token] += bias;
  if (!allowed_mask.empty()) {
    const int64_t full_words = vocab_ / 32;
    for (int64_t w = 0; w < full_words; ++w) {
      const uint32_t bits = allowed_mask[w];
      if (bits == ~uint32_t{0}) continue;
      const U4 word = {bits, bits, bits, bits};
      float* p = logits.data() + w * 32;
      U4 lane_bits = {1, 2, 4, 8};
      for (int g = 0; g < 8; ++g, lane_bits <<= 4)
        Store4(p + 4 * g, Select((word & lane_bits) != 0, Load4(p + 4 * g), Broadcast(-kInf)));
    }
    for (int64_t id = full_words * 32; id < vocab_; ++id)
      if (!((allowed_mask[id / 32] >> (id % 32)) & 1u)) logits[id] = -kInf;
  }
  std::fill(logits.begin() + sampleable_, logits.end(), -kInf);  // padding ids: masked like the rest
}

SampleResult Sampler::Sample(std::span<float> logits, std::span<const uint32_t> allowed_mask) {
  INFX_CHECK_MSG(static_cast<int64_t>(logits.size()) == vocab_, "logits size {} != vocabulary {}", logits.size(),
                 vocab_);
  INFX_CHECK_MSG(allowed_mask.empty() || static_cast<int64_t>(allowed_mask.size()) == (vocab_ + 31) / 32,
                 "allowed_mask has {} words, expected {}", allowed_mask.size(), (vocab_ + 31) / 32);
  ApplyProcessing(logits, allowed_mask);
  const LogitScan scan = ScanLogits(logits);
  if (scan.invalid >= 0)
    ThrowError(ErrorCode::kInternal, "logits: token {} has the non-finite value {}", scan.invalid,
               logits[scan.invalid]);
  if (scan.max == -kInf) ThrowError(ErrorCode::kInternal, "allowed_mask: no token is allowed");

  SampleResult result;
  result.token = greedy_ ? static_cast<int32_t>(scan.argmax) : SampleStochastic(logits, scan.max);
  if (params_.logprobs) {
    const double log_z = std::log(ExpSum(logits, scan.max, 1.0f));
    auto logprob_of = [&](int64_t id) {
      return static_cast<float>(static_cast<double>(logits[id]) - scan.max - log_z);
    };
    result.logprob = logprob_of(result.token);
    if (params_.top_logprobs > 0) {
      SelectTopK(logits, params_.top_logprobs, TopKOrder::kBestFirst, scratch_.work);
      for (const Candidate& c : scratch_.work) result.top.push_back({c.id, logprob_of(c.id)});
    }
  }
  return result;
}

int32_t Sampler::SampleStochastic(std::span<const float> logits, float max_logit) {
  return DrawToken(logits, max_logit, Rule(), Uniform(rng_), scratch_);
}

DrawRule Sampler::Rule() const {
  DrawRule rule;
  rule.inv_temp = static_cast<float>(1.0 / params_.temperature);
  rule.top_k = params_.top_k > 0 && params_.top_k < vocab_ ? params_.top_k : 0;
  rule.top_p = params_.top_p;
  rule.min_p = params_.min_p;
  return rule;
}

}  // namespace infernix
