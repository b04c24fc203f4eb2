#include "engine/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/pick.h"
#include "base/error.h"

namespace infernix {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kQwenVocab = 151936;

std::vector<double> LogSoftmax(const std::vector<float>& logits) {
  double m = -std::numeric_limits<double>::infinity();
  for (float l : logits) m = std::max(m, static_cast<double>(l));
  double z = 0;
  for (float l : logits) z += std::exp(static_cast<double>(l) - m);
  std::vector<double> out;
  for (float l : logits) out.push_back(static_cast<double>(l) - m - std::log(z));
  return out;
}

std::vector<float> RandomLogits(int64_t n, double stddev, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, stddev);
  std::vector<float> out(static_cast<size_t>(n));
  for (float& x : out) x = static_cast<float>(normal(rng));
  return out;
}

std::vector<float> LogitsOfProbs(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(p > 0 ? static_cast<float>(std::log(p)) : kNegInf);
  return out;
}

SampleResult SampleOnce(Sampler& sampler, const std::vector<float>& logits, std::span<const uint32_t> mask = {}) {
  std::vector<float> scratch = logits;
  return sampler.Sample(scratch, mask);
}

// How often each token is drawn in `draws` samples (no Accept: the distribution stays fixed).
std::map<int32_t, int> Histogram(SamplingParams params, const std::vector<float>& logits, int draws,
                                 std::span<const uint32_t> mask = {}) {
  Sampler sampler(std::move(params), static_cast<int64_t>(logits.size()), {});
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i) counts[SampleOnce(sampler, logits, mask).token]++;
  return counts;
}

std::set<int32_t> Support(const std::map<int32_t, int>& counts) {
  std::set<int32_t> out;
  for (const auto& [token, n] : counts) out.insert(token);
  return out;
}

SamplingParams Seeded(uint64_t seed = 1234) {
  SamplingParams p;
  p.seed = seed;
  return p;
}

TEST(Sampler, GreedyIsArgmaxWithTiesToLowestId) {
  SamplingParams p;
  p.temperature = 0;
  {
    Sampler s(p, 4, {});
    EXPECT_EQ(SampleOnce(s, {1, 5, 3, 5}).token, 1);
    EXPECT_EQ(SampleOnce(s, {7, 5, 3, 7}).token, 0);
  }
  // Ties across vector lanes and in the tail of an odd-sized vocabulary.
  std::vector<float> logits(1003, -1.0f);
  logits[1001] = logits[1002] = 4.0f;
  Sampler s(p, 1003, {});
  EXPECT_EQ(SampleOnce(s, logits).token, 1001);
  logits[517] = 4.0f;
  EXPECT_EQ(SampleOnce(s, logits).token, 517);
  // A very small temperature is greedy too.
  p.temperature = 1e-6;
  const std::vector<float> big = RandomLogits(kQwenVocab, 2.0, 7);
  Sampler tiny(p, kQwenVocab, {});
  const int32_t expected = static_cast<int32_t>(std::max_element(big.begin(), big.end()) - big.begin());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(SampleOnce(tiny, big).token, expected);
}

// PlainGreedy: greedy with nothing that changes the logits or asks for more than the token; then Sample
// is pick.h's greedy pick over the sampleable ids (the engine may take a backend's pick instead).
TEST(Sampler, PlainGreedyIsThePickOverTheSampleableIds) {
  SamplingParams p;
  p.temperature = 0;
  p.top_k = 5;  // ignored by greedy sampling
  const std::vector<float> logits = RandomLogits(kQwenVocab, 2.0, 11);
  const int64_t sampleable = kQwenVocab - 50;
  Sampler plain(p, kQwenVocab, {}, sampleable);
  EXPECT_TRUE(plain.PlainGreedy());
  EXPECT_EQ(plain.sampleable(), sampleable);
  EXPECT_EQ(SampleOnce(plain, logits).token, PickGreedyRows(logits, 1, kQwenVocab, sampleable)[0]);
  std::vector<std::function<void(SamplingParams&)>> not_plain = {
      [](SamplingParams& q) { q.temperature = 0.7; },
      [](SamplingParams& q) { q.repetition_penalty = 1.1; },
      [](SamplingParams& q) { q.presence_penalty = 0.5; },
      [](SamplingParams& q) { q.frequency_penalty = -0.5; },
      [](SamplingParams& q) { q.logit_bias = {{3, 1.0f}}; },
      [](SamplingParams& q) { q.logprobs = true; },
  };
  for (size_t i = 0; i < not_plain.size(); ++i) {
    SamplingParams q = p;
    not_plain[i](q);
    EXPECT_FALSE(Sampler(q, kQwenVocab, {}).PlainGreedy()) << "case " << i;
  }
}

// PlainDraw: greedy or a top-k draw (top_k in [1, kMaxPickTopK]) with nothing that changes the logits or asks
// for more than the token. NextDraw takes the uniform Sample would take, so that pick.h's PickRows with it
// gives Sample's token, and a seeded request's tokens do not depend on which drew each: here each step
// alternates between the two, against a sampler that samples every step.
TEST(Sampler, PlainDrawsPickSampledTokensFromTheSameUniforms) {
  const int64_t sampleable = kQwenVocab - 50;
  struct Case {
    double temperature, top_p, min_p;
    int top_k;
  };
  const Case cases[] = {{0.6, 0.95, 0, 20}, {1.0, 1.0, 0, 64},  {0.7, 0.8, 0.05, 40}, {1.3, 0.5, 0, 1},
                        {0.1, 1.0, 0.2, 7}, {2.0, 0.99, 0, 50}, {0, 1.0, 0, 0}};
  for (size_t c = 0; c < std::size(cases); ++c) {
    SamplingParams p = Seeded(100 + c);
    p.temperature = cases[c].temperature;
    p.top_p = cases[c].top_p;
    p.min_p = cases[c].min_p;
    p.top_k = cases[c].top_k;
    Sampler host(p, kQwenVocab, {}, sampleable), mixed(p, kQwenVocab, {}, sampleable);
    ASSERT_TRUE(mixed.PlainDraw()) << "case " << c;
    std::set<int32_t> distinct;
    for (int step = 0; step < 40; ++step) {
      // Logits of a model's kind: a few strong tokens over a broad rest, some past the sampleable ids.
      std::vector<float> logits = RandomLogits(kQwenVocab, 2.0, 1000 * c + static_cast<uint64_t>(step));
      for (int j = 0; j < 6; ++j) logits[static_cast<size_t>((step * 7919 + j * 104729) % kQwenVocab)] += 8.0f - j;
      const int32_t want = SampleOnce(host, logits).token;
      int32_t got = 0;
      if (step % 2 == 0) {
        const TokenDraw draw = mixed.NextDraw();
        EXPECT_EQ(draw.greedy, cases[c].temperature == 0) << "case " << c;
        got = PickRows(logits, 1, kQwenVocab, sampleable, std::span<const TokenDraw>(&draw, 1))[0];
      } else {
        got = SampleOnce(mixed, logits).token;
      }
      ASSERT_EQ(got, want) << "case " << c << " step " << step;
      EXPECT_LT(got, sampleable);
      distinct.insert(got);
    }
    if (cases[c].temperature >= 0.6 && cases[c].top_k > 1) {
      EXPECT_GT(distinct.size(), 10u) << "case " << c;  // draws, not a fixed pick
    }
  }
  std::vector<std::function<void(SamplingParams&)>> not_plain = {
      [](SamplingParams& q) { q.top_k = 0; },
      [](SamplingParams& q) { q.top_k = static_cast<int>(kMaxPickTopK) + 1; },
      [](SamplingParams& q) { q.repetition_penalty = 1.1; },
      [](SamplingParams& q) { q.presence_penalty = 0.5; },
      [](SamplingParams& q) {
        q.logit_bias = {{3, 1.0f}};
      },
      [](SamplingParams& q) { q.logprobs = true; },
  };
  for (size_t i = 0; i < not_plain.size(); ++i) {
    SamplingParams q = Seeded(1);
    q.top_k = 20;
    not_plain[i](q);
    EXPECT_FALSE(Sampler(q, kQwenVocab, {}).PlainDraw()) << "case " << i;
  }
  // A top_k of the whole vocabulary is no filter: not a backend's draw either.
  SamplingParams whole = Seeded(1);
  whole.top_k = 30;
  EXPECT_FALSE(Sampler(whole, 30, {}).PlainDraw());
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  const std::vector<float> logits = RandomLogits(1000, 1.0, 3);
  for (int variant = 0; variant < 3; ++variant) {
    auto run = [&](uint64_t seed) {
      SamplingParams p = Seeded(seed);
      if (variant == 1) p.top_p = 0.9, p.top_k = 50, p.temperature = 0.8;
      if (variant == 2) p.min_p = 0.05, p.top_p = 0.95;
      Sampler s(p, 1000, {});
      std::vector<int32_t> tokens;
      for (int i = 0; i < 100; ++i) tokens.push_back(SampleOnce(s, logits).token);
      return tokens;
    };
    EXPECT_EQ(run(42), run(42)) << "variant " << variant;
    EXPECT_NE(run(42), run(43)) << "variant " << variant;
  }
}

TEST(Sampler, UnseededSamplersDiffer) {
  const std::vector<float> logits(1000, 0.0f);
  auto run = [&] {
    Sampler s(SamplingParams{}, 1000, {});
    std::vector<int32_t> tokens;
    for (int i = 0; i < 20; ++i) tokens.push_back(SampleOnce(s, logits).token);
    return tokens;
  };
  EXPECT_NE(run(), run());
}

TEST(Sampler, TopK1IsGreedy) {
  std::vector<float> logits = RandomLogits(5000, 1.0, 11);
  logits[4000] = logits[4321] = 9.0f;  // tie: the lowest id wins
  SamplingParams p = Seeded();
  p.top_k = 1;
  p.temperature = 1.7;
  EXPECT_EQ(Support(Histogram(p, logits, 100)), std::set<int32_t>{4000});
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  // Token ids 10, 20, 30, 40 in decreasing probability; the rest far below.
  std::vector<float> logits(100, -2.0f);
  logits[40] = 1.0f, logits[30] = 1.5f, logits[20] = 2.0f, logits[10] = 2.5f;
  SamplingParams p = Seeded();
  p.top_k = 3;
  EXPECT_EQ(Support(Histogram(p, logits, 3000)), (std::set<int32_t>{10, 20, 30}));
  // Large k (the nth_element path) over the full vocabulary.
  const std::vector<float> big = RandomLogits(kQwenVocab, 1.0, 5);
  std::vector<int32_t> order(big.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 5000, order.end(),
                    [&](int32_t a, int32_t b) { return big[a] > big[b] || (big[a] == big[b] && a < b); });
  const std::set<int32_t> top5000(order.begin(), order.begin() + 5000);
  p.top_k = 5000;
  p.temperature = 3.0;
  for (const auto& [token, n] : Histogram(p, big, 300)) EXPECT_TRUE(top5000.count(token)) << token;
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  // Probabilities by id: 2 -> 0.5, 0 -> 0.3, 3 -> 0.15, 1 -> 0.05.
  const std::vector<float> logits = LogitsOfProbs({0.3, 0.05, 0.5, 0.15});
  const std::vector<std::pair<double, std::set<int32_t>>> cases = {
      {0.3, {2}}, {0.5, {2}}, {0.6, {2, 0}}, {0.8, {2, 0}}, {0.81, {2, 0, 3}}, {0.95, {2, 0, 3}}, {0.96, {0, 1, 2, 3}}};
  for (const auto& [top_p, expected] : cases) {
    SamplingParams p = Seeded();
    p.top_p = top_p;
    EXPECT_EQ(Support(Histogram(p, logits, 4000)), expected) << "top_p " << top_p;
  }
  // Renormalized over the nucleus: 0.5 / 0.8 and 0.3 / 0.8.
  SamplingParams p = Seeded();
  p.top_p = 0.8;
  auto counts = Histogram(p, logits, 20000);
  EXPECT_NEAR(counts[2] / 20000.0, 0.625, 0.015);
  EXPECT_NEAR(counts[0] / 20000.0, 0.375, 0.015);
}

TEST(Sampler, TopPAppliesWithinTopK) {
  // top_k = 2 keeps ids 2, 0 (0.5, 0.3); renormalized 0.625 / 0.375, so top_p = 0.6 keeps id 2 only.
  const std::vector<float> logits = LogitsOfProbs({0.3, 0.05, 0.5, 0.15});
  SamplingParams p = Seeded();
  p.top_k = 2;
  p.top_p = 0.6;
  EXPECT_EQ(Support(Histogram(p, logits, 2000)), std::set<int32_t>{2});
  p.top_p = 0.7;
  EXPECT_EQ(Support(Histogram(p, logits, 2000)), (std::set<int32_t>{0, 2}));
}

TEST(Sampler, TopPOverTheFullVocabulary) {
  // Uniform: the nucleus of 0.5 is the lower-id half (ties go to the lowest id).
  {
    const std::vector<float> flat(kQwenVocab, 0.25f);
    SamplingParams p = Seeded();
    p.top_p = 0.5;
    const auto counts = Histogram(p, flat, 500);
    EXPECT_LE(counts.rbegin()->first, kQwenVocab / 2);
    EXPECT_GT(counts.size(), 400u);
  }
  // Random logits: every drawn token lies in the nucleus computed here in double (allowing the token
  // right at the boundary, which f32 rounding may decide either way).
  const std::vector<float> logits = RandomLogits(kQwenVocab, 2.0, 9);
  for (double temperature : {1.0, 0.6}) {
    std::vector<double> w;
    for (float l : logits) w.push_back(std::exp(static_cast<double>(l) / temperature));
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    std::set<int32_t> nucleus;
    double cum = 0;
    for (int32_t id : order) {
      nucleus.insert(id);
      cum += w[id];
      if (cum >= 0.9 * total) break;
    }
    nucleus.insert(order[nucleus.size()]);
    SamplingParams p = Seeded();
    p.top_p = 0.9;
    p.temperature = temperature;
    const auto counts = Histogram(p, logits, 300);
    for (const auto& [token, n] : counts) EXPECT_TRUE(nucleus.count(token)) << token;
    EXPECT_GT(counts.size(), 100u);  // the nucleus holds thousands of tokens
  }
}

TEST(Sampler, MinPKeepsTokensAboveAFractionOfTheBest) {
  const std::vector<float> logits = LogitsOfProbs({0.3, 0.05, 0.5, 0.15});
  const std::vector<std::pair<double, std::set<int32_t>>> cases = {
      {0.05, {0, 1, 2, 3}}, {0.25, {0, 2, 3}}, {0.5, {0, 2}}, {0.7, {2}}, {1.0, {2}}};
  for (const auto& [min_p, expected] : cases) {
    SamplingParams p = Seeded();
    p.min_p = min_p;
    EXPECT_EQ(Support(Histogram(p, logits, 4000)), expected) << "min_p " << min_p;
  }
  // A small min_p over a long tail: 2000 tokens at ratio 5e-4 (kept, half the mass together) and
  // 2000 at 5e-5 (dropped).
  {
    std::vector<float> tail(4001, std::log(5e-5f));
    tail[0] = 0.0f;
    for (int i = 1; i <= 2000; ++i) tail[i] = std::log(5e-4f);
    for (double top_p : {1.0, 0.99}) {
      SamplingParams p = Seeded();
      p.min_p = 1e-4;
      p.top_p = top_p;
      const auto counts = Histogram(p, tail, 2000);
      EXPECT_LE(counts.rbegin()->first, 2000) << "top_p " << top_p;
      EXPECT_NEAR(counts.at(0) / 2000.0, 0.5, 0.05) << "top_p " << top_p;
    }
  }
  // min-p is relative to the temperature-scaled distribution: at T = 0.5 the ratios square.
  SamplingParams p = Seeded();
  p.min_p = 0.3;  // ratios 0.36, 0.09, 0.01 at T = 0.5
  p.temperature = 0.5;
  EXPECT_EQ(Support(Histogram(p, logits, 4000)), (std::set<int32_t>{0, 2}));
}

double ChiSquare(const std::map<int32_t, int>& counts, const std::vector<double>& expected, int draws) {
  double chi = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto it = counts.find(static_cast<int32_t>(i));
    const double observed = it == counts.end() ? 0 : it->second;
    const double e = expected[i] * draws;
    chi += (observed - e) * (observed - e) / e;
  }
  return chi;
}

TEST(Sampler, TemperatureReshapesTheDistribution) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  const std::vector<float> logits = LogitsOfProbs(probs);
  constexpr int kDraws = 40000;
  for (double temperature : {0.5, 1.0, 2.0}) {
    std::vector<double> expected;
    for (double q : probs) expected.push_back(std::pow(q, 1.0 / temperature));
    const double z = std::accumulate(expected.begin(), expected.end(), 0.0);
    for (double& e : expected) e /= z;
    SamplingParams p = Seeded(99);
    p.temperature = temperature;
    const auto counts = Histogram(p, logits, kDraws);
    // 3 degrees of freedom: P(chi2 > 25) ~ 1.6e-5.
    EXPECT_LT(ChiSquare(counts, expected, kDraws), 25.0) << "temperature " << temperature;
    for (size_t i = 0; i < probs.size(); ++i)
      EXPECT_NEAR(counts.at(static_cast<int32_t>(i)) / double(kDraws), expected[i], 0.015)
          << "temperature " << temperature << " token " << i;
  }
}

TEST(Sampler, FiltersRenormalizeTheKeptTokens) {
  // Probabilities by id: 0.1, 0.2, 0.3, 0.4. Each filter keeps ids 1..3: expected 2/9, 3/9, 4/9.
  const std::vector<float> logits = LogitsOfProbs({0.1, 0.2, 0.3, 0.4});
  const std::vector<double> expected = {0, 2.0 / 9, 3.0 / 9, 4.0 / 9};
  constexpr int kDraws = 30000;
  for (int filter = 0; filter < 3; ++filter) {
    SamplingParams p = Seeded(77);
    if (filter == 0) p.top_k = 3;
    if (filter == 1) p.top_p = 0.85;
    if (filter == 2) p.min_p = 0.4;
    const auto counts = Histogram(p, logits, kDraws);
    EXPECT_EQ(counts.count(0), 0u) << "filter " << filter;
    for (int32_t id = 1; id < 4; ++id)
      EXPECT_NEAR(counts.at(id) / double(kDraws), expected[id], 0.012) << "filter " << filter << " id " << id;
  }
}

TEST(Sampler, FiltersCompose) {
  // Probabilities by id: 0.05, 0.4, 0.25, 0.2, 0.1. top_k = 4 drops id 0; top_p = 0.7 over the
  // renormalized 0.421, 0.263, 0.211, 0.105 keeps ids 1, 2, 3 (0.684 < 0.7 <= 0.895); min_p = 0.6
  // drops id 3 (0.2 / 0.4 = 0.5).
  const std::vector<float> logits = LogitsOfProbs({0.05, 0.4, 0.25, 0.2, 0.1});
  SamplingParams p = Seeded();
  p.top_k = 4;
  p.top_p = 0.7;
  EXPECT_EQ(Support(Histogram(p, logits, 3000)), (std::set<int32_t>{1, 2, 3}));
  p.min_p = 0.6;
  EXPECT_EQ(Support(Histogram(p, logits, 3000)), (std::set<int32_t>{1, 2}));
  p.top_k = 0;  // the same through the threshold path: top_p alone keeps ids 1, 2, 3 (0.65 < 0.7 <= 0.85)
  p.min_p = 0;
  EXPECT_EQ(Support(Histogram(p, logits, 3000)), (std::set<int32_t>{1, 2, 3}));
  p.min_p = 0.6;
  EXPECT_EQ(Support(Histogram(p, logits, 3000)), (std::set<int32_t>{1, 2}));
}

TEST(Sampler, DrawsFromEveryBlockOfALargeVocabulary) {
  // Four equally likely tokens spread over the blocks of the unfiltered walk, the rest impossible.
  std::vector<float> logits(kQwenVocab, kNegInf);
  const std::vector<int32_t> ids = {3, 70000, 151000, 151935};
  for (int32_t id : ids) logits[id] = 1.0f;
  constexpr int kDraws = 4000;
  const auto counts = Histogram(Seeded(5), logits, kDraws);
  ASSERT_EQ(counts.size(), 4u);
  for (int32_t id : ids) EXPECT_NEAR(counts.at(id) / double(kDraws), 0.25, 0.03) << id;
}

// Processed logits -> the expected SampleResult of a greedy draw with all logprobs.
void ExpectLogprobs(const SampleResult& r, const std::vector<float>& processed) {
  const std::vector<double> expected = LogSoftmax(processed);
  EXPECT_NEAR(r.logprob, expected[r.token], 1e-5);
  std::vector<int32_t> order(processed.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return expected[a] > expected[b]; });
  ASSERT_EQ(r.top.size(), std::min<size_t>(processed.size(), 20));
  for (size_t i = 0; i < r.top.size(); ++i) {
    EXPECT_EQ(r.top[i].token, order[i]) << i;
    EXPECT_NEAR(r.top[i].logprob, expected[order[i]], 1e-5) << i;
  }
}

TEST(Sampler, PenaltiesFollowTheirDefinitions) {
  const std::vector<float> raw = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f, -2.0f};
  const std::vector<int32_t> prompt = {0, 1, 1};
  const std::vector<int32_t> output = {3, 3, 2};
  struct Case {
    double repetition, presence, frequency;
  };
  for (const Case& c : {Case{1.5, 0, 0}, Case{0.5, 0, 0}, Case{1, 0.5, 0}, Case{1, 0, 0.25}, Case{1, -1.0, 0.75},
                        Case{1.3, 0.5, 0.25}}) {
    SamplingParams p;
    p.temperature = 0;
    p.repetition_penalty = c.repetition;
    p.presence_penalty = c.presence;
    p.frequency_penalty = c.frequency;
    p.logprobs = true;
    p.top_logprobs = 6;
    Sampler s(p, 6, prompt);
    for (int32_t t : output) s.Accept(t);
    std::vector<float> expected = raw;
    for (int32_t t : {0, 1, 2, 3}) {  // repetition: prompt and output tokens, once each
      const double l = raw[t];
      expected[t] = static_cast<float>(l > 0 ? l / c.repetition : l * c.repetition);
    }
    expected[3] = static_cast<float>(expected[3] - c.presence - 2 * c.frequency);
    expected[2] = static_cast<float>(expected[2] - c.presence - 1 * c.frequency);
    const SampleResult r = SampleOnce(s, raw);
    SCOPED_TRACE(testing::Message() << "repetition " << c.repetition << " presence " << c.presence << " frequency "
                                    << c.frequency);
    EXPECT_EQ(r.token, std::max_element(expected.begin(), expected.end()) - expected.begin());
    ExpectLogprobs(r, expected);
  }
}

TEST(Sampler, LogitBiasBansAndForces) {
  const std::vector<float> logits = {5.0f, 1.0f, 0.5f, 0.0f, -1.0f, -3.0f};
  SamplingParams ban = Seeded();
  ban.logit_bias = {{0, -100.0f}};
  EXPECT_EQ(Histogram(ban, logits, 2000).count(0), 0u);
  SamplingParams force = Seeded();
  force.logit_bias = {{5, 100.0f}};
  force.temperature = 1.5;
  EXPECT_EQ(Support(Histogram(force, logits, 2000)), std::set<int32_t>{5});
  // The bias shows in the logprobs.
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias = {{4, 6.5f}, {0, -2.0f}};
  p.logprobs = true;
  p.top_logprobs = 6;
  Sampler s(p, 6, {});
  std::vector<float> expected = logits;
  expected[4] += 6.5f;
  expected[0] -= 2.0f;
  const SampleResult r = SampleOnce(s, logits);
  EXPECT_EQ(r.token, 4);
  ExpectLogprobs(r, expected);
}

std::vector<uint32_t> MaskOf(int64_t vocab, const std::set<int32_t>& allowed) {
  std::vector<uint32_t> mask(static_cast<size_t>((vocab + 31) / 32), 0);
  for (int32_t id : allowed) mask[id / 32] |= 1u << (id % 32);
  return mask;
}

TEST(Sampler, AllowedMaskExcludesTokens) {
  const std::vector<float> logits = RandomLogits(70, 1.0, 21);
  const std::set<int32_t> allowed = {1, 31, 32, 33, 64, 69};
  const std::vector<uint32_t> mask = MaskOf(70, allowed);
  const auto counts = Histogram(Seeded(), logits, 3000, mask);
  EXPECT_EQ(Support(counts), allowed);
  // A single allowed token is chosen whatever the temperature, its logit or the filters.
  std::vector<float> low = logits;
  low[45] = -50.0f;
  const std::vector<uint32_t> one = MaskOf(70, {45});
  for (double temperature : {0.0, 1.0, 50.0}) {
    SamplingParams p = Seeded();
    p.temperature = temperature;
    p.top_p = 0.5;
    p.min_p = 0.2;
    p.top_k = temperature == 1.0 ? 10 : 0;
    p.logprobs = true;
    p.top_logprobs = 5;
    Sampler s(p, 70, {});
    for (int i = 0; i < 50; ++i) {
      const SampleResult r = SampleOnce(s, low, one);
      ASSERT_EQ(r.token, 45);
      EXPECT_EQ(r.logprob, 0.0f);
      ASSERT_EQ(r.top.size(), 1u);  // masked tokens are never listed
      EXPECT_EQ(r.top[0].token, 45);
    }
  }
  Sampler s(Seeded(), 70, {});
  const std::vector<uint32_t> none = MaskOf(70, {});
  try {
    SampleOnce(s, logits, none);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
  }
}

TEST(Sampler, PaddingIdsAreNeverSampledNorListed) {
  // A vocabulary of 1000 logits of which the first 900 are sampleable; the padding ids have the largest.
  constexpr int64_t kVocab = 1000, kSampleable = 900;
  std::vector<float> logits = RandomLogits(kVocab, 1.0, 5);
  for (int64_t id = kSampleable; id < kVocab; ++id) logits[id] = 20.0f;
  const std::vector<float> real(logits.begin(), logits.begin() + kSampleable);
  const std::vector<double> expected = LogSoftmax(real);  // logprobs are over the sampleable ids alone
  const std::set<int32_t> allowed_ids = {3, 500, 899, 900, 950, 999};
  const std::vector<uint32_t> mask = MaskOf(kVocab, allowed_ids);
  struct Mode {
    double temperature;
    int top_k;
    double top_p, min_p;
    bool masked;
  };
  for (const Mode& m : std::vector<Mode>{{0, 0, 1, 0, false}, {1, 0, 1, 0, false}, {5, 0, 1, 0, false},
                                         {1, 5, 1, 0, false}, {1, 950, 1, 0, false}, {1, 0, 0.5, 0, false},
                                         {1, 0, 1, 0.1, false}, {0, 0, 1, 0, true}, {2, 3, 0.9, 0, true}}) {
    SCOPED_TRACE(::testing::Message() << "temperature " << m.temperature << " top_k " << m.top_k << " top_p "
                                      << m.top_p << " min_p " << m.min_p << (m.masked ? " masked" : ""));
    SamplingParams p = Seeded();
    p.temperature = m.temperature;
    p.top_k = m.top_k;
    p.top_p = m.top_p;
    p.min_p = m.min_p;
    p.logit_bias = {{950, 100.0f}};
    p.logprobs = true;
    p.top_logprobs = 20;
    Sampler s(p, kVocab, {}, kSampleable);
    for (int i = 0; i < 200; ++i) {
      const SampleResult r = SampleOnce(s, logits, m.masked ? mask : std::vector<uint32_t>());
      ASSERT_LT(r.token, kSampleable);
      if (m.masked) {
        EXPECT_TRUE(allowed_ids.count(r.token)) << r.token;
      }
      ASSERT_EQ(r.top.size(), m.masked ? 3u : 20u);
      for (const TokenLogprob& t : r.top) EXPECT_LT(t.token, kSampleable);
      if (!m.masked) {
        EXPECT_NEAR(r.logprob, expected[r.token], 1e-4);
      }
    }
  }
  // Only padding allowed: nothing can be sampled.
  Sampler s(Seeded(), kVocab, {}, kSampleable);
  const std::vector<uint32_t> padding_only = MaskOf(kVocab, {900, 999});
  try {
    SampleOnce(s, logits, padding_only);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
  }
}

TEST(Sampler, LogprobsMatchLogSoftmaxInDouble) {
  const std::vector<float> logits = RandomLogits(kQwenVocab, 3.0, 17);
  const std::vector<double> expected = LogSoftmax(logits);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 20, order.end(),
                    [&](int32_t a, int32_t b) { return expected[a] > expected[b]; });
  SamplingParams p = Seeded();
  p.temperature = 0.7;
  p.top_k = 40;
  p.top_p = 0.9;
  p.logprobs = true;
  p.top_logprobs = 20;
  Sampler s(p, kQwenVocab, {});
  for (int i = 0; i < 20; ++i) {
    const SampleResult r = SampleOnce(s, logits);
    EXPECT_NEAR(r.logprob, expected[r.token], 1e-4);
    ASSERT_EQ(r.top.size(), 20u);
    for (size_t j = 0; j < 20; ++j) {
      EXPECT_EQ(r.top[j].token, order[j]);
      EXPECT_NEAR(r.top[j].logprob, expected[order[j]], 1e-4);
    }
  }
  // Without top_logprobs only the chosen token's logprob; without logprobs nothing.
  p.top_logprobs = 0;
  Sampler t(p, kQwenVocab, {});
  SampleResult r = SampleOnce(t, logits);
  EXPECT_TRUE(r.top.empty());
  EXPECT_NEAR(r.logprob, expected[r.token], 1e-4);
  p.logprobs = false;
  Sampler u(p, kQwenVocab, {});
  r = SampleOnce(u, logits);
  EXPECT_TRUE(r.top.empty());
  EXPECT_EQ(r.logprob, 0.0f);
}

TEST(Sampler, NonFiniteLogitsAreAnInternalError) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> logits(100, 0.0f);
    logits[37] = bad;
    Sampler s(Seeded(), 100, {});
    try {
      SampleOnce(s, logits);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInternal);
      EXPECT_NE(std::string(e.what()).find("37"), std::string::npos) << e.what();
    }
  }
}

void ExpectInvalid(const SamplingParams& p, const std::string& field) {
  try {
    p.Validate(1000);
    ADD_FAILURE() << "expected an error naming " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()).rfind(field + ":", 0), 0u) << e.what();
  }
}

TEST(SamplingParams, ValidateNamesTheField) {
  SamplingParams ok;
  EXPECT_NO_THROW(ok.Validate(1000));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto with = [](auto edit) {
    SamplingParams p;
    edit(p);
    return p;
  };
  ExpectInvalid(with([](SamplingParams& p) { p.temperature = -0.1; }), "temperature");
  ExpectInvalid(with([&](SamplingParams& p) { p.temperature = nan; }), "temperature");
  ExpectInvalid(with([](SamplingParams& p) { p.top_p = 0; }), "top_p");
  ExpectInvalid(with([](SamplingParams& p) { p.top_p = 1.5; }), "top_p");
  ExpectInvalid(with([](SamplingParams& p) { p.top_k = -2; }), "top_k");
  ExpectInvalid(with([](SamplingParams& p) { p.min_p = 1.01; }), "min_p");
  ExpectInvalid(with([](SamplingParams& p) { p.min_p = -0.1; }), "min_p");
  ExpectInvalid(with([](SamplingParams& p) { p.presence_penalty = 2.5; }), "presence_penalty");
  ExpectInvalid(with([](SamplingParams& p) { p.frequency_penalty = -2.5; }), "frequency_penalty");
  ExpectInvalid(with([](SamplingParams& p) { p.repetition_penalty = 0; }), "repetition_penalty");
  ExpectInvalid(with([](SamplingParams& p) { p.logit_bias = {{1000, 1.0f}}; }), "logit_bias");
  ExpectInvalid(with([](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }), "logit_bias");
  ExpectInvalid(with([](SamplingParams& p) { p.logit_bias = {{5, 100.5f}}; }), "logit_bias");
  ExpectInvalid(with([](SamplingParams& p) { p.logit_bias = {{5, 1.0f}, {6, 1.0f}, {5, 2.0f}}; }), "logit_bias");
  ExpectInvalid(with([](SamplingParams& p) { p.logprobs = true, p.top_logprobs = 21; }), "top_logprobs");
  ExpectInvalid(with([](SamplingParams& p) { p.top_logprobs = 3; }), "top_logprobs");
  EXPECT_NO_THROW(with([](SamplingParams& p) {
                    p.top_k = -1, p.top_p = 1, p.min_p = 1, p.temperature = 0, p.logprobs = true;
                    p.top_logprobs = 20, p.logit_bias = {{0, -100.0f}, {999, 100.0f}};
                  }).Validate(1000));
  // The message says what was expected and what was found.
  try {
    with([](SamplingParams& p) { p.top_p = 1.5; }).Validate(1000);
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "top_p: expected a number in (0, 1], got 1.5");
  }
  // The Sampler validates its parameters and the prompt.
  EXPECT_THROW(Sampler(with([](SamplingParams& p) { p.top_p = 2; }), 1000, {}), Error);
  const std::vector<int32_t> bad_prompt = {1, 2, 1000};
  try {
    Sampler s(SamplingParams{}, 1000, bad_prompt);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("prompt_tokens[2]:", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace infernix
