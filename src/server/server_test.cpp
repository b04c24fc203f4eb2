// The HTTP server end to end on the embedded model (server_test_util.h), its output scripted:
//   - parallel tool calls disabled (OpenAI parallel_tool_calls: false, Anthropic
//     disable_parallel_tool_use: true): the turn ends with the first call; generation stops at the
//     token that completes it (the backend computes no row past it) and one call is returned, in
//     Chat Completions, Responses and Messages, streaming or not;
//   - an engine failure after the request was accepted: a non-streaming request gets the API's error
//     shape with status 500 (not 200), a streaming one an error event; the server goes on;
//   - a client that hangs up on a non-streaming request cancels it.
// And RequestHandle::SetOutputEnd, which the first relies on, alone.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "server/openai/openai_common.h"
#include "server/server_test_util.h"

namespace infernix {
namespace {

using testing::Reply;
using testing::SseEvent;
using testing::TestServer;

const Json kParameters = Json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}}})");
const std::string kFirstCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
const std::string kSecondCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}\n</tool_call>";

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void TearDown() override {
    server_->backend().Heal();
    server_->backend().Script({});
  }

  // Scripts two calls, then the end of the turn; returns the tokens of the first call.
  static size_t ScriptTwoCalls() {
    const Tokenizer& tok = server_->service().tokenizer();
    std::vector<int32_t> ids = tok.Encode(kFirstCall);
    const size_t first = ids.size();
    for (int32_t id : tok.Encode("\n" + kSecondCall)) ids.push_back(id);
    ids.push_back(server_->service().eos_token_ids().front());
    script_size_ = ids.size();
    server_->backend().Script(std::move(ids));
    return first;
  }
  static Json ChatBody(bool parallel, bool stream) {
    Json body = {{"model", server_->service().model_id()},
                 {"messages", {{{"role", "user"}, {"content", "Weather in Paris and Tokyo?"}}}},
                 {"tools", {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", kParameters}}}}}},
                 {"max_tokens", 200}, {"temperature", 0}, {"stream", stream}};
    if (!parallel) body["parallel_tool_calls"] = false;
    if (stream) body["stream_options"] = {{"include_usage", true}};
    return body;
  }
  static Json ResponsesBody(bool parallel, bool stream) {
    Json body = {{"model", server_->service().model_id()}, {"input", "Weather in Paris and Tokyo?"},
                 {"tools", {{{"type", "function"}, {"name", "get_weather"}, {"parameters", kParameters},
                             {"strict", false}}}},
                 {"max_output_tokens", 200}, {"temperature", 0}, {"stream", stream}};
    if (!parallel) body["parallel_tool_calls"] = false;
    return body;
  }
  static Json MessagesBody(bool parallel, bool stream) {
    Json choice = {{"type", "auto"}};
    if (!parallel) choice["disable_parallel_tool_use"] = true;
    return {{"model", server_->service().model_id()}, {"max_tokens", 200}, {"temperature", 0}, {"stream", stream},
            {"messages", {{{"role", "user"}, {"content", "Weather in Paris and Tokyo?"}}}},
            {"tools", {{{"name", "get_weather"}, {"input_schema", kParameters}}}}, {"tool_choice", choice}};
  }

  static TestServer* server_;
  static size_t script_size_;
};

TestServer* ServerTest::server_ = nullptr;
size_t ServerTest::script_size_ = 0;

// The calls (name, arguments) of an answer in each API's shape, and its usage and end.
struct Calls {
  std::vector<std::pair<std::string, std::string>> calls;
  std::string finish;
  int64_t output_tokens = -1;
};

Calls ChatCalls(const Reply& r, bool stream) {
  Calls out;
  EXPECT_EQ(r.status, 200) << r.body;
  if (!stream) {
    Json j = r.json();
    for (const auto& c : j["choices"][0]["message"].value("tool_calls", Json::array()))
      out.calls.emplace_back(c["function"]["name"], c["function"]["arguments"]);
    out.finish = j["choices"][0]["finish_reason"];
    out.output_tokens = j["usage"]["completion_tokens"];
    return out;
  }
  for (const SseEvent& e : TestServer::Events(r.body)) {
    if (e.data.contains("usage") && e.data["usage"].is_object()) out.output_tokens = e.data["usage"]["completion_tokens"];
    if (e.data["choices"].empty()) continue;
    const Json& c = e.data["choices"][0];
    if (c["finish_reason"].is_string()) out.finish = c["finish_reason"];
    for (const auto& d : c["delta"].value("tool_calls", Json::array())) {
      size_t index = d["index"];
      if (index == out.calls.size()) out.calls.emplace_back(d["function"].value("name", ""), "");
      out.calls.at(index).second += d["function"].value("arguments", "");
    }
  }
  return out;
}

Calls ResponsesCalls(const Reply& r, bool stream, Json* object) {
  Calls out;
  EXPECT_EQ(r.status, 200) << r.body;
  if (stream) {
    for (const SseEvent& e : TestServer::Events(r.body))
      if (e.name == "response.completed" || e.name == "response.incomplete") *object = e.data["response"];
  } else {
    *object = r.json();
  }
  for (const auto& item : (*object)["output"])
    if (item["type"] == "function_call") out.calls.emplace_back(item["name"], item["arguments"]);
  out.finish = (*object)["status"];
  out.output_tokens = (*object)["usage"]["output_tokens"];
  return out;
}

Calls MessagesCalls(const Reply& r, bool stream) {
  Calls out;
  EXPECT_EQ(r.status, 200) << r.body;
  if (!stream) {
    Json j = r.json();
    for (const auto& b : j["content"])
      if (b["type"] == "tool_use") out.calls.emplace_back(b["name"], DumpJson(b["input"]));
    out.finish = j["stop_reason"];
    out.output_tokens = j["usage"]["output_tokens"];
    return out;
  }
  for (const SseEvent& e : TestServer::Events(r.body)) {
    if (e.name == "content_block_start" && e.data["content_block"]["type"] == "tool_use")
      out.calls.emplace_back(e.data["content_block"]["name"], "");
    if (e.name == "content_block_delta" && e.data["delta"]["type"] == "input_json_delta")
      out.calls.back().second += e.data["delta"]["partial_json"];
    if (e.name == "message_delta") {
      out.finish = e.data["delta"]["stop_reason"];
      out.output_tokens = e.data["usage"]["output_tokens"];
    }
  }
  return out;
}

TEST_F(ServerTest, ParallelToolCallsOffEndsTheTurnAtTheFirstCall) {
  const std::pair<std::string, std::string> paris{"get_weather", R"({"city":"Paris"})"};
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "streaming" : "whole");
    for (bool parallel : {true, false}) {
      SCOPED_TRACE(parallel ? "parallel" : "one call");
      size_t first = ScriptTwoCalls();
      // Parallel: both calls, generated to the end of the turn. One call: generation stopped at the
      // token that completed the first, which is all that is reported. The engine's pipelined greedy
      // steps (EngineOptions::pipeline_picks) had queued one step past it, whose row is read and dropped.
      const size_t n_calls = parallel ? 2 : 1;
      const size_t generated = parallel ? script_size_ : first;
      const size_t rows = parallel ? script_size_ : first + 1;

      Calls chat = ChatCalls(server_->Post("/v1/chat/completions", ChatBody(parallel, stream)), stream);
      ASSERT_EQ(chat.calls.size(), n_calls);
      EXPECT_EQ(chat.calls[0], paris);
      EXPECT_EQ(chat.finish, "tool_calls");
      EXPECT_EQ(server_->backend().scripted_rows(), rows);
      EXPECT_EQ(chat.output_tokens, static_cast<int64_t>(generated));

      ScriptTwoCalls();
      Json object;
      Calls resp = ResponsesCalls(server_->Post("/v1/responses", ResponsesBody(parallel, stream)), stream, &object);
      ASSERT_EQ(resp.calls.size(), n_calls);
      EXPECT_EQ(resp.calls[0], paris);
      EXPECT_EQ(resp.finish, "completed");
      EXPECT_EQ(object["parallel_tool_calls"], parallel);  // echoed as the request set it
      EXPECT_EQ(server_->backend().scripted_rows(), rows);
      EXPECT_EQ(resp.output_tokens, static_cast<int64_t>(generated));

      ScriptTwoCalls();
      Calls msg = MessagesCalls(server_->Post("/v1/messages", MessagesBody(parallel, stream)), stream);
      ASSERT_EQ(msg.calls.size(), n_calls);
      EXPECT_EQ(msg.calls[0], paris);
      EXPECT_EQ(msg.finish, "tool_use");
      EXPECT_EQ(server_->backend().scripted_rows(), rows);
      EXPECT_EQ(msg.output_tokens, static_cast<int64_t>(generated));
    }
  }
  // The flags are booleans.
  Json bad = ChatBody(false, false);
  bad["parallel_tool_calls"] = "no";
  Reply r = server_->Post("/v1/chat/completions", bad);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "parallel_tool_calls");
  bad = MessagesBody(false, false);
  bad["tool_choice"]["disable_parallel_tool_use"] = 1;
  r = server_->Post("/v1/messages", bad);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("disable_parallel_tool_use"), std::string::npos) << r.body;
}

TEST_F(ServerTest, EngineFailureAfterAcceptanceIsAnError) {
  const std::string model = server_->service().model_id();
  const Json hello = {{{"role", "user"}, {"content", "hello"}}};
  struct Case {
    std::string path;
    Json body;
    bool anthropic;
  };
  const std::vector<Case> cases = {
      {"/v1/chat/completions", {{"model", model}, {"messages", hello}, {"max_tokens", 50}}, false},
      {"/v1/completions", {{"model", model}, {"prompt", "hello"}, {"max_tokens", 50}}, false},
      {"/v1/responses", {{"model", model}, {"input", "hello"}, {"max_output_tokens", 50}}, false},
      {"/v1/messages", {{"model", model}, {"messages", hello}, {"max_tokens", 50}}, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    // The prompt's forward pass and one decode step work; the next fails (a token was generated).
    server_->backend().FailFrom(3);
    Reply r = server_->Post(c.path, c.body);
    EXPECT_EQ(r.status, 500) << r.body;
    Json j = r.json();
    if (c.anthropic) {
      EXPECT_EQ(j["type"], "error");
      EXPECT_EQ(j["error"]["type"], "api_error");
      EXPECT_NE(j["error"]["message"].get<std::string>().find("injected device fault"), std::string::npos);
    } else {
      EXPECT_EQ(j["error"]["type"], "server_error");
      EXPECT_NE(j["error"]["message"].get<std::string>().find("injected device fault"), std::string::npos);
    }
    // Streaming: the status went out with the first bytes; the failure is an error event.
    server_->backend().FailFrom(3);
    Json streamed = c.body;
    streamed["stream"] = true;
    r = server_->Post(c.path, streamed);
    EXPECT_EQ(r.status, 200);
    std::vector<SseEvent> events = TestServer::Events(r.body);
    ASSERT_FALSE(events.empty()) << r.body;
    const SseEvent& last = events.back();
    if (c.anthropic) {
      EXPECT_EQ(last.name, "error");
      EXPECT_EQ(last.data["error"]["type"], "api_error");
    } else if (c.path == "/v1/responses") {
      EXPECT_EQ(last.name, "error");
      EXPECT_NE(last.data["message"].get<std::string>().find("injected device fault"), std::string::npos);
    } else {
      EXPECT_EQ(last.data["error"]["type"], "server_error") << r.body;
    }
    // The server goes on.
    server_->backend().Heal();
    r = server_->Post(c.path, c.body);
    EXPECT_EQ(r.status, 200) << r.body;
  }
}

TEST_F(ServerTest, ClientThatHangsUpCancelsANonStreamingRequest) {
  const EngineStats before = server_->service().engine().Stats();
  Json body = {{"model", server_->service().model_id()},
               {"messages", {{{"role", "user"}, {"content", "Write a long story."}}}},
               {"max_tokens", 900}};
  body["logit_bias"] = Json::object();
  for (int32_t id : server_->service().eos_token_ids()) body["logit_bias"][std::to_string(id)] = -100;
  Reply r = server_->Post("/v1/chat/completions", body, /*timeout_ms=*/300);
  EXPECT_EQ(r.status, 0);  // the client gave up and closed the connection
  EngineStats after;
  for (int i = 0; i < 200; ++i) {
    after = server_->service().engine().Stats();
    if (after.requests_cancelled > before.requests_cancelled) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_EQ(after.requests_cancelled, before.requests_cancelled + 1);
  EXPECT_LT(after.generated_tokens - before.generated_tokens, 900u);
}

TEST_F(ServerTest, LogprobsOfIdsPastTheTokenizersVocabulary) {
  // The model's vocabulary is padded past the tokenizer's; such ids come up among the alternatives.
  const Tokenizer& tok = server_->service().tokenizer();
  const int32_t padded = tok.vocab_size();
  ASSERT_LT(padded, server_->service().config().vocab_size);
  TokenOutput t{tok.Encode("hi").front(), "hi", -0.5f, {{padded, -1.0f}}};
  Json lp = LogprobsContent(tok, {t});
  EXPECT_EQ(lp[0]["token"], "hi");
  EXPECT_EQ(lp[0]["top_logprobs"][0]["token"], "");
  EXPECT_EQ(lp[0]["top_logprobs"][0]["bytes"], Json::array());
  // Nor may a request bias them (the engine could not write their text).
  Json body = {{"model", server_->service().model_id()}, {"messages", {{{"role", "user"}, {"content", "hi"}}}},
               {"max_tokens", 2}, {"logit_bias", {{std::to_string(padded), 100}}}};
  Reply r = server_->Post("/v1/chat/completions", body);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["param"], "logit_bias." + std::to_string(padded));
}

// Feeds text until it has seen `marker`.
class MarkerEnd final : public OutputEnd {
 public:
  explicit MarkerEnd(std::string marker) : marker_(std::move(marker)) {}
  bool Feed(std::string_view text) override {
    seen_ += text;
    return seen_.find(marker_) != std::string::npos;
  }

 private:
  std::string marker_, seen_;
};

TEST(RequestHandleOutputEnd, StopsAtTheTokenThatCompletesTheOutput) {
  RequestHandle h(1);
  h.Publish({1, "a", 0, {}});
  h.Publish({2, "<e", 0, {}});
  h.Publish({3, "nd>b", 0, {}});  // completes the output (bytes past the end are the parser's to drop)
  h.Publish({4, "c", 0, {}});
  h.SetOutputEnd(std::make_shared<MarkerEnd>("<end>"));  // fed what was published before it
  EXPECT_TRUE(h.cancelled());                             // the engine stops at its next step
  h.Publish({5, "d", 0, {}});                             // dropped
  RequestUpdate final_state;
  final_state.finish_reason = FinishReason::kCancelled;   // what the engine reports for a cancelled request
  final_state.completion_tokens = 5;
  h.Finish(final_state);
  RequestUpdate u;
  ASSERT_TRUE(h.Wait(&u, std::chrono::milliseconds(0)));
  EXPECT_TRUE(u.finished);
  ASSERT_EQ(u.tokens.size(), 3u);
  EXPECT_EQ(u.tokens.back().token, 3);
  EXPECT_EQ(u.finish_reason, FinishReason::kStop);
  EXPECT_EQ(u.completion_tokens, 5);

  // Ended as tokens are published; a finish for another reason at the same token (max_tokens) is a stop.
  RequestHandle g(2);
  g.SetOutputEnd(std::make_shared<MarkerEnd>("!"));
  g.Publish({1, "hi", 0, {}});
  EXPECT_FALSE(g.cancelled());
  g.Publish({2, "!", 0, {}});
  EXPECT_TRUE(g.cancelled());
  RequestUpdate length;
  length.finish_reason = FinishReason::kLength;
  g.Finish(length);
  ASSERT_TRUE(g.Wait(&u, std::chrono::milliseconds(0)));
  EXPECT_EQ(u.tokens.size(), 2u);
  EXPECT_EQ(u.finish_reason, FinishReason::kStop);
}

}  // namespace
}  // namespace infernix
