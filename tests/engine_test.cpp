// The continuous-batching engine on a real model: concurrent requests give exactly the tokens they
// give alone (the scheduler mixes decode tokens and prompt chunks of different requests in one
// forward pass), stop conditions, cancellation, a full queue and context overflow.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "engine/generator.h"
#include "test_util.h"

namespace infernix {
namespace {

using testing::ModelDir;

struct Collected {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<float> logprobs;  // each token's (0 unless the request asked for logprobs)
  RequestUpdate final_update;
};

Collected Collect(RequestHandle& h) {
  Collected c;
  RequestUpdate u;
  while (!c.final_update.finished) {
    if (!h.Wait(&u, std::chrono::milliseconds(20000))) {
      ADD_FAILURE() << "no update for 20 s";
      break;
    }
    for (const auto& t : u.tokens) {
      c.tokens.push_back(t.token);
      c.text += t.text;
      c.logprobs.push_back(t.logprob);
    }
    if (u.finished) c.final_update = u;
  }
  return c;
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    files_ = std::make_unique<DirFileSet>(ModelDir("qwen3-next-e2e"));
    backend_ = std::make_unique<CpuBackend>(2);
    model_ = LoadModel(*files_, *backend_);
    tokenizer_ = Tokenizer::Load(*files_);
  }
  static EngineOptions Options(int slots, size_t queue, int64_t context = 512, int64_t chunk = 7,
                               int sampling_threads = 0, KvCacheType kv = KvCacheType::kActivation) {
    EngineOptions o;
    o.kv_cache_type = kv;
    o.sampling_threads = sampling_threads;
    o.max_slots = slots;
    o.max_queue = queue;
    o.max_context = context;
    o.prefill_chunk = chunk;  // small: long prompts are prefilled over several steps, mixed with decodes
    o.max_batch_tokens = 16;
    return o;
  }
  std::unique_ptr<Engine> MakeEngine(int slots, size_t queue, int64_t context = 512, int64_t chunk = 7,
                                     int sampling_threads = 0, KvCacheType kv = KvCacheType::kActivation) {
    return std::make_unique<Engine>(*model_, *tokenizer_, Options(slots, queue, context, chunk, sampling_threads, kv));
  }
  GenerationRequest Greedy(std::vector<int32_t> prompt, int n) {
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.max_new_tokens = n;
    r.sampling.temperature = 0;
    return r;
  }
  std::vector<int32_t> Prompt(int i) {
    std::vector<int32_t> p;
    for (int k = 0; k < 5 + 4 * i; ++k) p.push_back(100 + 37 * i + 11 * k);
    return p;
  }
  std::unique_ptr<DirFileSet> files_;
  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(EngineTest, ConcurrentRequestsEqualGreedyGenerationAlone) {
  auto engine = MakeEngine(4, 16);
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (int i = 0; i < 6; ++i) {  // more than the slots: two wait, then join as others finish
    Submission s = engine->Submit(Greedy(Prompt(i), 6 + i));
    ASSERT_EQ(s.status, SubmitStatus::kAccepted) << s.message;
    handles.push_back(s.handle);
  }
  // The references run on a backend of their own: a backend serves one thread (the engine's) at a time.
  CpuBackend reference_backend(1);
  auto reference = LoadModel(*files_, reference_backend);
  for (int i = 0; i < 6; ++i) {
    Collected c = Collect(*handles[static_cast<size_t>(i)]);
    GreedyOptions g;
    g.max_new_tokens = 6 + i;
    EXPECT_EQ(c.tokens, GreedyGenerate(*reference, Prompt(i), g)) << "request " << i;
    EXPECT_EQ(c.final_update.finish_reason, FinishReason::kLength);
    EXPECT_EQ(c.final_update.completion_tokens, 6 + i);
    EXPECT_EQ(c.final_update.prompt_tokens, static_cast<int64_t>(Prompt(i).size()));
    EXPECT_EQ(c.text, tokenizer_->Decode(c.tokens, true));
  }
  EngineStats st = engine->Stats();
  EXPECT_EQ(st.requests_finished, 6u);
  EXPECT_EQ(st.generated_tokens, 6u * 6 + 15);
}

// A backend that leaves every other row unpicked (-1, as for a row holding NaN or +inf) and counts its
// calls: the engine reads such rows back and samples them itself.
class HalfPickingBackend : public CpuBackend {
 public:
  using CpuBackend::CpuBackend;
  std::vector<int32_t> PickGreedy(const Tensor& logits, int64_t sampleable) override {
    std::vector<int32_t> ids = CpuBackend::PickGreedy(logits, sampleable);
    for (size_t i = 0; i < ids.size(); i += 2) ids[i] = -1;
    ++calls;
    return ids;
  }
  int calls = 0;
};

// Greedy requests give the tokens greedy generation gives alone whether their steps take the backend's
// picks (EngineOptions::backend_picks), fall back to the logits for rows the backend did not pick, or
// read the logits because a sampled request shares the step.
TEST_F(EngineTest, GreedyTokensDoNotDependOnWhoPicksThem) {
  CpuBackend reference_backend(1);
  auto reference = LoadModel(*files_, reference_backend);
  std::vector<std::vector<int32_t>> expected;
  for (int i = 0; i < 3; ++i) {
    GreedyOptions g;
    g.max_new_tokens = 6 + i;
    expected.push_back(GreedyGenerate(*reference, Prompt(i), g));
  }
  HalfPickingBackend backend(2);
  auto model = LoadModel(*files_, backend);
  for (const bool backend_picks : {true, false}) {
    for (const bool with_sampled : {false, true}) {
      EngineOptions o = Options(4, 16);
      o.backend_picks = backend_picks;
      o.pipeline_picks = false;  // a row left unpicked is then read back (PipelinedGreedy... below: not so)
      const int calls_before = backend.calls;
      Engine engine(*model, *tokenizer_, o);
      std::vector<std::shared_ptr<RequestHandle>> handles;
      for (int i = 0; i < 3; ++i) {
        Submission s = engine.Submit(Greedy(Prompt(i), 6 + i));
        ASSERT_EQ(s.status, SubmitStatus::kAccepted) << s.message;
        handles.push_back(s.handle);
      }
      std::shared_ptr<RequestHandle> sampled;
      if (with_sampled) {
        GenerationRequest r = Greedy(Prompt(3), 20);
        r.sampling.temperature = 1.0;
        r.sampling.seed = 7;
        Submission s = engine.Submit(std::move(r));
        ASSERT_EQ(s.status, SubmitStatus::kAccepted) << s.message;
        sampled = s.handle;
      }
      for (int i = 0; i < 3; ++i) {
        Collected c = Collect(*handles[static_cast<size_t>(i)]);
        EXPECT_EQ(c.tokens, expected[static_cast<size_t>(i)])
            << "request " << i << (backend_picks ? ", backend picks" : ", logits")
            << (with_sampled ? ", with a sampled one" : "");
      }
      if (sampled) {
        EXPECT_EQ(Collect(*sampled).tokens.size(), 20u);
      }
      if (backend_picks && !with_sampled) {
        EXPECT_GT(backend.calls, calls_before);
      }
      if (!backend_picks) {
        EXPECT_EQ(backend.calls, calls_before);
      }
    }
  }
}

// A backend that counts the passes whose token ids it takes from the picks before them.
class FeedCountingBackend : public CpuBackend {
 public:
  using CpuBackend::CpuBackend;
  void FeedPickedTokens(std::span<const int32_t> rows, Tensor ids) override {
    ++fed;
    CpuBackend::FeedPickedTokens(rows, ids);
  }
  int fed = 0;
};

// Pipelined greedy steps (EngineOptions::pipeline_picks: each decode step queued before the picks of the
// one before are read, its ids fed from them) give the tokens of the unpipelined engine: with requests
// that stop at a stop token, whose one step more is dropped, requests ending by max_new_tokens at different
// steps and requests joining while others decode.
TEST_F(EngineTest, PipelinedGreedyStepsGiveTheTokensOfUnpipelinedOnes) {
  FeedCountingBackend backend(2);
  auto model = LoadModel(*files_, backend);
  std::vector<std::vector<int32_t>> tokens[2];
  std::vector<FinishReason> reasons[2];
  for (const bool pipeline : {false, true}) {
    EngineOptions o = Options(3, 16);
    o.pipeline_picks = pipeline;
    const int fed_before = backend.fed;
    Engine engine(*model, *tokenizer_, o);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<RequestHandle>> handles;
    for (int i = 0; i < 6; ++i) {  // more than the slots: some join while others decode
      GenerationRequest r = Greedy(Prompt(i), 5 + 2 * i);
      // Odd requests of the pipelined run stop at their third token of the unpipelined one.
      if (i % 2 == 1 && pipeline) r.stop_token_ids = {tokens[0][static_cast<size_t>(i)][2]};
      Submission s = engine.Submit(std::move(r));
      ASSERT_EQ(s.status, SubmitStatus::kAccepted) << s.message;
      handles.push_back(s.handle);
    }
    for (auto& h : handles) {
      Collected c = Collect(*h);
      tokens[pipeline].push_back(c.tokens);
      reasons[pipeline].push_back(c.final_update.finish_reason);
    }
    // Steps overlap when pipelined; the time counted for them (/metrics) still fits in the run's.
    const double counted = engine.Stats().step_seconds_sum;  // read first: every step it counts has ended
    EXPECT_LE(counted, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (pipeline) {
      EXPECT_GT(backend.fed, fed_before);
    } else {
      EXPECT_EQ(backend.fed, fed_before);
    }
  }
  for (size_t i = 0; i < 6; ++i) {
    std::vector<int32_t> want = tokens[0][i];
    FinishReason reason = reasons[0][i];
    if (i % 2 == 1) {  // the pipelined run stopped at the first occurrence of its third token
      const auto stop = std::find(want.begin(), want.end(), want[2]);
      want.erase(stop + 1, want.end());
      reason = FinishReason::kStop;
    }
    EXPECT_EQ(tokens[1][i], want) << "request " << i;
    EXPECT_EQ(reasons[1][i], reason) << "request " << i;
  }
}

// A backend that counts the picks it makes with draws, and the passes fed from picks.
class DrawCountingBackend : public CpuBackend {
 public:
  using CpuBackend::CpuBackend;
  void QueuePick(const Tensor& logits, int64_t sampleable, std::span<const TokenDraw> draws) override {
    drawn += !draws.empty();
    CpuBackend::QueuePick(logits, sampleable, draws);
  }
  void FeedPickedTokens(std::span<const int32_t> rows, Tensor ids) override {
    ++fed;
    CpuBackend::FeedPickedTokens(rows, ids);
  }
  int drawn = 0, fed = 0;
};

// Seeded top-k requests (Sampler::PlainDraw) give the same tokens whether the engine samples their logits
// itself, takes the backend's draws step by step, or pipelines those steps; with a greedy request in the
// same steps (a pick of greedy and drawn rows) and a top-p-only request (sampled here, so the steps it shares
// read the logits back) joining later.
TEST_F(EngineTest, SampledTokensDoNotDependOnWhoDrawsThem) {
  DrawCountingBackend backend(2);
  auto model = LoadModel(*files_, backend);
  auto request = [&](int i) {
    GenerationRequest r = Greedy(Prompt(i), 9 + i);
    if (i != 1) {
      r.sampling.temperature = 0.7 + 0.2 * i;
      r.sampling.top_k = i == 3 ? 0 : 5 + 3 * i;
      r.sampling.top_p = 0.9;
      r.sampling.seed = 11 + static_cast<uint64_t>(i);
    }
    return r;
  };
  std::vector<std::vector<int32_t>> tokens[3];
  for (int mode = 0; mode < 3; ++mode) {  // the engine's sampler; the backend's draws; pipelined
    EngineOptions o = Options(3, 16);
    o.backend_picks = mode > 0;
    o.pipeline_picks = mode == 2;
    const int drawn_before = backend.drawn, fed_before = backend.fed;
    Engine engine(*model, *tokenizer_, o);
    std::vector<std::shared_ptr<RequestHandle>> handles;
    for (int i = 0; i < 4; ++i) {  // the fourth waits for a slot
      Submission s = engine.Submit(request(i));
      ASSERT_EQ(s.status, SubmitStatus::kAccepted) << s.message;
      handles.push_back(s.handle);
    }
    for (auto& h : handles) tokens[mode].push_back(Collect(*h).tokens);
    if (mode == 0) {
      EXPECT_EQ(backend.drawn, drawn_before);
    } else {
      EXPECT_GT(backend.drawn, drawn_before) << "mode " << mode;
    }
    if (mode == 2) {
      EXPECT_GT(backend.fed, fed_before);
    } else {
      EXPECT_EQ(backend.fed, fed_before) << "mode " << mode;
    }
  }
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(tokens[0][i].size(), 9 + i);
    EXPECT_EQ(tokens[1][i], tokens[0][i]) << "request " << i << ", the backend's draws";
    EXPECT_EQ(tokens[2][i], tokens[0][i]) << "request " << i << ", pipelined";
  }
}

// A row the backend could not pick when the step after it has been queued over its logits: the request
// ends with an error (the unpipelined engine reads such a row back and lets the sampler name the fault).
TEST_F(EngineTest, PipelinedGreedyRowWithoutPickEndsItsRequest) {
  HalfPickingBackend backend(2);  // every other row unpicked: a lone request's row 0 each step
  auto model = LoadModel(*files_, backend);
  Engine engine(*model, *tokenizer_, Options(1, 4));
  Submission s = engine.Submit(Greedy(Prompt(0), 6));
  ASSERT_EQ(s.status, SubmitStatus::kAccepted) << s.message;
  Collected c = Collect(*s.handle);
  EXPECT_EQ(c.final_update.finish_reason, FinishReason::kError);
  EXPECT_TRUE(c.tokens.empty());
  EXPECT_NE(c.final_update.error.find("no pick on the backend"), std::string::npos) << c.final_update.error;
  // The engine goes on: the next request (on a backend that picks every row) is served.
  EngineOptions o = Options(1, 4);
  Engine next(*model_, *tokenizer_, o);
  Submission s2 = next.Submit(Greedy(Prompt(0), 6));
  ASSERT_EQ(s2.status, SubmitStatus::kAccepted) << s2.message;
  EXPECT_EQ(Collect(*s2.handle).tokens.size(), 6u);
}

// The sequences of a step sample at once on several threads: seeded requests with top-k / top-p,
// penalties and logprobs give the same tokens, logprobs and text whatever the number of threads, and
// the same as each request alone (one slot: the requests run one after another).
TEST_F(EngineTest, SampledConcurrentRequestsDoNotDependOnTheSamplingThreads) {
  auto run = [&](int slots, int threads) {
    auto engine = MakeEngine(slots, 16, 512, 7, threads);
    std::vector<std::shared_ptr<RequestHandle>> handles;
    for (int i = 0; i < 6; ++i) {
      GenerationRequest r;
      r.prompt = Prompt(i);
      r.max_new_tokens = 12;
      r.sampling.temperature = 1.3;
      r.sampling.top_k = 40;
      r.sampling.top_p = 0.9;
      r.sampling.presence_penalty = 0.5;
      r.sampling.logprobs = true;
      r.sampling.top_logprobs = 3;
      r.sampling.seed = 1000 + static_cast<uint64_t>(i);
      Submission s = engine->Submit(std::move(r));
      EXPECT_EQ(s.status, SubmitStatus::kAccepted) << s.message;
      handles.push_back(s.handle);
    }
    std::vector<Collected> out;
    for (auto& h : handles) out.push_back(Collect(*h));
    return out;
  };
  const auto alone = run(1, 1), one = run(4, 1), four = run(4, 4);
  ASSERT_EQ(one.size(), four.size());
  ASSERT_EQ(one.size(), alone.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].tokens.size(), 12u) << "request " << i;
    for (const auto* other : {&one, &four}) {
      EXPECT_EQ(alone[i].tokens, (*other)[i].tokens) << "request " << i;
      EXPECT_EQ(alone[i].text, (*other)[i].text) << "request " << i;
      EXPECT_EQ(alone[i].logprobs, (*other)[i].logprobs) << "request " << i;
    }
  }
  // Not all the same sequence: the draws differ between requests.
  EXPECT_NE(one[0].tokens, one[1].tokens);
}

// An FP8 KV cache (kv_cache_type kF8E4M3): each (token, KV head) row is rounded on its own, so
// concurrent requests still give exactly the tokens greedy generation with an FP8 cache gives alone; and
// the cache does change the logits, by a little.
TEST_F(EngineTest, Fp8KvCacheRequestsEqualGreedyGenerationWithFp8Alone) {
  CpuBackend reference_backend(1);
  auto reference = LoadModel(*files_, reference_backend);
  const std::vector<float> plain = PromptLogits(*reference, Prompt(3));
  const std::vector<float> f8 = PromptLogits(*reference, Prompt(3), KvCacheType::kF8E4M3);
  ASSERT_EQ(plain.size(), f8.size());
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    diff2 += (double(f8[i]) - plain[i]) * (double(f8[i]) - plain[i]);
    ref2 += double(plain[i]) * plain[i];
  }
  EXPECT_GT(diff2, 0.0);
  EXPECT_LT(std::sqrt(diff2 / ref2), 0.1);

  auto engine = MakeEngine(3, 16, 512, 7, 0, KvCacheType::kF8E4M3);
  EXPECT_EQ(engine->options().kv_cache_type, KvCacheType::kF8E4M3);
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (int i = 0; i < 4; ++i) {
    Submission s = engine->Submit(Greedy(Prompt(i), 6 + i));
    ASSERT_EQ(s.status, SubmitStatus::kAccepted) << s.message;
    handles.push_back(s.handle);
  }
  for (int i = 0; i < 4; ++i) {
    Collected c = Collect(*handles[static_cast<size_t>(i)]);
    GreedyOptions g;
    g.max_new_tokens = 6 + i;
    g.kv_cache_type = KvCacheType::kF8E4M3;
    EXPECT_EQ(c.tokens.size(), static_cast<size_t>(6 + i)) << "request " << i;
    EXPECT_EQ(c.tokens, GreedyGenerate(*reference, Prompt(i), g)) << "request " << i;
    EXPECT_EQ(c.final_update.finish_reason, FinishReason::kLength);
  }
}

TEST_F(EngineTest, StopTokenAndStopString) {
  GreedyOptions g;
  g.max_new_tokens = 8;
  std::vector<int32_t> expected = GreedyGenerate(*model_, Prompt(1), g);  // before the engine owns the backend
  auto engine = MakeEngine(2, 4);
  GenerationRequest r = Greedy(Prompt(1), 8);
  r.stop_token_ids = {expected[2]};
  Collected c = Collect(*engine->Submit(r).handle);
  EXPECT_EQ(c.final_update.finish_reason, FinishReason::kStop);
  EXPECT_FALSE(c.final_update.stopped_by_string);
  ASSERT_EQ(c.tokens.size(), 3u);
  EXPECT_EQ(c.text, tokenizer_->Decode(std::vector<int32_t>(expected.begin(), expected.begin() + 2), true));

  std::string full = tokenizer_->Decode(expected, true);
  std::string stop = full.substr(full.size() / 2, 3);
  GenerationRequest s = Greedy(Prompt(1), 8);
  s.stop = {stop};
  c = Collect(*engine->Submit(s).handle);
  EXPECT_EQ(c.final_update.finish_reason, FinishReason::kStop);
  EXPECT_TRUE(c.final_update.stopped_by_string);
  EXPECT_EQ(c.final_update.matched_stop, stop);
  EXPECT_EQ(c.text, full.substr(0, full.find(stop)));
}

TEST_F(EngineTest, CancellationFreesTheSlotAndAFullQueueRefuses) {
  auto engine = MakeEngine(1, 1);
  Submission a = engine->Submit(Greedy(Prompt(0), 400));
  ASSERT_EQ(a.status, SubmitStatus::kAccepted);
  RequestUpdate u;
  ASSERT_TRUE(a.handle->Wait(&u, std::chrono::milliseconds(20000)));  // A is running
  Submission b = engine->Submit(Greedy(Prompt(1), 3));
  ASSERT_EQ(b.status, SubmitStatus::kAccepted);
  for (int i = 0; i < 200 && engine->Stats().waiting != 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  Submission c = engine->Submit(Greedy(Prompt(2), 3));
  EXPECT_EQ(c.status, SubmitStatus::kQueueFull);
  EXPECT_NE(c.message.find("capacity"), std::string::npos);
  a.handle->Cancel();
  Collected rest_b = Collect(*b.handle);
  EXPECT_EQ(rest_b.tokens.size(), 3u);
  Collected rest_a = Collect(*a.handle);
  EXPECT_EQ(rest_a.final_update.finish_reason, FinishReason::kCancelled);
  EXPECT_LT(rest_a.final_update.completion_tokens, 400);
  EXPECT_EQ(engine->Stats().requests_cancelled, 1u);
}

TEST_F(EngineTest, RefusalsAreReturnValues) {
  auto engine = MakeEngine(1, 4, /*context=*/32);
  Submission s = engine->Submit(Greedy(Prompt(0), 40));
  EXPECT_EQ(s.status, SubmitStatus::kContextOverflow);
  EXPECT_NE(s.message.find("context is 32 tokens"), std::string::npos) << s.message;
  EXPECT_EQ(engine->Submit(Greedy({}, 4)).status, SubmitStatus::kInvalid);
  EXPECT_EQ(engine->Submit(Greedy({1, 200000}, 4)).status, SubmitStatus::kInvalid);
  GenerationRequest bad = Greedy({1, 2}, 4);
  bad.sampling.top_p = 3;
  Submission v = engine->Submit(bad);
  EXPECT_EQ(v.status, SubmitStatus::kInvalid);
  EXPECT_NE(v.message.find("top_p"), std::string::npos);
  EXPECT_EQ(engine->Submit(Greedy({1, 2}, 2)).status, SubmitStatus::kAccepted);
}

}  // namespace
}  // namespace infernix
