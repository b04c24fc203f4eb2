// Grammar-constrained decoding over the real Qwen3 vocabulary (151,669 tokens): the cost of one
// token step (FillNextTokenBitmask + AcceptToken) along a JSON document, with the JSON grammar of
// grammar::JsonGbnf(). Reported as time per token ("per_token" counter, in seconds).
//
//   BM_JsonStepUncached: the per-state mask cache off, every mask assembled from the per-stack masks
//                        (computed in the first iteration) plus the recheck of uncertain tokens.
//   BM_JsonStepCached:   one matcher reused over the document many times (rolled back between
//                        passes), so states repeat; the steady state of a long generation.
//   BM_JsonStepFresh:    a new matcher per document over a TokenGrammar shared by all of them
//                        (per-stack masks warm, per-state mask cache cold): a new request with a
//                        grammar seen before.
//   BM_JsonStepCold:     a new TokenGrammar and matcher per document: the first request with a
//                        new grammar (includes computing every per-stack mask it meets).
//   BM_BuildVocabulary / BM_CompileJson: the one-off costs.
// Flags are Google Benchmark's (--benchmark_filter=..., --benchmark_min_time=...).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "base/file_set.h"
#include "grammar/gbnf.h"
#include "grammar/token_matcher.h"
#include "tokenizer/tokenizer.h"

namespace infernix::grammar {
namespace {

const Tokenizer& Qwen() {
  static const std::unique_ptr<Tokenizer> tokenizer = [] {
    const char* env = std::getenv("INFERNIX_FIXTURES_DIR");
    const std::string dir = env != nullptr && *env != '\0' ? env : INFERNIX_FIXTURES_DIR;
    return Tokenizer::Load(DirFileSet(dir + "/tokenizers/qwen3"));
  }();
  return *tokenizer;
}

const std::shared_ptr<const TokenVocabulary>& Vocab() {
  static const auto vocab = TokenVocabulary::FromTokenizer(Qwen());
  return vocab;
}

const std::shared_ptr<const CompiledGrammar>& Json() {
  static const auto grammar = std::make_shared<const CompiledGrammar>(ParseGbnf(JsonGbnf()));
  return grammar;
}

const std::vector<int32_t>& Document() {
  static const std::vector<int32_t> ids = Qwen().Encode(R"({
  "id": "req-20931",
  "user": {"name": "Ada Lovelace", "email": "ada@example.com", "age": 36, "verified": true},
  "items": [
    {"sku": "A-113", "title": "Analytical engine notes", "price": 12.5, "qty": 2},
    {"sku": "B-7", "title": "Punched cards, box of 500", "price": 3.25e1, "qty": 1, "tags": ["paper", "io"]}
  ],
  "notes": "Deliver before Tuesday; leave at the door \u2014 thanks!",
  "total": 57.5,
  "gift": null
})");
  return ids;
}

// Runs the document through `m`. `best` (if given, one entry per token) keeps the fastest time of
// each step's FillNextTokenBitmask over the iterations: its maximum is the slowest step, free of
// scheduling noise.
void Step(benchmark::State& state, TokenMatcher& m, std::vector<uint32_t>& mask, std::vector<double>* best = nullptr) {
  for (size_t i = 0; i < Document().size(); ++i) {
    const int32_t id = Document()[i];
    const auto start = std::chrono::steady_clock::now();
    m.FillNextTokenBitmask(mask);
    if (best != nullptr) {
      (*best)[i] = std::min((*best)[i], std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    if (!((mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1) || !m.AcceptToken(id)) {
      state.SkipWithError("the document was refused");
      return;
    }
  }
  benchmark::DoNotOptimize(mask.data());
}

void SetCounters(benchmark::State& state) {
  state.counters["per_token"] = benchmark::Counter(static_cast<double>(Document().size()),
                                                   benchmark::Counter::kIsIterationInvariantRate |
                                                       benchmark::Counter::kInvert);
  state.counters["tokens"] = static_cast<double>(Document().size());
}

void BM_JsonStepUncached(benchmark::State& state) {
  TokenMatcher m(Json(), Vocab(), {151643, 151645});
  m.set_cache_capacity(0);
  std::vector<uint32_t> mask(m.mask_words());
  Step(state, m, mask);  // computes the per-stack masks
  m.Rollback(m.num_accepted());
  std::vector<double> best(Document().size(), 1e9);
  for (auto _ : state) {
    Step(state, m, mask, &best);
    m.Rollback(m.num_accepted());
  }
  SetCounters(state);
  state.counters["slowest_step"] = *std::max_element(best.begin(), best.end());
}
BENCHMARK(BM_JsonStepUncached)->Unit(benchmark::kMillisecond);

void BM_JsonStepCached(benchmark::State& state) {
  TokenMatcher m(Json(), Vocab(), {151643, 151645});
  std::vector<uint32_t> mask(m.mask_words());
  for (auto _ : state) {
    Step(state, m, mask);
    m.Rollback(m.num_accepted());
  }
  SetCounters(state);
  state.counters["cache_hit_rate"] =
      static_cast<double>(m.cache_hits()) / static_cast<double>(m.cache_hits() + m.cache_misses());
}
BENCHMARK(BM_JsonStepCached)->Unit(benchmark::kMillisecond);

void BM_JsonStepFresh(benchmark::State& state) {
  auto compiled = std::make_shared<TokenGrammar>(Json(), Vocab());
  {  // warm the shared per-stack masks
    TokenMatcher m(compiled, {151643, 151645});
    std::vector<uint32_t> mask(m.mask_words());
    Step(state, m, mask);
  }
  double hits = 0, total = 0;
  std::vector<double> best(Document().size(), 1e9);
  for (auto _ : state) {
    TokenMatcher m(compiled, {151643, 151645});
    std::vector<uint32_t> mask(m.mask_words());
    Step(state, m, mask, &best);
    hits += static_cast<double>(m.cache_hits());
    total += static_cast<double>(m.cache_hits() + m.cache_misses());
  }
  SetCounters(state);
  state.counters["cache_hit_rate"] = hits / total;
  state.counters["slowest_step"] = *std::max_element(best.begin(), best.end());
}
BENCHMARK(BM_JsonStepFresh)->Unit(benchmark::kMillisecond);

void BM_JsonStepCold(benchmark::State& state) {
  for (auto _ : state) {
    TokenMatcher m(Json(), Vocab(), {151643, 151645});
    std::vector<uint32_t> mask(m.mask_words());
    Step(state, m, mask);
  }
  SetCounters(state);
}
BENCHMARK(BM_JsonStepCold)->Unit(benchmark::kMillisecond);

// The plain trie walk at every step (no per-stack masks, no cache): the cost the caches avoid.
void BM_JsonStepTrieWalk(benchmark::State& state) {
  TokenMatcher m(Json(), Vocab(), {151643, 151645});
  m.set_cache_capacity(0);
  m.set_cut_depth(0);
  std::vector<uint32_t> mask(m.mask_words());
  for (auto _ : state) {
    Step(state, m, mask);
    m.Rollback(m.num_accepted());
  }
  SetCounters(state);
}
BENCHMARK(BM_JsonStepTrieWalk)->Unit(benchmark::kMillisecond);

void BM_BuildVocabulary(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(TokenVocabulary::FromTokenizer(Qwen()));
}
BENCHMARK(BM_BuildVocabulary)->Unit(benchmark::kMillisecond);

void BM_CompileJson(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(std::make_shared<const CompiledGrammar>(ParseGbnf(JsonGbnf())));
}
BENCHMARK(BM_CompileJson)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace infernix::grammar

BENCHMARK_MAIN();
