// Chat templates: turn a conversation (messages, tools) into the prompt text a model was trained
// on, byte for byte as transformers' apply_chat_template(..., tokenize=False) does.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "base/file_set.h"

namespace infernix {

namespace jinja {
class Template;
}

class ChatTemplate {
 public:
  ~ChatTemplate();

  // The template of a model folder: "chat_template.jinja" if present (it wins, as in transformers),
  // else tokenizer_config.json's "chat_template" (a string, or a list of {name, template} entries:
  // "default", plus "tool_use" which is then used for requests with tools). The special tokens
  // transformers passes to templates (bos_token, eos_token, unk_token, sep_token, pad_token,
  // cls_token, mask_token: a string or {"content": ...}; additional_special_tokens) come from
  // tokenizer_config.json. Throws Error naming the file: kNotFound when there is no template,
  // kInvalidFormat for bad JSON or template syntax.
  static std::unique_ptr<ChatTemplate> Load(const FileSet& files);
  static std::unique_ptr<ChatTemplate> FromString(std::string source, std::string bos_token, std::string eos_token);

  // messages: array of {role, content, (tool_calls), ...}; tools: array or null; extra_variables:
  // an object (or null) of further template variables (add_generation_prompt, enable_thinking, ...).
  // The template sees the special tokens (bos_token and eos_token are "" when the tokenizer has
  // none; the others are left undefined), messages, tools, documents (None) and
  // add_generation_prompt (false), then the extra variables, which may replace any of them. Throws Error (kInvalidArgument) for malformed inputs and template runtime
  // errors, with the template line and column. Const and safe to call concurrently.
  std::string Render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     const nlohmann::ordered_json& extra_variables) const;

 private:
  ChatTemplate() = default;

  std::unique_ptr<jinja::Template> template_;
  std::unique_ptr<jinja::Template> tool_use_template_;  // may be null
  nlohmann::ordered_json special_tokens_ = nlohmann::ordered_json::object();  // variable name -> value
};

}  // namespace infernix
