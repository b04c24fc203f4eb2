// `infernix render`: the prompt a chat request becomes under the model's chat template.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "base/error.h"
#include "chat/chat_template.h"

namespace infernix {
namespace {

struct RenderOptions {
  std::string model;
  std::string request;
};


// The request file: {"messages": [...], "tools": [...] (optional), "chat_template_kwargs": {...}
// (optional, merged in), and any other template variables (add_generation_prompt, enable_thinking,
// ...) at the top level}.
std::string RenderRequest(const ChatTemplate& tmpl, const std::string& path, const std::string& text) {
  nlohmann::ordered_json request;
  try {
    request = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line L, column C: ..."
    std::string message = e.what();
    size_t start = message.find("] ");
    ThrowError(ErrorCode::kInvalidFormat, "{}: invalid JSON: {}", path,
               start == std::string::npos ? message : message.substr(start + 2));
  }
  if (!request.is_object()) ThrowError(ErrorCode::kInvalidFormat, "{}: expected a JSON object, got {}", path, request.type_name());
  auto messages = request.find("messages");
  if (messages == request.end() || !messages->is_array())
    ThrowError(ErrorCode::kInvalidArgument, "{}: \"messages\" must be an array of messages", path);
  nlohmann::ordered_json tools = request.value("tools", nlohmann::ordered_json());
  if (!tools.is_null() && !tools.is_array())
    ThrowError(ErrorCode::kInvalidArgument, "{}: \"tools\" must be an array or null, got {}", path, tools.type_name());
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  for (const auto& [key, value] : request.items())
    if (key != "messages" && key != "tools" && key != "chat_template_kwargs") variables[key] = value;
  if (auto kwargs = request.find("chat_template_kwargs"); kwargs != request.end() && !kwargs->is_null()) {
    if (!kwargs->is_object())
      ThrowError(ErrorCode::kInvalidArgument, "{}: \"chat_template_kwargs\" must be an object, got {}", path,
                 kwargs->type_name());
    for (const auto& [key, value] : kwargs->items()) variables[key] = value;
  }
  return tmpl.Render(*messages, tools, variables);
}

}  // namespace

void RegisterRenderCommand(CLI::App& app) {
  auto options = std::make_shared<RenderOptions>();  // shared with the callback, which outlives this call
  CLI::App* render = app.add_subcommand(
      "render", "Print the prompt a chat request renders to under the model's chat template, exactly (no newline added)");
  render->add_option("--model", options->model, "Model folder (default: the embedded model)");
  render->add_option("--request", options->request,
                     "JSON file: {\"messages\": [...], \"tools\": [...], \"add_generation_prompt\": true, ...}; other "
                     "keys and \"chat_template_kwargs\" entries become template variables")
      ->required();
  render->callback([options] {
    std::unique_ptr<ChatTemplate> tmpl = OpenModel(options->model)->LoadChatTemplate();
    WriteStdout(RenderRequest(*tmpl, options->request, ReadFileText(options->request)));
  });
}

}  // namespace infernix
