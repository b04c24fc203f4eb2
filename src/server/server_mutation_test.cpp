// Bad input against every generation endpoint (Chat Completions, Completions, Responses, Messages) and
// Messages' count_tokens: rich valid requests of each API are mutated at random, at the JSON level (a
// member removed, a value replaced by one of another type or an extreme one, an unknown member added,
// an array emptied or grown) and at the text level (a number out of range, invalid UTF-8, a truncated
// body), from fixed seeds so that a failure reproduces; the generating ones also streamed (1,900
// requests by default). Whatever the mutation, the server answers 200 (JSON, or server-sent events when
// the mutation asked for a stream) or a 4xx in the API's own error shape - never a 5xx, a dropped
// connection or a hang - and still serves a valid request afterwards.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "server/server_test_util.h"

namespace infernix {
namespace {

using testing::Reply;
using testing::TestServer;

enum class Api { kOpenAi, kAnthropic };

struct Endpoint {
  std::string path;
  Api api;
  Json base;
};

const Json kSchema = Json::parse(
    R"({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]})");

std::vector<Endpoint> Endpoints(const std::string& model) {
  Json chat = {
      {"model", model},
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}},
        {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Weather in Paris?"}}}}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", "c1"},
            {"type", "function"},
            {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "sunny"}}}},
      {"tools",
       {{{"type", "function"},
         {"function", {{"name", "get_weather"}, {"description", "Weather by city"}, {"parameters", kSchema}}}}}},
      {"tool_choice", "auto"},
      {"parallel_tool_calls", true},
      {"max_tokens", 2},
      {"temperature", 0.7},
      {"top_p", 0.9},
      {"top_k", 20},
      {"min_p", 0.05},
      {"stop", {"\n\n"}},
      {"seed", 1},
      {"logprobs", true},
      {"top_logprobs", 2},
      {"presence_penalty", 0.1},
      {"frequency_penalty", 0.1},
      {"logit_bias", {{"13", 1}}},
      {"stream", false}};
  Json chat_schema = {{"model", model},
                      {"messages", {{{"role", "user"}, {"content", "A city, as JSON."}}}},
                      {"max_tokens", 2},
                      {"response_format",
                       {{"type", "json_schema"}, {"json_schema", {{"name", "city"}, {"strict", true}, {"schema", kSchema}}}}}};
  Json completion = {{"model", model}, {"prompt", "Hello"}, {"max_tokens", 2},  {"temperature", 0},
                     {"stop", "x"},    {"logprobs", 2},     {"echo", false},    {"stream", false}};
  Json responses = {
      {"model", model},
      {"instructions", "Be brief."},
      {"input",
       {{{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "Weather in Paris?"}}}}},
        {{"type", "function_call"}, {"call_id", "c1"}, {"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}},
        {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "sunny"}}}},
      {"tools", {{{"type", "function"}, {"name", "get_weather"}, {"parameters", kSchema}}}},
      {"max_output_tokens", 2},
      {"temperature", 0.5},
      {"text", {{"format", {{"type", "json_schema"}, {"name", "city"}, {"schema", kSchema}}}}},
      {"stream", false}};
  Json messages = {
      {"model", model},
      {"max_tokens", 2},
      {"system", {{{"type", "text"}, {"text", "Be brief."}}}},
      {"messages",
       {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Weather in Paris?"}}}}},
        {{"role", "assistant"},
         {"content", {{{"type", "tool_use"}, {"id", "t1"}, {"name", "get_weather"}, {"input", {{"city", "Paris"}}}}}}},
        {{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "t1"}, {"content", "sunny"}}}}}}},
      {"tools", {{{"name", "get_weather"}, {"description", "Weather by city"}, {"input_schema", kSchema}}}},
      {"tool_choice", {{"type", "auto"}, {"disable_parallel_tool_use", false}}},
      {"temperature", 0.5},
      {"top_k", 5},
      {"top_p", 0.9},
      {"stop_sequences", {"x"}},
      {"thinking", {{"type", "disabled"}}},
      {"stream", false}};
  Json chat_forced = {{"model", model},
                      {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
                      {"tools", chat["tools"]},
                      {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}},
                      {"chat_template_kwargs", {{"enable_thinking", false}}},
                      {"max_completion_tokens", 3},
                      {"n", 1},
                      {"user", "u1"}};
  Json completion_ids = {{"model", model},  {"prompt", {1, 2, 3}},
                         {"max_tokens", 2}, {"logit_bias", {{"5", -100}}},
                         {"top_p", 0.5},    {"seed", 7}};
  Json messages_forced = {{"model", model},
                          {"max_tokens", 3},
                          {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
                          {"tools", messages["tools"]},
                          {"tool_choice", {{"type", "tool"}, {"name", "get_weather"}}},
                          {"metadata", {{"user_id", "u1"}}}};
  Json responses_required = {{"model", model},
                             {"input", "Weather in Paris?"},
                             {"tools", responses["tools"]},
                             {"tool_choice", "required"},
                             {"parallel_tool_calls", false},
                             {"max_output_tokens", 3}};
  std::vector<Endpoint> out = {
      {"/v1/chat/completions", Api::kOpenAi, chat},        {"/v1/chat/completions", Api::kOpenAi, chat_forced},
      {"/v1/completions", Api::kOpenAi, completion_ids},   {"/v1/messages", Api::kAnthropic, messages_forced},
      {"/v1/responses", Api::kOpenAi, responses_required}, {"/v1/chat/completions", Api::kOpenAi, chat_schema},
      {"/v1/completions", Api::kOpenAi, completion},       {"/v1/responses", Api::kOpenAi, responses},
      {"/v1/messages", Api::kAnthropic, messages}};
  const size_t generating = out.size();
  out.push_back({"/v1/messages/count_tokens", Api::kAnthropic,
                 Json{{"model", model},
                      {"system", "Be brief."},
                      {"messages", messages["messages"]},
                      {"tools", messages["tools"]}}});
  // The generating requests streamed (errors after the first event are error events, not statuses).
  for (size_t i = 0; i < generating; ++i) {
    Endpoint streamed = out[i];
    streamed.base["stream"] = true;
    if (streamed.path != "/v1/responses" && streamed.api == Api::kOpenAi)
      streamed.base["stream_options"] = {{"include_usage", true}};
    out.push_back(std::move(streamed));
  }
  return out;
}

// Every value below the root, by JSON pointer.
void Paths(const Json& j, const Json::json_pointer& at, std::vector<Json::json_pointer>& out) {
  if (!at.empty()) out.push_back(at);
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) Paths(it.value(), at / it.key(), out);
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) Paths(j[i], at / i, out);
  }
}

Json Nested(int depth) {
  Json j = Json::array();
  for (int i = 0; i < depth; ++i) j = Json::array({j});
  return j;
}

const std::vector<Json>& Replacements() {
  static const std::vector<Json> values = {
      nullptr, true, false, 0, -1, 1, 2, -2147483649LL, 9223372036854775807LL, 18446744073709551615ULL, 1.5, -0.0, 1e308,
      -1e308, 1e-320, "", "a", std::string("\0x", 2), std::string(5000, 'x'), "<tool_call>", "</think>", "{{ raise }}",
      "\xf0\x9f\x98\x80", Json::array(), Json::array({1, 2}), Json::array({nullptr}), Json::array({""}), Json::object(),
      Json{{"type", "object"}}, Json{{"type", "text"}}, Json{{"role", "user"}}, Json{{"type", "json_schema"}},
      Json{{"$ref", "#/"}}, Nested(40)};
  return values;
}

// One random change at the JSON level.
void MutateJson(Json& body, std::mt19937& rng) {
  std::vector<Json::json_pointer> paths;
  Paths(body, Json::json_pointer(), paths);
  if (paths.empty()) return;
  const Json::json_pointer at = paths[rng() % paths.size()];
  const auto& values = Replacements();
  Json& node = body.at(at);
  switch (rng() % 5) {
    case 0: {  // remove it
      Json& parent = body.at(at.parent_pointer());
      if (parent.is_object()) {
        parent.erase(at.back());
      } else {
        parent.erase(static_cast<size_t>(std::stoul(at.back())));
      }
      break;
    }
    case 1:
    case 2:  // another value
      node = values[rng() % values.size()];
      break;
    case 3:  // an unknown member or element
      if (node.is_object()) {
        node["unknown_" + std::to_string(rng() % 100)] = values[rng() % values.size()];
      } else if (node.is_array()) {
        node.push_back(node.empty() ? values[rng() % values.size()] : node[rng() % node.size()]);
      } else {
        node = values[rng() % values.size()];
      }
      break;
    default:  // emptied, or a string made long / odd
      if (node.is_array()) {
        node = Json::array();
      } else if (node.is_object()) {
        node = Json::object();
      } else if (node.is_string()) {
        node = node.get<std::string>() + std::string(rng() % 2 ? 3000 : 1, rng() % 2 ? '{' : '\n');
      } else {
        node = values[rng() % values.size()];
      }
  }
}

// One random change at the text level (what a JSON value cannot hold).
std::string MutateText(const std::string& text, std::mt19937& rng) {
  std::string t = text;
  switch (rng() % 5) {
    case 0:  // truncated
      return t.substr(0, rng() % t.size());
    case 1: {  // invalid UTF-8 inside the first string
      size_t q = t.find('"');
      if (q != std::string::npos) t.insert(q + 1, rng() % 2 ? "\xff\xfe" : "\xc3");
      return t;
    }
    case 2: {  // a number out of every range
      size_t colon = t.find(":2");
      if (colon == std::string::npos) colon = t.find(": 2");
      const char* big[] = {"1e999", "-1e999", "123456789012345678901234567890", "1e-999", "-0"};
      if (colon != std::string::npos) t.replace(colon + 1, t.find_first_of(",}", colon) - colon - 1, big[rng() % 5]);
      return t;
    }
    case 3: {  // a member given twice
      size_t brace = t.find('{');
      if (brace != std::string::npos) t.insert(brace + 1, "\"model\": 1, ");
      return t;
    }
    default:  // escapes: a lone surrogate, a NUL
      size_t q = t.rfind('"');
      if (q != std::string::npos) t.insert(q, rng() % 2 ? "\\ud800" : "\\u0000");
      return t;
  }
}

// 200 with a JSON body or an event stream, or a 4xx in the API's error shape; else what is wrong.
std::string Problem(const Reply& r, Api api) {
  if (r.status == 0) return "no answer (connection dropped or timed out)";
  if (r.status != 200 && (r.status < 400 || r.status >= 500)) return fmt::format("status {}: {}", r.status, r.body);
  if (r.status == 200) {
    if (r.body.rfind("data:", 0) == 0 || r.body.rfind("event:", 0) == 0) {
      try {
        (void)TestServer::Events(r.body);
      } catch (const std::exception& e) {
        return fmt::format("200 with a malformed event stream ({}): {}", e.what(), r.body);
      }
      return "";
    }
    return Json::accept(r.body) ? "" : "200 with a body that is not JSON: " + r.body;
  }
  if (!Json::accept(r.body)) return fmt::format("{} with a body that is not JSON: {}", r.status, r.body);
  Json j = Json::parse(r.body);
  const bool shape = (api == Api::kOpenAi || j.value("type", "") == "error") && j.contains("error") &&
                     j["error"].is_object() && j["error"].contains("type") && j["error"]["type"].is_string() &&
                     j["error"].contains("message") && j["error"]["message"].is_string() &&
                     !j["error"]["message"].get<std::string>().empty();
  return shape ? "" : fmt::format("{} not in the API's error shape: {}", r.status, r.body);
}

TEST(ServerMutation, EveryMutatedRequestIsServedOrRefusedInTheApisShape) {
  TestServer server;
  // INFERNIX_MUTATION_CASES / INFERNIX_MUTATION_SEED: more cases per endpoint, other seeds (exploring).
  const char* cases_env = std::getenv("INFERNIX_MUTATION_CASES");
  const char* seed_env = std::getenv("INFERNIX_MUTATION_SEED");
  const int cases = cases_env != nullptr ? std::max(10, std::atoi(cases_env)) : 100;
  const uint32_t seed = seed_env != nullptr ? static_cast<uint32_t>(std::strtoul(seed_env, nullptr, 10)) : 0;
  const int kJsonCases = cases * 4 / 5, kTextCases = cases - kJsonCases;
  int refused = 0, served = 0, failures = 0;
  for (const Endpoint& e : Endpoints(server.service().model_id())) {
    // The unmutated request is valid.
    Reply ok = server.PostRaw(e.path, DumpJson(e.base));
    ASSERT_EQ(ok.status, 200) << e.path << ": " << ok.body;
    ASSERT_EQ(Problem(ok, e.api), "") << e.path;
    std::mt19937 rng(seed + static_cast<uint32_t>(std::hash<std::string>{}(e.path + e.base.dump()) & 0xffffffffu));
    for (int i = 0; i < kJsonCases + kTextCases; ++i) {
      std::string body;
      if (i < kJsonCases) {
        Json mutated = e.base;
        for (unsigned m = 0, count = 1 + rng() % 3; m < count; ++m) MutateJson(mutated, rng);
        body = DumpJson(mutated);
      } else {
        body = MutateText(DumpJson(e.base), rng);
      }
      Reply r = server.PostRaw(e.path, body);
      if (std::string problem = Problem(r, e.api); !problem.empty()) {
        ADD_FAILURE() << e.path << ": " << problem << "\n  request: "
                      << (body.size() > 2000 ? body.substr(0, 2000) + "..." : body);
        if (++failures >= 40) return;
      }
      (r.status == 200 ? served : refused)++;
    }
    // Still serving.
    Reply again = server.PostRaw(e.path, DumpJson(e.base));
    ASSERT_EQ(again.status, 200) << e.path << ": " << again.body;
  }
  std::printf("[ metric ] mutated requests: %d served, %d refused with a 4xx\n", served, refused);
  EXPECT_GT(refused, 0);
  EXPECT_GT(served, 0);
}

// Mutated requests from several clients at once, while another client repeats a valid greedy request:
// that one's answer never changes (bad input next to it in the same batches loses it nothing).
TEST(ServerMutation, ConcurrentBadInputLeavesOtherRequestsIntact) {
  TestServer server;
  const std::vector<Endpoint> endpoints = Endpoints(server.service().model_id());
  const Json valid = {{"model", server.service().model_id()},
                      {"messages", {{{"role", "user"}, {"content", "Count to five."}}}},
                      {"max_tokens", 8},
                      {"temperature", 0}};
  Reply reference = server.Post("/v1/chat/completions", valid);
  ASSERT_EQ(reference.status, 200) << reference.body;
  const Json expected = reference.json()["choices"][0]["message"];
  std::atomic<int> problems{0};
  std::vector<std::thread> clients;
  for (uint32_t c = 0; c < 3; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 rng(1000 + c);
      for (int i = 0; i < 60; ++i) {
        const Endpoint& e = endpoints[rng() % endpoints.size()];
        Json mutated = e.base;
        MutateJson(mutated, rng);
        const std::string body = DumpJson(mutated);
        if (std::string problem = Problem(server.PostRaw(e.path, body), e.api); !problem.empty()) {
          ADD_FAILURE() << e.path << ": " << problem << "\n  request: " << body.substr(0, 2000);
          ++problems;
        }
      }
    });
  }
  for (int i = 0; i < 20; ++i) {
    Reply r = server.Post("/v1/chat/completions", valid);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["choices"][0]["message"], expected) << "request " << i;
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(problems.load(), 0);
}

// kMaxRequestDepth levels of arrays and objects parse; one more is a 400 saying so.
TEST(ServerMutation, RequestNestingLimitIsExact) {
  auto body = [](int levels) {  // the top-level object and levels - 1 arrays inside it
    return "{\"a\": " + std::string(static_cast<size_t>(levels - 1), '[') +
           std::string(static_cast<size_t>(levels - 1), ']') + "}";
  };
  EXPECT_NO_THROW((void)ParseRequestBody(body(kMaxRequestDepth)));
  try {
    (void)ParseRequestBody(body(kMaxRequestDepth + 1));
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("deeper than 512 levels"), std::string::npos) << e.what();
  }
}

// What the mutations found (500s before), as fixed cases with their messages.
TEST(ServerMutation, FoundCasesAreBadRequestsNamingTheField) {
  TestServer server;
  const std::string model = server.service().model_id();
  struct Case {
    std::string path, body, message;
  };
  const std::vector<Case> cases = {
      {"/v1/chat/completions",
       R"({"model": ")" + model +
           R"(", "max_tokens": 2, "messages": [{"role": "user", "content": [{"type": 1, "text": "hi"}]}]})",
       "messages[0].content[0].type: expected a string, got an integer"},
      {"/v1/responses",
       R"({"model": ")" + model +
           R"(", "max_output_tokens": 2, "input": [{"role": "user", "content": [{"type": [null], "text": "hi"}]}]})",
       "input[0].content[0].type: expected a string, got an array"},
      {"/v1/messages",
       R"({"model": ")" + model +
           R"(", "max_tokens": 2, "system": [{"type": {}, "text": "x"}], "messages": [{"role": "user", "content": "hi"}]})",
       "system[0]: expected a text block"},
      {"/v1/chat/completions",
       R"({"model": ")" + model +
           R"(", "max_tokens": 2, "temperature": 1e999, "messages": [{"role": "user", "content": "hi"}]})",
       "out of range"},
  };
  for (const Case& c : cases) {
    Reply r = server.PostRaw(c.path, c.body);
    EXPECT_EQ(r.status, 400) << c.path << " " << c.body << "\n" << r.body;
    EXPECT_NE(r.body.find(c.message), std::string::npos) << c.message << "\n" << r.body;
  }
}

}  // namespace
}  // namespace infernix
