// POST /v1/completions: a raw prompt (text or token ids), no chat template, no output parsing.
#include "server/http_util.h"
#include "server/openai/chat_request.h"
#include "server/openai/openai_common.h"
#include "server/openai/openai_routes.h"

namespace infernix {
namespace {

std::vector<int32_t> PromptIds(const ModelService& service, const Json& prompt) {
  auto ids_of = [&](const Json& arr) {
    std::vector<int32_t> ids;
    for (const auto& v : arr) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= service.config().vocab_size)
        BadRequest("prompt", "prompt: token ids must be integers in [0, " + std::to_string(service.config().vocab_size) + ")");
      ids.push_back(v.get<int32_t>());
    }
    return ids;
  };
  if (prompt.is_string()) return service.tokenizer().Encode(prompt.get<std::string>());
  if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string())
    return service.tokenizer().Encode(prompt[0].get<std::string>());
  if (prompt.is_array() && !prompt.empty() && prompt[0].is_number()) return ids_of(prompt);
  if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_array()) return ids_of(prompt[0]);
  BadRequest("prompt", "prompt: expected a string, an array of token ids, or a one-element array of either "
                       "(one prompt per request)");
}

// The legacy logprobs object: {tokens, token_logprobs, top_logprobs: [{text: logprob}], text_offset}.
Json LegacyLogprobs(const Tokenizer& tok, const std::vector<TokenOutput>& tokens, size_t offset) {
  Json t = Json::array(), lp = Json::array(), top = Json::array(), off = Json::array();
  for (const auto& o : tokens) {
    t.push_back(std::string(TokenBytesOrNothing(tok, o.token)));
    lp.push_back(o.logprob);
    Json alts = Json::object();
    for (const auto& a : o.top_logprobs) alts[std::string(TokenBytesOrNothing(tok, a.token))] = a.logprob;
    top.push_back(alts);
    off.push_back(offset);
    offset += o.text.size();
  }
  return {{"tokens", t}, {"token_logprobs", lp}, {"top_logprobs", top}, {"text_offset", off}};
}

const char* Finish(const RunResult& r) { return r.finish_reason == FinishReason::kLength ? "length" : "stop"; }


}  // namespace

void HandleCompletions(ModelService& service, const httplib::Request& req, httplib::Response& res) {
  Json body_json = ParseRequestBody(req.body);
  JsonReader body(body_json, "");
  CheckModel(service, body);
  if (!body.Has("prompt")) BadRequest("prompt", "prompt: required");
  if (body.Has("suffix")) BadRequest("suffix", "suffix is not supported");
  if (body.Bool("echo").value_or(false)) BadRequest("echo", "echo is not supported");
  // The legacy logprobs field is a count of alternatives: map it onto the chat-style fields.
  Json adjusted = body_json;
  if (adjusted.contains("logprobs") && adjusted["logprobs"].is_number()) {
    auto n = body.Integer("logprobs", 0, 20);
    adjusted["logprobs"] = true;
    adjusted["top_logprobs"] = *n;
  }
  GenerationRequest g = DefaultGenerationRequest(service);
  ParseOpenAiSampling(JsonReader(adjusted, ""), service, g, {"max_tokens"});
  if (g.max_new_tokens == 0) g.max_new_tokens = 16;  // the API's default
  ParseConstraint(body, service, g);
  g.prompt = PromptIds(service, body.Get("prompt"));
  bool stream = body.Bool("stream").value_or(false);
  bool include_usage = false;
  if (const Json* so = body.Object("stream_options"))
    include_usage = JsonReader(*so, "stream_options").Bool("include_usage").value_or(false);
  bool want_logprobs = g.sampling.logprobs;
  OutputParserOptions plain;
  plain.parse_reasoning = false;
  plain.parse_tool_calls = false;
  auto run = std::make_shared<GenerationRun>(service, std::move(g), std::move(plain), "");
  Json head = {{"id", RandomId("cmpl-")}, {"object", "text_completion"}, {"created", UnixNow()},
               {"model", service.model_id()}};
  const Tokenizer* tok = &service.tokenizer();
  if (!stream) {
    // Run to the end before answering, so that a failure gets its own status (Guard).
    ConnectionWatch client(req);
    RunResult r = run->Pump(RunCallbacks{nullptr, [&client] { return client.alive(); }});
    if (r.finish_reason == FinishReason::kCancelled) return SendClientGone(res);
    Json choice = {{"text", r.output.content}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", Finish(r)}};
    if (want_logprobs) choice["logprobs"] = LegacyLogprobs(*tok, r.tokens, 0);
    Json out = head;
    out["choices"] = Json::array({choice});
    out["usage"] = OpenAiUsage(r);
    SendJson(res, 200, out);
    return;
  }
  SendChunked(res, "text/event-stream", [run, head, include_usage, want_logprobs, tok](httplib::DataSink& sink) {
    SseWriter sse(sink);
    size_t offset = 0;
    auto chunk = [&](const std::string& text, Json logprobs, Json finish_reason) {
      Json j = head;
      j["choices"] = Json::array({{{"text", text}, {"index", 0}, {"logprobs", logprobs}, {"finish_reason", finish_reason}}});
      if (include_usage) j["usage"] = nullptr;
      sse.Data(j);
    };
    try {
      RunResult r = run->Pump(RunCallbacks{
          [&](const OutputDelta& d, const std::vector<TokenOutput>& tokens) {
            if (d.content.empty() && tokens.empty()) return;
            Json lp = want_logprobs ? LegacyLogprobs(*tok, tokens, offset) : Json();
            offset += d.content.size();
            chunk(d.content, lp, nullptr);
          },
          [&] { return sse.alive(); }});
      if (r.finish_reason == FinishReason::kCancelled) return false;
      chunk("", nullptr, Finish(r));
      return EndOpenAiStream(sse, head, include_usage, r);
    } catch (const ApiError& e) {
      sse.Data(OpenAiErrorBody(e));
    }
    return sse.Raw("data: [DONE]\n\n");
  });
}

}  // namespace infernix
