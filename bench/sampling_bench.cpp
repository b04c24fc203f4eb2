// Sampler::Sample over a Qwen-sized vocabulary (151,936 tokens): time per token. Each iteration
// copies the logits into the scratch buffer Sample consumes; BM_CopyLogits times that copy alone.
//
// Logit distributions (fixed seeds):
//   model: N(0, 1.5) plus 8 tokens at 10..16, shaped like a language model's output (the top token
//          holds about half the mass at T = 1, a long tail holds a few percent);
//   broad: N(0, 2.5), high entropy (at T = 1 the 0.95 nucleus holds ~30k tokens);
//   flat:  N(0, 0.5), nearly uniform (the nucleus spans most of the vocabulary): the worst case for
//          top-p without top-k.
// BM_StepOfSequences: one decode step's sampling for several sequences (each its own sampler and logits
// row, top_k = 20, top_p = 0.95, T = 0.7), on a pool of 1, 2, 4 or 8 threads as the engine spreads them
// (EngineOptions::sampling_threads); time per step.
// Flags are Google Benchmark's (--benchmark_filter=..., --benchmark_min_time=...).
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "engine/sampling.h"

namespace infernix {
namespace {

constexpr int64_t kVocab = 151936;

std::vector<float> Normal(double stddev, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, stddev);
  std::vector<float> out(kVocab);
  for (float& x : out) x = static_cast<float>(normal(rng));
  return out;
}

const std::vector<float>& Model() {
  static const std::vector<float> logits = [] {
    std::vector<float> out = Normal(1.5, 1);
    const float top[] = {16, 15, 14.5f, 14, 13, 12, 11, 10};
    for (int i = 0; i < 8; ++i) out[(i * 40009 + 777) % kVocab] = top[i];
    return out;
  }();
  return logits;
}

const std::vector<float>& Broad() {
  static const std::vector<float> logits = Normal(2.5, 2);
  return logits;
}

const std::vector<float>& Flat() {
  static const std::vector<float> logits = Normal(0.5, 3);
  return logits;
}

struct Setup {
  SamplingParams params;
  std::vector<int32_t> prompt;
  int output_tokens = 0;
  std::vector<uint32_t> mask;
};

void Run(benchmark::State& state, const Setup& setup, const std::vector<float>& logits) {
  Sampler sampler(setup.params, kVocab, setup.prompt);
  std::mt19937 rng(7);
  for (int i = 0; i < setup.output_tokens; ++i) sampler.Accept(static_cast<int32_t>(rng() % kVocab));
  std::vector<float> scratch(kVocab);
  for (auto _ : state) {
    std::memcpy(scratch.data(), logits.data(), kVocab * sizeof(float));
    SampleResult r = sampler.Sample(scratch, setup.mask);
    benchmark::DoNotOptimize(r);
  }
}

Setup Params(double temperature, int top_k, double top_p, double min_p = 0) {
  Setup s;
  s.params.seed = 1;
  s.params.temperature = temperature;
  s.params.top_k = top_k;
  s.params.top_p = top_p;
  s.params.min_p = min_p;
  return s;
}

void BM_CopyLogits(benchmark::State& state) {
  std::vector<float> scratch(kVocab);
  for (auto _ : state) {
    std::memcpy(scratch.data(), Model().data(), kVocab * sizeof(float));
    benchmark::DoNotOptimize(scratch.data());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_CopyLogits);

void BM_Greedy(benchmark::State& state) { Run(state, Params(0, 0, 1), Model()); }
BENCHMARK(BM_Greedy);

// The target configuration: top_k = 20, top_p = 0.95 (temperature 0.7).
void BM_TopK20TopP095(benchmark::State& state, const std::vector<float>& (*logits)()) {
  Run(state, Params(0.7, 20, 0.95), logits());
}
BENCHMARK_CAPTURE(BM_TopK20TopP095, model, Model);
BENCHMARK_CAPTURE(BM_TopK20TopP095, broad, Broad);
BENCHMARK_CAPTURE(BM_TopK20TopP095, flat, Flat);

void BM_TopK20TopP095Logprobs20(benchmark::State& state) {
  Setup s = Params(0.7, 20, 0.95);
  s.params.logprobs = true;
  s.params.top_logprobs = 20;
  Run(state, s, Model());
}
BENCHMARK(BM_TopK20TopP095Logprobs20);

// Repetition, presence and frequency penalties over a 4,000-token prompt and 1,000 output tokens.
void BM_TopK20TopP095Penalties(benchmark::State& state) {
  Setup s = Params(0.7, 20, 0.95);
  s.params.repetition_penalty = 1.1;
  s.params.presence_penalty = 0.5;
  s.params.frequency_penalty = 0.3;
  std::mt19937 rng(3);
  for (int i = 0; i < 4000; ++i) s.prompt.push_back(static_cast<int32_t>(rng() % kVocab));
  s.output_tokens = 1000;
  Run(state, s, Model());
}
BENCHMARK(BM_TopK20TopP095Penalties);

// An allowed mask (grammar constraints) that excludes every other token.
void BM_TopK20TopP095HalfMasked(benchmark::State& state) {
  Setup s = Params(0.7, 20, 0.95);
  s.mask.assign((kVocab + 31) / 32, 0x55555555u);
  Run(state, s, Model());
}
BENCHMARK(BM_TopK20TopP095HalfMasked);

void BM_TopK(benchmark::State& state) { Run(state, Params(1.0, static_cast<int>(state.range(0)), 1), Model()); }
BENCHMARK(BM_TopK)->Arg(1)->Arg(50)->Arg(1000)->Arg(5000);

// top_p = 0.95 alone at T = 1.
void BM_TopP095(benchmark::State& state, const std::vector<float>& (*logits)()) {
  Run(state, Params(1.0, 0, 0.95), logits());
}
BENCHMARK_CAPTURE(BM_TopP095, model, Model);
BENCHMARK_CAPTURE(BM_TopP095, broad, Broad);
BENCHMARK_CAPTURE(BM_TopP095, flat, Flat);

void BM_MinP005(benchmark::State& state, const std::vector<float>& (*logits)()) {
  Run(state, Params(1.0, 0, 1, 0.05), logits());
}
BENCHMARK_CAPTURE(BM_MinP005, model, Model);
BENCHMARK_CAPTURE(BM_MinP005, flat, Flat);

// No filters: temperature 0.8 over the whole vocabulary.
void BM_TemperatureOnly(benchmark::State& state) { Run(state, Params(0.8, 0, 1), Model()); }
BENCHMARK(BM_TemperatureOnly);

void BM_StepOfSequences(benchmark::State& state) {
  const auto rows = static_cast<size_t>(state.range(0));
  ThreadPool pool(static_cast<size_t>(state.range(1)));
  std::vector<std::unique_ptr<Sampler>> samplers;
  std::vector<std::vector<float>> scratch(rows, std::vector<float>(kVocab));
  for (size_t i = 0; i < rows; ++i) {
    Setup s = Params(0.7, 20, 0.95);
    s.params.seed = 1 + i;
    samplers.push_back(std::make_unique<Sampler>(s.params, kVocab, s.prompt));
  }
  std::vector<SampleResult> picked(rows);
  for (auto _ : state) {
    pool.ParallelFor(rows, 1, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        std::memcpy(scratch[i].data(), Model().data(), kVocab * sizeof(float));
        picked[i] = samplers[i]->Sample(scratch[i], {});
      }
    });
    benchmark::DoNotOptimize(picked.data());
  }
}
BENCHMARK(BM_StepOfSequences)->ArgsProduct({{8}, {1, 2, 4, 8}})->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace infernix

BENCHMARK_MAIN();
