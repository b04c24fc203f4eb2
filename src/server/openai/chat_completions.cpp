// POST /v1/chat/completions: non-streaming and streaming (SSE chunks, stream_options.include_usage),
// reasoning in reasoning_content, tool calls in tool_calls (streamed as incremental deltas).
#include "server/http_util.h"
#include "server/openai/chat_request.h"
#include "server/openai/openai_common.h"
#include "server/openai/openai_routes.h"

namespace infernix {
namespace {

struct ChatCompletion {
  ChatInput input;
  GenerationRequest generation;
  bool stream = false;
  bool include_usage = false;
  bool return_token_ids = false;  // extension: the generated token ids in choices[0].token_ids
};

ChatCompletion ParseChatCompletion(ModelService& service, const Json& body_json) {
  JsonReader body(body_json, "");
  CheckModel(service, body);
  ChatCompletion c;
  c.input.messages = NormalizeOpenAiMessages(body.RequiredArray("messages"), "messages");
  ParseOpenAiTools(body, c.input);
  ParseTemplateVariables(body, c.input);
  c.generation = DefaultGenerationRequest(service);
  ParseOpenAiSampling(body, service, c.generation, {"max_completion_tokens", "max_tokens"});
  c.stream = body.Bool("stream").value_or(false);
  c.return_token_ids = body.Bool("return_token_ids").value_or(false);
  if (const Json* so = body.Object("stream_options"))
    c.include_usage = JsonReader(*so, "stream_options").Bool("include_usage").value_or(false);
  ParseConstraint(body, service, c.generation);
  return c;
}

std::string FinishReasonOf(const RunResult& r) {
  if (!r.output.tool_calls.empty()) return "tool_calls";
  return r.finish_reason == FinishReason::kLength ? "length" : "stop";
}


Json ToolCallDeltaJson(const ToolCallDelta& d) {
  Json j = {{"index", d.index}};
  Json fn = Json::object();
  if (!d.id.empty()) {
    j["id"] = d.id;
    j["type"] = "function";
    fn["name"] = d.name;
  }
  fn["arguments"] = d.arguments_fragment;
  j["function"] = fn;
  return j;
}

Json TokenIds(const std::vector<TokenOutput>& tokens) {
  Json ids = Json::array();
  for (const auto& t : tokens) ids.push_back(t.token);
  return ids;
}

Json Message(const RunResult& r) {
  Json message = {{"role", "assistant"}, {"content", nullptr}};
  if (!r.output.content.empty() || r.output.tool_calls.empty()) message["content"] = r.output.content;
  if (!r.output.reasoning.empty()) message["reasoning_content"] = r.output.reasoning;
  if (!r.output.tool_calls.empty()) {
    Json calls = Json::array();
    for (const auto& call : r.output.tool_calls)
      calls.push_back({{"id", call.id}, {"type", "function"},
                       {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    message["tool_calls"] = calls;
  }
  return message;
}

}  // namespace

void HandleChatCompletions(ModelService& service, const httplib::Request& req, httplib::Response& res) {
  ChatCompletion c = ParseChatCompletion(service, ParseRequestBody(req.body));
  ConstrainToolCalls(service, c.input, c.generation);
  PreparedPrompt prompt = PrepareChatPrompt(service, c.input);
  c.generation.prompt = prompt.ids;
  bool want_logprobs = c.generation.sampling.logprobs;
  bool want_ids = c.return_token_ids;
  auto run = std::make_shared<GenerationRun>(service, std::move(c.generation), ChatParserOptions(c.input, prompt),
                                             prompt.forced_prefix);
  Json head = {{"id", RandomId("chatcmpl-")}, {"object", c.stream ? "chat.completion.chunk" : "chat.completion"},
               {"created", UnixNow()}, {"model", service.model_id()}, {"system_fingerprint", nullptr}};
  const Tokenizer* tok = &service.tokenizer();

  if (!c.stream) {
    // Run to the end before answering, so that a failure gets its own status (Guard).
    ConnectionWatch client(req);
    RunResult r = run->Pump(RunCallbacks{nullptr, [&client] { return client.alive(); }});
    if (r.finish_reason == FinishReason::kCancelled) return SendClientGone(res);
    Json choice = {{"index", 0}, {"message", Message(r)}, {"logprobs", nullptr}, {"finish_reason", FinishReasonOf(r)}};
    if (want_logprobs) choice["logprobs"] = {{"content", LogprobsContent(*tok, r.tokens)}};
    if (want_ids) choice["token_ids"] = TokenIds(r.tokens);
    Json body = head;
    body["choices"] = Json::array({choice});
    body["usage"] = OpenAiUsage(r);
    SendJson(res, 200, body);
    return;
  }

  bool include_usage = c.include_usage;
  SendChunked(res, "text/event-stream", [run, head, include_usage, want_logprobs, want_ids, tok](
                                              httplib::DataSink& sink) {
    SseWriter sse(sink);
    std::vector<TokenOutput> unreported;  // tokens not yet listed in a chunk's token_ids
    auto chunk = [&](Json delta, Json finish_reason, Json logprobs) {
      Json j = head;
      Json choice = {{"index", 0}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)},
                     {"finish_reason", std::move(finish_reason)}};
      if (want_ids) {
        choice["token_ids"] = TokenIds(unreported);
        unreported.clear();
      }
      j["choices"] = Json::array({choice});
      if (include_usage) j["usage"] = nullptr;
      sse.Data(j);
    };
    chunk({{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
    try {
      RunResult r = run->Pump(RunCallbacks{
          [&](const OutputDelta& d, const std::vector<TokenOutput>& tokens) {
            unreported.insert(unreported.end(), tokens.begin(), tokens.end());
            if (!d.reasoning.empty()) chunk({{"reasoning_content", d.reasoning}}, nullptr, nullptr);
            Json lp = want_logprobs && !tokens.empty() ? Json{{"content", LogprobsContent(*tok, tokens)}} : Json();
            if (!d.content.empty() || !lp.is_null() || (want_ids && !unreported.empty()))
              chunk({{"content", d.content}}, nullptr, lp);
            if (!d.tool_calls.empty()) {
              Json calls = Json::array();
              for (const auto& t : d.tool_calls) calls.push_back(ToolCallDeltaJson(t));
              chunk({{"tool_calls", calls}}, nullptr, nullptr);
            }
          },
          [&] { return sse.alive(); }});
      if (r.finish_reason == FinishReason::kCancelled) return false;
      chunk(Json::object(), FinishReasonOf(r), nullptr);
      return EndOpenAiStream(sse, head, include_usage, r);
    } catch (const ApiError& e) {
      sse.Data(OpenAiErrorBody(e));
    }
    return sse.Raw("data: [DONE]\n\n");
  });
}

}  // namespace infernix
