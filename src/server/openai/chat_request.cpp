#include "server/openai/chat_request.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "base/error.h"

namespace infernix {

void CheckModel(const ModelService& service, const JsonReader& body) {
  std::string model = body.RequiredString("model");
  if (!service.Serves(model))
    throw ApiError(ApiErrorKind::kNotFound,
                   fmt::format("The model '{}' does not exist; this server serves '{}'", model, service.model_id()),
                   "model");
}

namespace {

std::string FlattenContent(const Json& content, const std::string& param) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    BadRequest(param, param + ": expected a string or an array of content parts, got " + DescribeJsonType(content));
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    std::string p = fmt::format("{}[{}]", param, i);
    if (!part.is_object()) BadRequest(p, p + ": expected a content part object");
    std::string type = JsonReader(part, p).String("type").value_or("");
    if (type != "text" && type != "input_text" && type != "output_text")
      BadRequest(p + ".type", fmt::format("{}.type: content parts of type '{}' are not supported (text only)", p, type));
    if (!part.contains("text") || !part["text"].is_string()) BadRequest(p + ".text", p + ".text: expected a string");
    if (!text.empty()) text += "\n";
    text += part["text"].get<std::string>();
  }
  return text;
}

Json NormalizeToolCall(const Json& c, const std::string& cp) {
  if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
    BadRequest(cp, cp + ": expected {type: function, function: {name, arguments}}");
  JsonReader f(c["function"], cp + ".function");
  Json call = {{"type", "function"}, {"function", {{"name", f.RequiredString("name")}}}};
  if (c.contains("id") && c["id"].is_string()) call["id"] = c["id"];
  const Json& args = f.Get("arguments");
  if (args.is_string()) {
    Json parsed = Json::parse(args.get<std::string>(), nullptr, false);
    call["function"]["arguments"] = parsed.is_object() ? parsed : args;
  } else if (args.is_object()) {
    call["function"]["arguments"] = args;
  } else if (args.is_null()) {
    call["function"]["arguments"] = Json::object();
  } else {
    f.Fail("arguments", "a JSON string or an object");
  }
  return call;
}

}  // namespace

Json NormalizeOpenAiMessages(const Json& messages, const std::string& param) {
  if (!messages.is_array() || messages.empty()) BadRequest(param, param + ": expected a non-empty array of messages");
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    std::string p = fmt::format("{}[{}]", param, i);
    const Json& m = messages[i];
    if (!m.is_object()) BadRequest(p, p + ": expected a message object, got " + DescribeJsonType(m));
    JsonReader r(m, p);
    std::string role = r.RequiredString("role");
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      BadRequest(p + ".role",
                 fmt::format("{}.role: expected system, developer, user, assistant or tool, got '{}'", p, role));
    Json n = {{"role", role}, {"content", FlattenContent(r.Get("content"), p + ".content")}};
    if (role == "assistant") {
      if (auto rc = r.String("reasoning_content")) n["reasoning_content"] = *rc;
      if (const Json* calls = r.Array("tool_calls")) {
        Json tc = Json::array();
        for (size_t j = 0; j < calls->size(); ++j)
          tc.push_back(NormalizeToolCall((*calls)[j], fmt::format("{}.tool_calls[{}]", p, j)));
        n["tool_calls"] = std::move(tc);
      }
    } else if (role == "tool") {
      if (auto id = r.String("tool_call_id")) n["tool_call_id"] = *id;
    }
    if (auto name = r.String("name")) n["name"] = *name;
    out.push_back(std::move(n));
  }
  return out;
}

void ParseToolChoice(const Json& choice, ChatInput& input) {
  if (choice.is_null()) return;
  if (choice.is_string()) {
    std::string c = choice.get<std::string>();
    if (c == "none") {
      input.tool_choice = ToolChoiceMode::kNone;
    } else if (c == "auto") {
      input.tool_choice = ToolChoiceMode::kAuto;
    } else if (c == "required") {
      input.tool_choice = ToolChoiceMode::kRequired;
    } else {
      BadRequest("tool_choice", "tool_choice: expected none, auto, required or a named function, got '" + c + "'");
    }
  } else if (choice.is_object() && choice.contains("function") && choice["function"].is_object() &&
             choice["function"].contains("name") && choice["function"]["name"].is_string()) {
    input.tool_choice = ToolChoiceMode::kNamed;
    input.tool_choice_name = choice["function"]["name"].get<std::string>();
  } else if (choice.is_object() && StringMember(choice, "type") == "function" && choice.contains("name") &&
             choice["name"].is_string()) {  // the Responses API's flat form
    input.tool_choice = ToolChoiceMode::kNamed;
    input.tool_choice_name = choice["name"].get<std::string>();
  } else {
    BadRequest("tool_choice", "tool_choice: expected none, auto, required or {type: function, function: {name}}");
  }
  if ((input.tool_choice == ToolChoiceMode::kRequired || input.tool_choice == ToolChoiceMode::kNamed) &&
      input.tools.is_null())
    BadRequest("tool_choice", "tool_choice requires tools, but none were given");
  if (input.tool_choice == ToolChoiceMode::kNamed) {
    bool found = false;
    for (const auto& t : input.tools) found = found || StringMember(t["function"], "name") == input.tool_choice_name;
    if (!found)
      BadRequest("tool_choice", "tool_choice names the function '" + input.tool_choice_name + "', which is not in tools");
  }
}

void ParseOpenAiTools(const JsonReader& body, ChatInput& input) {
  if (const Json* tools = body.Array("tools")) {
    Json out = Json::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      std::string p = fmt::format("tools[{}]", i);
      const Json& t = (*tools)[i];
      if (!t.is_object() || StringMember(t, "type") != "function" || !t.contains("function") ||
          !t["function"].is_object())
        BadRequest(p, p + ": expected {\"type\": \"function\", \"function\": {...}}");
      JsonReader f(t["function"], p + ".function");
      f.RequiredString("name");
      if (f.Has("parameters") && !f.Get("parameters").is_object()) f.Fail("parameters", "a JSON Schema object");
      f.Bool("strict");  // a boolean, if given
      out.push_back(t);
    }
    if (!out.empty()) input.tools = std::move(out);
  }
  ParseToolChoice(body.Get("tool_choice"), input);
  ParseParallelToolCalls(body, input);
}

void ParseParallelToolCalls(const JsonReader& body, ChatInput& input) {
  if (auto parallel = body.Bool("parallel_tool_calls")) input.parallel_tool_calls = *parallel;
}

void ParseOpenAiSampling(const JsonReader& body, const ModelService& service, GenerationRequest& request,
                         std::initializer_list<const char*> max_tokens_keys) {
  SamplingParams& s = request.sampling;
  if (auto v = body.Number("temperature", 0, 2)) s.temperature = *v;
  if (auto v = body.Number("top_p", 0, 1)) s.top_p = *v;
  if (auto v = body.Integer("top_k", -1, 1 << 30)) s.top_k = static_cast<int>(*v);
  if (auto v = body.Number("min_p", 0, 1)) s.min_p = *v;
  if (auto v = body.Number("presence_penalty", -2, 2)) s.presence_penalty = *v;
  if (auto v = body.Number("frequency_penalty", -2, 2)) s.frequency_penalty = *v;
  if (auto v = body.Number("repetition_penalty", 0.01, 100)) s.repetition_penalty = *v;
  if (auto v = body.Integer("seed", INT64_MIN, INT64_MAX)) s.seed = static_cast<uint64_t>(*v);
  if (auto n = body.Integer("n", 1, 128); n && *n != 1) BadRequest("n", "n: only 1 choice per request is supported");
  request.stop = body.StringOrStrings("stop", 16);
  if (const Json* bias = body.Object("logit_bias")) {
    // Ids the tokenizer has (the model's vocabulary may be padded past them: such ids have no text).
    const int64_t n_ids = std::min<int64_t>(service.config().vocab_size, service.tokenizer().vocab_size());
    for (auto& [key, value] : bias->items()) {
      std::string p = "logit_bias." + key;
      char* end = nullptr;
      long id = std::strtol(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id >= n_ids)
        BadRequest(p, fmt::format("{}: '{}' is not a token id of this model (0..{})", p, key, n_ids - 1));
      if (!value.is_number() || value.get<double>() < -100 || value.get<double>() > 100)
        BadRequest(p, p + ": expected a number in [-100, 100]");
      s.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
  }
  if (auto v = body.Bool("logprobs")) s.logprobs = *v;
  if (auto v = body.Integer("top_logprobs", 0, 20)) {
    s.top_logprobs = static_cast<int>(*v);
    if (*v > 0 && !s.logprobs) BadRequest("top_logprobs", "top_logprobs requires logprobs to be true");
  }
  for (const char* key : max_tokens_keys) {
    if (auto v = body.Integer(key, 1, 1 << 30)) {
      request.max_new_tokens = static_cast<int>(*v);
      return;
    }
  }
}

void ParseConstraint(const JsonReader& body, ModelService& service, GenerationRequest& request) {
  std::vector<std::pair<const char*, std::pair<GrammarKind, std::string>>> given;
  if (const Json* rf = body.Object("response_format")) {
    std::string type = JsonReader(*rf, "response_format").RequiredString("type");
    if (type == "json_object") {
      given.push_back({"response_format", {GrammarKind::kJson, ""}});
    } else if (type == "json_schema") {
      const Json* js = JsonReader(*rf, "response_format").Object("json_schema");
      if (js == nullptr) BadRequest("response_format.json_schema", "response_format.json_schema: required");
      const Json* schema = JsonReader(*js, "response_format.json_schema").Object("schema");
      if (schema == nullptr)
        BadRequest("response_format.json_schema.schema", "response_format.json_schema.schema: expected an object");
      given.push_back({"response_format.json_schema.schema", {GrammarKind::kJsonSchema, DumpJson(*schema)}});
    } else if (type != "text") {
      BadRequest("response_format.type",
                 "response_format.type: expected text, json_object or json_schema, got '" + type + "'");
    }
  }
  if (auto g = body.String("grammar")) given.push_back({"grammar", {GrammarKind::kGbnf, *g}});
  if (auto r = body.String("regex")) given.push_back({"regex", {GrammarKind::kRegex, *r}});
  if (const Json* choice = body.Array("choice")) {
    if (choice->empty()) BadRequest("choice", "choice: expected a non-empty array of strings");
    for (const auto& c : *choice)
      if (!c.is_string()) BadRequest("choice", "choice: expected an array of strings");
    given.push_back({"choice", {GrammarKind::kChoices, DumpJson(*choice)}});
  }
  if (given.empty()) return;
  if (given.size() > 1)
    BadRequest(given[1].first, fmt::format("{} and {} cannot be combined: give one constraint", given[0].first,
                                           given[1].first));
  CompileConstraint(service, given[0].second.first, given[0].second.second, given[0].first, request);
}

void ParseResponsesTextFormat(const JsonReader& body, ModelService& service, GenerationRequest& request) {
  const Json* text = body.Object("text");
  if (text == nullptr) return;
  const Json* format = JsonReader(*text, "text").Object("format");
  if (format == nullptr) return;
  JsonReader f(*format, "text.format");
  std::string type = f.RequiredString("type");
  if (type == "json_object") {
    CompileConstraint(service, GrammarKind::kJson, "", "text.format", request);
  } else if (type == "json_schema") {
    const Json* schema = f.Object("schema");
    if (schema == nullptr) BadRequest("text.format.schema", "text.format.schema: expected an object");
    CompileConstraint(service, GrammarKind::kJsonSchema, DumpJson(*schema), "text.format.schema", request);
  } else if (type != "text") {
    BadRequest("text.format.type", "text.format.type: expected text, json_object or json_schema, got '" + type + "'");
  }
}

void ParseTemplateVariables(const JsonReader& body, ChatInput& input) {
  if (const Json* kwargs = body.Object("chat_template_kwargs"))
    for (auto& [k, v] : kwargs->items()) input.template_variables[k] = v;
  if (auto thinking = body.Bool("enable_thinking")) input.template_variables["enable_thinking"] = *thinking;
}

}  // namespace infernix
