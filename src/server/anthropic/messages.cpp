// POST /v1/messages and /v1/messages/count_tokens in Anthropic's shapes: content blocks (thinking,
// text, tool_use), stop reasons, usage, and the streaming events message_start ... message_stop.
#include "server/anthropic/anthropic_routes.h"
#include "server/anthropic/messages_request.h"
#include "server/http_util.h"

namespace infernix {
namespace {

std::string ToolUseId(const std::string& call_id) {
  return call_id.rfind("call_", 0) == 0 ? "toolu_" + call_id.substr(5) : call_id;
}

struct StopInfo {
  std::string reason;
  Json sequence;
};

StopInfo StopOf(const RunResult& r) {
  if (!r.output.tool_calls.empty()) return {"tool_use", nullptr};
  if (r.finish_reason == FinishReason::kLength) return {"max_tokens", nullptr};
  if (r.stopped_by_string) return {"stop_sequence", r.matched_stop};
  return {"end_turn", nullptr};
}

Json Content(const RunResult& r) {
  Json content = Json::array();
  if (!r.output.reasoning.empty())
    content.push_back({{"type", "thinking"}, {"thinking", r.output.reasoning}, {"signature", ""}});
  if (!r.output.content.empty() || (r.output.tool_calls.empty() && r.output.reasoning.empty()))
    content.push_back({{"type", "text"}, {"text", r.output.content}});
  for (const auto& call : r.output.tool_calls) {
    Json input = Json::parse(call.arguments, nullptr, false);
    content.push_back({{"type", "tool_use"}, {"id", ToolUseId(call.id)}, {"name", call.name},
                       {"input", input.is_object() ? input : Json::object()}});
  }
  return content;
}

// Streams content blocks: a block opens when the kind of output changes and closes before the next.
class BlockStreamer {
 public:
  explicit BlockStreamer(SseWriter& sse) : sse_(sse) {}
  void Feed(const OutputDelta& d) {
    if (!d.reasoning.empty()) {
      Open("thinking", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      Delta({{"type", "thinking_delta"}, {"thinking", d.reasoning}});
    }
    if (!d.content.empty()) {
      Open("text", {{"type", "text"}, {"text", ""}});
      Delta({{"type", "text_delta"}, {"text", d.content}});
    }
    for (const auto& t : d.tool_calls) {
      if (!t.id.empty()) {
        Close();
        Open("tool_use", {{"type", "tool_use"}, {"id", ToolUseId(t.id)}, {"name", t.name}, {"input", Json::object()}});
      }
      if (!t.arguments_fragment.empty()) Delta({{"type", "input_json_delta"}, {"partial_json", t.arguments_fragment}});
    }
  }
  void Close() {
    if (current_.empty()) return;
    if (current_ == "thinking") Delta({{"type", "signature_delta"}, {"signature", ""}});
    sse_.Event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    current_.clear();
    ++index_;
  }

 private:
  void Open(const std::string& kind, Json block) {
    if (current_ == kind && kind != "tool_use") return;
    Close();
    current_ = kind;
    sse_.Event("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
  }
  void Delta(Json delta) {
    sse_.Event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", delta}});
  }
  SseWriter& sse_;
  std::string current_;
  int index_ = 0;
};

}  // namespace

void HandleMessages(ModelService& service, const httplib::Request& req, httplib::Response& res) {
  const Json body = ParseRequestBody(req.body);
  MessagesRequest m = ParseMessagesRequest(service, body, false);
  ParseOutputFormat(body, service, m.generation);
  ConstrainToolCalls(service, m.input, m.generation);
  PreparedPrompt prompt = PrepareChatPrompt(service, m.input);
  m.generation.prompt = prompt.ids;
  auto run = std::make_shared<GenerationRun>(service, std::move(m.generation), ChatParserOptions(m.input, prompt),
                                             prompt.forced_prefix);
  Json head = {{"id", RandomId("msg_")}, {"type", "message"}, {"role", "assistant"}, {"model", service.model_id()}};
  int64_t input_tokens = static_cast<int64_t>(prompt.ids.size());

  if (!m.stream) {
    // Run to the end before answering, so that a failure gets its own status (Guard).
    ConnectionWatch client(req);
    RunResult r = run->Pump(RunCallbacks{nullptr, [&client] { return client.alive(); }});
    if (r.finish_reason == FinishReason::kCancelled) return SendClientGone(res);
    StopInfo stop = StopOf(r);
    Json out = head;
    out["content"] = Content(r);
    out["stop_reason"] = stop.reason;
    out["stop_sequence"] = stop.sequence;
    out["usage"] = {{"input_tokens", r.prompt_tokens}, {"output_tokens", r.completion_tokens}};
    SendJson(res, 200, out);
    return;
  }
  SendChunked(res, "text/event-stream", [run, head, input_tokens](httplib::DataSink& sink) {
    SseWriter sse(sink);
    Json message = head;
    message["content"] = Json::array();
    message["stop_reason"] = nullptr;
    message["stop_sequence"] = nullptr;
    message["usage"] = {{"input_tokens", input_tokens}, {"output_tokens", 0}};
    sse.Event("message_start", {{"type", "message_start"}, {"message", message}});
    BlockStreamer blocks(sse);
    try {
      RunResult r = run->Pump(RunCallbacks{[&](const OutputDelta& d, const std::vector<TokenOutput>&) { blocks.Feed(d); },
                                           [&] { return sse.alive(); }});
      if (r.finish_reason == FinishReason::kCancelled) return false;
      blocks.Close();
      StopInfo stop = StopOf(r);
      sse.Event("message_delta", {{"type", "message_delta"},
                                  {"delta", {{"stop_reason", stop.reason}, {"stop_sequence", stop.sequence}}},
                                  {"usage", {{"output_tokens", r.completion_tokens}}}});
      sse.Event("message_stop", {{"type", "message_stop"}});
    } catch (const ApiError& e) {
      sse.Event("error", AnthropicErrorBody(e));
    }
    return sse.alive();
  });
}

void HandleCountTokens(ModelService& service, const httplib::Request& req, httplib::Response& res) {
  MessagesRequest m = ParseMessagesRequest(service, ParseRequestBody(req.body), true);
  PreparedPrompt prompt = PrepareChatPrompt(service, m.input);
  SendJson(res, 200, {{"input_tokens", static_cast<int64_t>(prompt.ids.size())}});
}

}  // namespace infernix
