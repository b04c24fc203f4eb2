// POST /v1/responses (OpenAI Responses API): text or item input, instructions, function tools,
// function_call / function_call_output items, and the streaming events response.created ...
// response.completed. Stateless: previous_response_id is refused (nothing is stored).
#include <fmt/format.h>

#include "server/http_util.h"
#include "server/openai/chat_request.h"
#include "server/openai/openai_routes.h"

namespace infernix {
namespace {

struct ResponsesRequest {
  ChatInput input;
  GenerationRequest generation;
  bool stream = false;
  Json echo;  // request fields the response object repeats
};

std::string ItemText(const Json& content, const std::string& p) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) BadRequest(p, p + ": expected a string or an array of content parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string pi = fmt::format("{}[{}]", p, i);
    std::string type = part.is_object() ? JsonReader(part, pi).String("type").value_or("") : "";
    if ((type != "input_text" && type != "output_text" && type != "text") || !part.contains("text") ||
        !part["text"].is_string())
      BadRequest(pi, fmt::format("{}: content parts of type '{}' are not supported", pi, type));
    if (!text.empty()) text += "\n";
    text += part["text"].get<std::string>();
  }
  return text;
}

Json InputMessages(const JsonReader& body) {
  Json messages = Json::array();
  if (auto instructions = body.String("instructions")) messages.push_back({{"role", "system"}, {"content", *instructions}});
  const Json& input = body.Get("input");
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
    return messages;
  }
  if (!input.is_array() || input.empty()) body.Fail("input", "a string or a non-empty array of input items");
  for (size_t i = 0; i < input.size(); ++i) {
    std::string p = fmt::format("input[{}]", i);
    if (!input[i].is_object()) BadRequest(p, p + ": expected an input item object");
    JsonReader r(input[i], p);
    std::string type = r.String("type").value_or("message");
    if (type == "message") {
      std::string role = r.RequiredString("role");
      if (role == "developer") role = "system";
      if (role != "system" && role != "user" && role != "assistant")
        BadRequest(p + ".role", fmt::format("{}.role: expected system, developer, user or assistant, got '{}'", p, role));
      messages.push_back({{"role", role}, {"content", ItemText(r.Get("content"), p + ".content")}});
    } else if (type == "function_call") {
      Json args = Json::parse(r.RequiredString("arguments"), nullptr, false);
      Json call = {{"id", r.RequiredString("call_id")}, {"type", "function"},
                   {"function", {{"name", r.RequiredString("name")},
                                 {"arguments", args.is_object() ? args : Json::object()}}}};
      if (!messages.empty() && messages.back()["role"] == "assistant") {  // several calls of one turn
        if (!messages.back().contains("tool_calls")) messages.back()["tool_calls"] = Json::array();
        messages.back()["tool_calls"].push_back(call);
      } else {
        messages.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", Json::array({call})}});
      }
    } else if (type == "function_call_output") {
      const Json& out = r.Get("output");
      messages.push_back({{"role", "tool"}, {"tool_call_id", r.RequiredString("call_id")},
                          {"content", out.is_string() ? out.get<std::string>() : DumpJson(out)}});
    } else if (type != "reasoning") {  // earlier reasoning is not rendered again, as the templates do
      BadRequest(p + ".type", fmt::format("{}.type: input items of type '{}' are not supported", p, type));
    }
  }
  return messages;
}

ResponsesRequest ParseResponses(ModelService& service, const Json& body_json) {
  JsonReader body(body_json, "");
  CheckModel(service, body);
  if (body.Has("previous_response_id"))
    BadRequest("previous_response_id",
               "previous_response_id is not supported: this server stores no responses; send the whole conversation "
               "in input");
  ResponsesRequest r;
  r.input.messages = InputMessages(body);
  if (const Json* tools = body.Array("tools")) {
    Json out = Json::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      std::string p = fmt::format("tools[{}]", i);
      if (!(*tools)[i].is_object()) BadRequest(p, p + ": expected a tool object");
      JsonReader t((*tools)[i], p);
      if (t.RequiredString("type") != "function") BadRequest(p + ".type", p + ".type: only function tools are supported");
      Json fn = {{"name", t.RequiredString("name")}};
      if (auto d = t.String("description")) fn["description"] = *d;
      const Json* params = t.Object("parameters");
      fn["parameters"] = params ? *params : Json{{"type", "object"}, {"properties", Json::object()}};
      if (auto strict = t.Bool("strict")) {
        fn["strict"] = *strict;
      } else {
        r.input.strict_if_compatible = true;  // the Responses API's default
      }
      out.push_back({{"type", "function"}, {"function", fn}});
    }
    if (!out.empty()) r.input.tools = out;
  }
  ParseToolChoice(body.Get("tool_choice"), r.input);
  ParseParallelToolCalls(body, r.input);
  ParseTemplateVariables(body, r.input);
  r.generation = DefaultGenerationRequest(service);
  ParseOpenAiSampling(body, service, r.generation, {"max_output_tokens"});
  r.stream = body.Bool("stream").value_or(false);
  ParseResponsesTextFormat(body, service, r.generation);
  r.echo = {{"text", body.Has("text") ? body.Get("text") : Json{{"format", {{"type", "text"}}}}},
            {"instructions", body.Get("instructions")},
            {"tools", body.Has("tools") ? body.Get("tools") : Json::array()},
            {"tool_choice", body.Has("tool_choice") ? body.Get("tool_choice") : Json("auto")},
            {"parallel_tool_calls", r.input.parallel_tool_calls},
            {"temperature", body.Has("temperature") ? body.Get("temperature") : Json(1.0)},
            {"top_p", body.Has("top_p") ? body.Get("top_p") : Json(1.0)},
            {"max_output_tokens", body.Get("max_output_tokens")},
            {"metadata", body.Has("metadata") ? body.Get("metadata") : Json::object()}};
  return r;
}

// Builds the response object's output items and emits the streaming events as output arrives.
class ResponseBuilder {
 public:
  ResponseBuilder(std::string id, std::string model, Json echo, SseWriter* sse)
      : id_(std::move(id)), model_(std::move(model)), echo_(std::move(echo)), sse_(sse), created_(UnixNow()) {}

  Json Object(const std::string& status, const RunResult* r) const {
    Json o = {{"id", id_}, {"object", "response"}, {"created_at", created_}, {"status", status}, {"model", model_},
              {"output", output_}, {"parallel_tool_calls", true}, {"error", nullptr}, {"incomplete_details", nullptr},
              {"text", {{"format", {{"type", "text"}}}}}, {"usage", nullptr}};
    for (auto& [k, v] : echo_.items()) o[k] = v;
    if (r != nullptr) {
      if (Incomplete(*r)) o["incomplete_details"] = {{"reason", "max_output_tokens"}};
      o["usage"] = {{"input_tokens", r->prompt_tokens}, {"input_tokens_details", {{"cached_tokens", 0}}},
                    {"output_tokens", r->completion_tokens}, {"output_tokens_details", {{"reasoning_tokens", 0}}},
                    {"total_tokens", r->prompt_tokens + r->completion_tokens}};
    }
    return o;
  }
  static bool Incomplete(const RunResult& r) {
    return r.finish_reason == FinishReason::kLength && r.output.tool_calls.empty();
  }
  void Start() {
    Emit("response.created", {{"response", Object("in_progress", nullptr)}});
    Emit("response.in_progress", {{"response", Object("in_progress", nullptr)}});
  }
  void Feed(const OutputDelta& d) {
    if (!d.reasoning.empty()) Reasoning(d.reasoning);
    if (!d.content.empty()) Text(d.content);
    for (const auto& t : d.tool_calls) Tool(t);
  }
  void Close() {
    if (kind_.empty()) return;
    Json at = {{"item_id", item_["id"]}, {"output_index", index_}};
    if (kind_ == "reasoning") {
      item_["content"] = Json::array({{{"type", "reasoning_text"}, {"text", text_}}});
      Emit("response.reasoning_text.done", Merge(at, {{"content_index", 0}, {"text", text_}}));
    } else if (kind_ == "message") {
      item_["status"] = "completed";
      item_["content"] = Json::array({Part(text_)});
      Emit("response.output_text.done", Merge(at, {{"content_index", 0}, {"text", text_}, {"logprobs", Json::array()}}));
      Emit("response.content_part.done", Merge(at, {{"content_index", 0}, {"part", Part(text_)}}));
    } else {
      item_["status"] = "completed";
      item_["arguments"] = text_;
      Emit("response.function_call_arguments.done", Merge(at, {{"arguments", text_}}));
    }
    Emit("response.output_item.done", {{"output_index", index_}, {"item", item_}});
    output_.push_back(item_);
    kind_.clear();
    text_.clear();
    ++index_;
  }
  void Emit(const std::string& type, Json payload) {
    if (sse_ == nullptr) return;
    payload["type"] = type;
    payload["sequence_number"] = sequence_++;
    sse_->Event(type, payload);
  }

 private:
  static Json Merge(Json a, const Json& b) {
    for (auto& [k, v] : b.items()) a[k] = v;
    return a;
  }
  static Json Part(const std::string& text) {
    return {{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}, {"logprobs", Json::array()}};
  }
  void Open(const std::string& kind, Json item) {
    kind_ = kind;
    item_ = std::move(item);
    Emit("response.output_item.added", {{"output_index", index_}, {"item", item_}});
  }
  void Reasoning(const std::string& text) {
    if (kind_ != "reasoning") {
      Close();
      Open("reasoning", {{"type", "reasoning"}, {"id", RandomId("rs_")}, {"summary", Json::array()}});
    }
    text_ += text;
    Emit("response.reasoning_text.delta",
         {{"item_id", item_["id"]}, {"output_index", index_}, {"content_index", 0}, {"delta", text}});
  }
  void Text(const std::string& text) {
    if (kind_ != "message") {
      Close();
      Open("message", {{"type", "message"}, {"id", RandomId("msg_")}, {"status", "in_progress"}, {"role", "assistant"},
                       {"content", Json::array()}});
      Emit("response.content_part.added",
           {{"item_id", item_["id"]}, {"output_index", index_}, {"content_index", 0}, {"part", Part("")}});
    }
    text_ += text;
    Emit("response.output_text.delta", {{"item_id", item_["id"]}, {"output_index", index_}, {"content_index", 0},
                                        {"delta", text}, {"logprobs", Json::array()}});
  }
  void Tool(const ToolCallDelta& d) {
    if (!d.id.empty()) {
      Close();
      Open("function_call", {{"type", "function_call"}, {"id", RandomId("fc_")}, {"call_id", d.id}, {"name", d.name},
                             {"arguments", ""}, {"status", "in_progress"}});
    }
    if (d.arguments_fragment.empty()) return;
    text_ += d.arguments_fragment;
    Emit("response.function_call_arguments.delta",
         {{"item_id", item_["id"]}, {"output_index", index_}, {"delta", d.arguments_fragment}});
  }

  std::string id_, model_;
  Json echo_;
  SseWriter* sse_;
  int64_t created_;
  Json output_ = Json::array();
  std::string kind_, text_;
  Json item_;
  int index_ = 0;
  int64_t sequence_ = 0;
};

}  // namespace

void HandleResponses(ModelService& service, const httplib::Request& req, httplib::Response& res) {
  ResponsesRequest r = ParseResponses(service, ParseRequestBody(req.body));
  ConstrainToolCalls(service, r.input, r.generation);
  PreparedPrompt prompt = PrepareChatPrompt(service, r.input);
  r.generation.prompt = prompt.ids;
  auto run = std::make_shared<GenerationRun>(service, std::move(r.generation), ChatParserOptions(r.input, prompt),
                                             prompt.forced_prefix);
  std::string id = RandomId("resp_");
  std::string model = service.model_id();
  Json echo = r.echo;
  if (!r.stream) {
    // Run to the end before answering, so that a failure gets its own status (Guard).
    ResponseBuilder b(id, model, echo, nullptr);
    ConnectionWatch client(req);
    RunResult result = run->Pump(RunCallbacks{[&](const OutputDelta& d, const std::vector<TokenOutput>&) { b.Feed(d); },
                                              [&client] { return client.alive(); }});
    if (result.finish_reason == FinishReason::kCancelled) return SendClientGone(res);
    b.Close();
    SendJson(res, 200, b.Object(ResponseBuilder::Incomplete(result) ? "incomplete" : "completed", &result));
    return;
  }
  SendChunked(res, "text/event-stream", [run, id, model, echo](httplib::DataSink& sink) {
    SseWriter sse(sink);
    ResponseBuilder b(id, model, echo, &sse);
    b.Start();
    try {
      RunResult result = run->Pump(RunCallbacks{[&](const OutputDelta& d, const std::vector<TokenOutput>&) { b.Feed(d); },
                                                [&] { return sse.alive(); }});
      if (result.finish_reason == FinishReason::kCancelled) return false;
      b.Close();
      bool incomplete = ResponseBuilder::Incomplete(result);
      b.Emit(incomplete ? "response.incomplete" : "response.completed",
             {{"response", b.Object(incomplete ? "incomplete" : "completed", &result)}});
      return sse.alive();
    } catch (const ApiError& e) {
      b.Emit("error", {{"code", nullptr}, {"message", e.what()}, {"param", nullptr}});
      return sse.alive();
    }
  });
}

}  // namespace infernix
