// The engine under the server's scripted backend (server_test_util.h), driven through Engine::Submit
// and RequestHandle directly:
//   - ids past the tokenizer's vocabulary (the model's is padded past it) are never sampled nor listed
//     among the alternatives, whatever the sampling mode, even when their logit is the largest;
//   - an exception in a request's own processing on the engine thread (here its trigger gate) fails
//     that request with an error and leaves the others running;
//   - a request whose output an OutputEnd found complete (parallel tool calls off) counts as finished,
//     not cancelled (directly, and through the server);
//   - the counters include a request by the time its client sees its end.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>

#include "server/server_test_util.h"

namespace infernix {
namespace {

using testing::TestServer;

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void TearDown() override { server_->backend().Script({}); }

  static Engine& engine() { return server_->service().engine(); }
  static const Tokenizer& tokenizer() { return server_->service().tokenizer(); }

  static GenerationRequest Request(int max_new_tokens) {
    GenerationRequest r;
    r.prompt = tokenizer().Encode("hello");
    r.max_new_tokens = max_new_tokens;
    r.sampling.temperature = 0;
    r.stop_token_ids = server_->service().eos_token_ids();
    return r;
  }
  static std::shared_ptr<RequestHandle> Submit(GenerationRequest r) {
    Submission s = engine().Submit(std::move(r));
    EXPECT_EQ(s.status, SubmitStatus::kAccepted) << s.message;
    return s.handle;
  }
  // Every update of a request until its end, merged.
  static RequestUpdate Collect(RequestHandle& h) {
    RequestUpdate all, u;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!all.finished && std::chrono::steady_clock::now() < deadline) {
      if (!h.Wait(&u, std::chrono::milliseconds(50))) continue;
      std::vector<TokenOutput> tokens = std::move(all.tokens);
      tokens.insert(tokens.end(), u.tokens.begin(), u.tokens.end());
      all = std::move(u);
      all.tokens = std::move(tokens);
    }
    EXPECT_TRUE(all.finished);
    return all;
  }

  static TestServer* server_;
};

TestServer* EngineTest::server_ = nullptr;

TEST_F(EngineTest, NeverSamplesIdsPastTheTokenizersVocabulary) {
  const int32_t n_ids = tokenizer().vocab_size();
  ASSERT_LT(n_ids, server_->service().config().vocab_size);
  struct Mode {
    const char* name;
    double temperature;
    int top_k;
    double top_p, min_p;
  };
  const std::vector<Mode> modes = {{"greedy", 0, 0, 1, 0},   {"temperature 2", 2, 0, 1, 0}, {"top-k", 1, 5, 1, 0},
                                   {"top-p", 1, 0, 0.9, 0},  {"min-p", 1, 0, 1, 0.5}};
  for (const Mode& m : modes) {
    SCOPED_TRACE(m.name);
    // Every row's largest logit is at a padding id (50 there, 0 elsewhere).
    server_->backend().Script(std::vector<int32_t>(4, n_ids + 7));
    GenerationRequest r = Request(4);
    r.stop_token_ids.clear();
    r.sampling.temperature = m.temperature;
    r.sampling.top_k = m.top_k;
    r.sampling.top_p = m.top_p;
    r.sampling.min_p = m.min_p;
    r.sampling.seed = 7;
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = 20;
    auto h = Submit(std::move(r));
    ASSERT_TRUE(h);
    RequestUpdate u = Collect(*h);
    EXPECT_EQ(u.finish_reason, FinishReason::kLength) << u.error;
    ASSERT_EQ(u.tokens.size(), 4u);
    for (const TokenOutput& t : u.tokens) {
      EXPECT_LT(t.token, n_ids);
      EXPECT_EQ(t.top_logprobs.size(), 20u);
      for (const TokenLogprob& alt : t.top_logprobs) EXPECT_LT(alt.token, n_ids);
    }
  }
}

// A trigger gate that fails as soon as it is fed (on the engine thread).
class ThrowingGate final : public TriggerGate {
 public:
  void Feed(std::string_view) override { throw std::runtime_error("injected gate fault"); }
  bool Open() override { return true; }
  void AfterConstrained() override {}
};

TEST_F(EngineTest, AFailureInOneRequestsProcessingFailsThatRequestOnly) {
  const EngineStats before = engine().Stats();
  // Plain text for both requests (the gate is fed once the output is longer than the trigger).
  std::vector<int32_t> script;
  for (int i = 0; i < 4; ++i)
    for (int32_t id : tokenizer().Encode("The weather today is sunny with a light breeze. ")) script.push_back(id);
  server_->backend().Script(script);
  GenerationRequest bad = Request(30);
  bad.stop_token_ids.clear();
  const std::string tools =
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])";
  bad.grammar = server_->service().CompileGrammar(GrammarKind::kToolCallsLazy, tools);
  bad.grammar_trigger = "<tool_call>";
  bad.trigger_gate = std::make_shared<ThrowingGate>();
  GenerationRequest good = Request(30);
  good.stop_token_ids.clear();
  auto bad_handle = Submit(std::move(bad));
  auto good_handle = Submit(std::move(good));
  ASSERT_TRUE(bad_handle && good_handle);

  RequestUpdate b = Collect(*bad_handle);
  EXPECT_EQ(b.finish_reason, FinishReason::kError);
  EXPECT_NE(b.error.find("injected gate fault"), std::string::npos) << b.error;
  EXPECT_LT(b.completion_tokens, 30);
  RequestUpdate g = Collect(*good_handle);
  EXPECT_EQ(g.finish_reason, FinishReason::kLength) << g.error;
  EXPECT_EQ(g.tokens.size(), 30u);
  const EngineStats after = engine().Stats();
  EXPECT_EQ(after.requests_failed, before.requests_failed + 1);
  EXPECT_EQ(after.requests_finished, before.requests_finished + 2);

  // The engine goes on.
  auto next = Submit(Request(3));
  ASSERT_TRUE(next);
  EXPECT_NE(Collect(*next).finish_reason, FinishReason::kError);
}

// The output is complete with its n-th token.
class EndAfter final : public OutputEnd {
 public:
  explicit EndAfter(int n) : left_(n) {}
  bool Feed(std::string_view) override { return --left_ == 0; }

 private:
  int left_;
};

TEST_F(EngineTest, AnOutputEndIsAFinishNotACancellation) {
  const EngineStats before = engine().Stats();
  server_->backend().Script(tokenizer().Encode("one two three four five six seven eight nine ten"));
  GenerationRequest r = Request(10);
  r.stop_token_ids.clear();
  auto h = Submit(std::move(r));
  ASSERT_TRUE(h);
  h->SetOutputEnd(std::make_shared<EndAfter>(3));
  RequestUpdate u = Collect(*h);
  EXPECT_EQ(u.finish_reason, FinishReason::kStop);
  EXPECT_EQ(u.tokens.size(), 3u);
  const EngineStats after = engine().Stats();
  EXPECT_EQ(after.requests_finished, before.requests_finished + 1);
  EXPECT_EQ(after.requests_cancelled, before.requests_cancelled);
  EXPECT_EQ(after.requests_failed, before.requests_failed);
}

TEST_F(EngineTest, ParallelToolCallsOffIsCountedAsFinished) {
  // The same through the server: the turn ends at the first tool call (server_test.cpp has the rest).
  const EngineStats before = engine().Stats();
  std::vector<int32_t> script = tokenizer().Encode(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}\n</tool_call>");
  server_->backend().Script(script);
  const Json parameters = Json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}}})");
  Json body = {{"model", server_->service().model_id()},
               {"messages", {{{"role", "user"}, {"content", "Weather in Paris and Tokyo?"}}}},
               {"tools", {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", parameters}}}}}},
               {"parallel_tool_calls", false}, {"max_tokens", 200}, {"temperature", 0}};
  testing::Reply r = server_->Post("/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["choices"][0]["message"]["tool_calls"].size(), 1u) << r.body;
  EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "tool_calls");
  const EngineStats after = engine().Stats();
  EXPECT_EQ(after.requests_finished, before.requests_finished + 1);
  EXPECT_EQ(after.requests_cancelled, before.requests_cancelled);
}

TEST_F(EngineTest, CountersIncludeARequestBeforeItsClientSeesTheEnd) {
  for (int i = 0; i < 200; ++i) {
    const EngineStats before = engine().Stats();
    auto h = Submit(Request(1));
    ASSERT_TRUE(h);
    RequestUpdate u;
    while (!u.finished) h->Wait(&u, std::chrono::milliseconds(0));  // sees the end at once
    const EngineStats after = engine().Stats();
    ASSERT_EQ(after.requests_finished, before.requests_finished + 1) << "request " << i;
    ASSERT_EQ(after.running, 0u) << "request " << i;
    ASSERT_EQ(after.generated_tokens, before.generated_tokens + 1) << "request " << i;
  }
}

}  // namespace
}  // namespace infernix
