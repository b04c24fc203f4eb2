#include "chat/chat_template.h"

#include <string_view>

#include "base/error.h"
#include "chat/jinja/json.h"
#include "chat/jinja/template.h"

namespace infernix {

namespace {

constexpr std::string_view kConfigFile = "tokenizer_config.json";
constexpr std::string_view kTemplateFile = "chat_template.jinja";

// A special token of tokenizer_config.json: a string or {"content": "..."}; null when absent.
nlohmann::ordered_json SpecialToken(const nlohmann::ordered_json& token, std::string_view key, const std::string& path) {
  if (token.is_null() || token.is_string()) return token;
  if (token.is_object() && token.contains("content") && token["content"].is_string()) return token["content"];
  ThrowError(ErrorCode::kInvalidFormat, "{}: \"{}\" must be a string or an object with a \"content\" string, got {}", path,
             key, token.dump());
}

// The special tokens transformers passes to templates (its special_tokens_map): those that are set,
// with bos_token and eos_token always defined ("" when unset).
nlohmann::ordered_json SpecialTokens(const nlohmann::ordered_json& config, const std::string& path) {
  nlohmann::ordered_json tokens = {{"bos_token", ""}, {"eos_token", ""}};
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    nlohmann::ordered_json token = SpecialToken(config.value(key, nlohmann::ordered_json()), key, path);
    if (!token.is_null()) tokens[key] = std::move(token);
  }
  if (auto it = config.find("additional_special_tokens"); it != config.end() && !it->is_null()) {
    if (!it->is_array())
      ThrowError(ErrorCode::kInvalidFormat, "{}: \"additional_special_tokens\" must be a list, got {}", path, it->type_name());
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& token : *it) list.push_back(SpecialToken(token, "additional_special_tokens", path));
    tokens["additional_special_tokens"] = std::move(list);
  }
  return tokens;
}

}  // namespace

ChatTemplate::~ChatTemplate() = default;

std::unique_ptr<ChatTemplate> ChatTemplate::FromString(std::string source, std::string bos_token, std::string eos_token) {
  std::unique_ptr<ChatTemplate> t(new ChatTemplate());
  t->template_ = jinja::Template::Parse(source, "chat template");
  t->special_tokens_ = {{"bos_token", std::move(bos_token)}, {"eos_token", std::move(eos_token)}};
  return t;
}

std::unique_ptr<ChatTemplate> ChatTemplate::Load(const FileSet& files) {
  std::unique_ptr<ChatTemplate> t(new ChatTemplate());
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  std::string config_path = files.DisplayPath(kConfigFile);
  if (files.Exists(kConfigFile)) {
    try {
      config = nlohmann::ordered_json::parse(ReadText(files, kConfigFile));
    } catch (const nlohmann::json::exception& e) {
      ThrowError(ErrorCode::kInvalidFormat, "{}: invalid JSON: {}", config_path, e.what());
    }
    if (!config.is_object()) ThrowError(ErrorCode::kInvalidFormat, "{}: expected a JSON object", config_path);
  }
  t->special_tokens_ = SpecialTokens(config, config_path);
  if (files.Exists(kTemplateFile)) {
    t->template_ = jinja::Template::Parse(ReadText(files, kTemplateFile), files.DisplayPath(kTemplateFile));
    return t;
  }
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null())
    ThrowError(ErrorCode::kNotFound, "{}: no chat template: neither {} nor a \"chat_template\" in {}", files.Describe(),
               kTemplateFile, kConfigFile);
  if (it->is_string()) {
    t->template_ = jinja::Template::Parse(it->get<std::string>(), config_path + " (chat_template)");
    return t;
  }
  if (!it->is_array())
    ThrowError(ErrorCode::kInvalidFormat, "{}: \"chat_template\" must be a string or a list of {{name, template}}, got {}",
               config_path, it->type_name());
  for (const auto& entry : *it) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("template") ||
        !entry["template"].is_string())
      ThrowError(ErrorCode::kInvalidFormat, "{}: each \"chat_template\" entry must be {{\"name\": ..., \"template\": ...}}",
                 config_path);
    std::string name = entry["name"].get<std::string>();
    if (name != "default" && name != "tool_use") continue;
    auto parsed = jinja::Template::Parse(entry["template"].get<std::string>(),
                                         fmt::format("{} (chat_template '{}')", config_path, name));
    (name == "default" ? t->template_ : t->tool_use_template_) = std::move(parsed);
  }
  if (!t->template_)
    ThrowError(ErrorCode::kNotFound, "{}: \"chat_template\" lists no template named \"default\"", config_path);
  return t;
}

std::string ChatTemplate::Render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                 const nlohmann::ordered_json& extra_variables) const {
  if (!messages.is_array())
    ThrowError(ErrorCode::kInvalidArgument, "chat messages must be a JSON array, got {}", messages.type_name());
  if (!tools.is_null() && !tools.is_array())
    ThrowError(ErrorCode::kInvalidArgument, "chat tools must be a JSON array or null, got {}", tools.type_name());
  if (!extra_variables.is_null() && !extra_variables.is_object())
    ThrowError(ErrorCode::kInvalidArgument, "chat template variables must be a JSON object, got {}",
               extra_variables.type_name());
  const jinja::Template& t = !tools.is_null() && tool_use_template_ ? *tool_use_template_ : *template_;
  auto convert = [](const char* what, const nlohmann::ordered_json& json) {
    try {
      return jinja::FromJson(json);
    } catch (const jinja::EvalError& e) {
      ThrowError(e.code(), "chat {}: {}", what, e.what());
    }
  };
  // The variables transformers passes: special tokens, then messages, tools, documents and
  // add_generation_prompt, then the caller's keyword arguments (which may replace any of them).
  jinja::Template::Variables variables;
  for (const auto& [name, value] : special_tokens_.items()) variables.emplace_back(name, jinja::FromJson(value));
  variables.emplace_back("messages", convert("messages", messages));
  variables.emplace_back("tools", convert("tools", tools));
  variables.emplace_back("documents", jinja::Value::None());
  variables.emplace_back("add_generation_prompt", jinja::Value::Bool(false));
  if (extra_variables.is_object())
    for (const auto& [name, value] : extra_variables.items()) variables.emplace_back(name, convert("variables", value));
  return t.Render(std::move(variables));
}

}  // namespace infernix
