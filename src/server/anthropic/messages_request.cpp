#include "server/anthropic/messages_request.h"

#include <fmt/format.h>

#include "server/openai/chat_request.h"

namespace infernix {
namespace {

// The text of a string or of an array of text blocks (system prompts, tool results).
std::string BlocksText(const Json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array())
    BadRequest(param, param + ": expected a string or an array of text blocks, got " + DescribeJsonType(v));
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string p = fmt::format("{}[{}]", param, i);
    if (!v[i].is_object() || StringMember(v[i], "type") != "text" || !v[i].contains("text") ||
        !v[i]["text"].is_string())
      BadRequest(p, p + ": expected a text block {\"type\": \"text\", \"text\": ...}");
    if (!text.empty()) text += "\n";
    text += v[i]["text"].get<std::string>();
  }
  return text;
}

// Appends one Anthropic message as one or more template messages (tool results become "tool" turns).
void AppendMessage(Json& out, const Json& m, const std::string& p) {
  if (!m.is_object()) BadRequest(p, p + ": expected a message object");
  JsonReader r(m, p);
  std::string role = r.RequiredString("role");
  if (role != "user" && role != "assistant")
    BadRequest(p + ".role", fmt::format("{}.role: expected user or assistant, got '{}'", p, role));
  const Json& content = r.Get("content");
  if (content.is_string()) {
    out.push_back({{"role", role}, {"content", content.get<std::string>()}});
    return;
  }
  if (!content.is_array()) r.Fail("content", "a string or an array of content blocks");
  std::string text, reasoning;
  Json tool_calls = Json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    std::string bp = fmt::format("{}.content[{}]", p, i);
    if (!content[i].is_object()) BadRequest(bp, bp + ": expected a content block object");
    JsonReader b(content[i], bp);
    std::string type = b.RequiredString("type");
    if (type == "text") {
      text += b.RequiredString("text");
    } else if (type == "thinking" && role == "assistant") {
      reasoning += b.RequiredString("thinking");
    } else if (type == "redacted_thinking" && role == "assistant") {
      // opaque to us: nothing to render
    } else if (type == "tool_use" && role == "assistant") {
      if (!b.Get("input").is_object()) b.Fail("input", "an object");
      tool_calls.push_back({{"id", b.RequiredString("id")}, {"type", "function"},
                            {"function", {{"name", b.RequiredString("name")}, {"arguments", b.Get("input")}}}});
    } else if (type == "tool_result" && role == "user") {
      if (!text.empty()) {  // text before a tool result keeps its place
        out.push_back({{"role", "user"}, {"content", text}});
        text.clear();
      }
      std::string result = b.Has("content") ? BlocksText(b.Get("content"), bp + ".content") : "";
      if (b.Bool("is_error").value_or(false)) result = "Error: " + result;
      out.push_back({{"role", "tool"}, {"tool_call_id", b.RequiredString("tool_use_id")}, {"content", result}});
    } else {
      BadRequest(bp + ".type", fmt::format("{}.type: '{}' blocks are not supported in {} messages", bp, type, role));
    }
  }
  if (role == "assistant") {
    Json msg = {{"role", "assistant"}, {"content", text}};
    if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
    if (!tool_calls.empty()) msg["tool_calls"] = tool_calls;
    out.push_back(std::move(msg));
  } else if (!text.empty() || content.empty()) {
    out.push_back({{"role", "user"}, {"content", text}});
  }
}

void ParseTools(const JsonReader& body, ChatInput& input) {
  if (const Json* tools = body.Array("tools")) {
    Json out = Json::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      std::string p = fmt::format("tools[{}]", i);
      if (!(*tools)[i].is_object()) BadRequest(p, p + ": expected a tool object");
      JsonReader t((*tools)[i], p);
      Json fn = {{"name", t.RequiredString("name")}};
      if (auto d = t.String("description")) fn["description"] = *d;
      const Json* schema = t.Object("input_schema");
      fn["parameters"] = schema ? *schema : Json{{"type", "object"}, {"properties", Json::object()}};
      if (auto strict = t.Bool("strict")) fn["strict"] = *strict;
      out.push_back({{"type", "function"}, {"function", fn}});
    }
    if (!out.empty()) input.tools = std::move(out);
  }
  const Json* choice = body.Object("tool_choice");
  if (choice == nullptr) return;
  JsonReader c(*choice, "tool_choice");
  std::string type = c.RequiredString("type");
  Json openai_choice;
  if (type == "auto") {
    openai_choice = "auto";
  } else if (type == "any") {
    openai_choice = "required";
  } else if (type == "none") {
    openai_choice = "none";
  } else if (type == "tool") {
    openai_choice = {{"type", "function"}, {"function", {{"name", c.RequiredString("name")}}}};
  } else {
    BadRequest("tool_choice.type", "tool_choice.type: expected auto, any, tool or none, got '" + type + "'");
  }
  ParseToolChoice(openai_choice, input);
  if (auto disable = c.Bool("disable_parallel_tool_use")) input.parallel_tool_calls = !*disable;
}

}  // namespace

MessagesRequest ParseMessagesRequest(const ModelService& service, const Json& body_json, bool for_count_tokens) {
  JsonReader body(body_json, "");
  CheckModel(service, body);
  MessagesRequest m;
  Json messages = Json::array();
  if (body.Has("system")) messages.push_back({{"role", "system"}, {"content", BlocksText(body.Get("system"), "system")}});
  const Json& in = body.RequiredArray("messages");
  if (in.empty()) BadRequest("messages", "messages: expected at least one message");
  for (size_t i = 0; i < in.size(); ++i) AppendMessage(messages, in[i], fmt::format("messages[{}]", i));
  m.input.messages = std::move(messages);
  ParseTools(body, m.input);
  if (const Json* thinking = body.Object("thinking")) {
    std::string type = JsonReader(*thinking, "thinking").RequiredString("type");
    if (type != "enabled" && type != "disabled")
      BadRequest("thinking.type", "thinking.type: expected enabled or disabled, got '" + type + "'");
    m.input.template_variables["enable_thinking"] = type == "enabled";
  }
  ParseTemplateVariables(body, m.input);

  m.generation = DefaultGenerationRequest(service);
  SamplingParams& s = m.generation.sampling;
  if (auto v = body.Number("temperature", 0, 1)) s.temperature = *v;
  if (auto v = body.Number("top_p", 0, 1)) s.top_p = *v;
  if (auto v = body.Integer("top_k", 0, 1 << 30)) s.top_k = static_cast<int>(*v);
  m.generation.stop = body.StringOrStrings("stop_sequences", 16);
  if (!for_count_tokens) {
    if (!body.Has("max_tokens")) BadRequest("max_tokens", "max_tokens: required");
    m.generation.max_new_tokens = static_cast<int>(*body.Integer("max_tokens", 1, 1 << 30));
  }
  m.stream = body.Bool("stream").value_or(false);
  return m;
}

void ParseOutputFormat(const Json& body_json, ModelService& service, GenerationRequest& request) {
  JsonReader body(body_json, "");
  const Json* format = nullptr;
  std::string param;
  if (const Json* config = body.Object("output_config")) {
    format = JsonReader(*config, "output_config").Object("format");
    param = "output_config.format";
  }
  if (const Json* beta = body.Object("output_format")) {
    if (format != nullptr)
      BadRequest("output_format", "output_format and output_config.format cannot be combined: give one");
    format = beta;
    param = "output_format";
  }
  if (format == nullptr) return;
  JsonReader f(*format, param);
  std::string type = f.RequiredString("type");
  if (type != "json_schema") BadRequest(param + ".type", param + ".type: expected json_schema, got '" + type + "'");
  const Json* schema = f.Object("schema");
  if (schema == nullptr) BadRequest(param + ".schema", param + ".schema: expected an object");
  CompileConstraint(service, GrammarKind::kJsonSchema, DumpJson(*schema), param + ".schema", request);
}

}  // namespace infernix
