// libFuzzer target: any bytes as a chat template (a model file's `chat_template`, or GGUF's
// `tokenizer.chat_template`), parsed by the Jinja engine and rendered with a conversation that uses
// every message kind (system, user, assistant with reasoning and tool calls, tool results) and tools.
// Any infernix::Error is an accepted outcome (a syntax error, an unsupported construct, a runtime
// error, a limit); a crash, a sanitizer report, a failed check, another exception or a render that
// runs past libFuzzer's timeout is a bug. Built by scripts/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "base/error.h"
#include "chat/jinja/template.h"

namespace {

const nlohmann::ordered_json& Variables() {
  static const nlohmann::ordered_json vars = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Read a.txt, then say hi \u00e9\u4e2d."},
      {"role": "assistant", "content": "", "reasoning_content": "need the file",
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "read_file", "arguments": {"path": "a.txt", "line": 3}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
      {"role": "assistant", "content": "<think>\nok\n</think>\n\nhi"},
      {"role": "user", "content": [{"type": "text", "text": "and now?"}]}],
    "tools": [{"type": "function", "function": {"name": "read_file", "description": "Reads a file",
               "parameters": {"type": "object", "properties": {"path": {"type": "string"},
               "line": {"type": "integer"}}, "required": ["path"]}}}],
    "add_generation_prompt": true, "enable_thinking": false, "bos_token": "", "eos_token": "<|im_end|>"})");
  return vars;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto tmpl = infernix::jinja::Template::Parse(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    (void)tmpl->Render(Variables());
  } catch (const infernix::Error&) {
  }
  return 0;
}
