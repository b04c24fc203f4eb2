// libFuzzer target: any bytes as a model's output, parsed into reasoning, content and tool calls
// (OutputParser) the way the server streams it, in pieces whose sizes the input chooses, and checked
// against the parser's own guarantees (output_parser.h): model output never makes it throw, and any
// split of the text gives the same result as parsing it whole (ParseOutput). Built by scripts/fuzz.sh
// (clang, -fsanitize=fuzzer,address,undefined).
//
// Input: byte 0 picks the options (reasoning, starts in reasoning, tool calls, a single call), byte 1
// seeds the piece sizes, the rest is the text, made valid UTF-8 first exactly as the server's stream
// decoder makes every output (utf8::AppendLossy: each maximal ill-formed subsequence becomes U+FFFD).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "chat/output/output_parser.h"
#include "tokenizer/utf8.h"

namespace {

using infernix::OutputParserOptions;
using infernix::ParsedOutput;

// Tools whose parameters type XML-form values: a string, an integer, a number, a boolean, an object.
const nlohmann::ordered_json& Tools() {
  static const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object", "properties": {
      "path": {"type": "string"}, "line": {"type": "integer"}, "scale": {"type": "number"},
      "follow": {"type": "boolean"}, "opts": {"type": "object"}}}}},
    {"type": "function", "function": {"name": "ping", "parameters": {"type": "object"}}}])");
  return tools;
}

OutputParserOptions Options(uint8_t flags) {
  OutputParserOptions o;
  o.parse_reasoning = (flags & 1) != 0;
  o.starts_in_reasoning = (flags & 2) != 0;
  o.parse_tool_calls = (flags & 4) != 0;
  o.single_tool_call = (flags & 8) != 0;
  o.tools = Tools();
  o.make_call_id = [n = 0]() mutable { return "call_" + std::to_string(n++); };
  return o;
}

[[noreturn]] void Fail(const char* what, const ParsedOutput& whole, const ParsedOutput& pieces) {
  std::fprintf(
      stderr,
      "output_fuzz: %s\nwhole: reasoning [%s] content [%s] %zu calls\npieces: reasoning [%s] content [%s] %zu calls\n",
      what, whole.reasoning.c_str(), whole.content.c_str(), whole.tool_calls.size(), pieces.reasoning.c_str(),
      pieces.content.c_str(), pieces.tool_calls.size());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t flags = data[0];
  uint32_t seed = data[1] * 2654435761u + 1;
  std::string valid;
  infernix::utf8::AppendLossy({reinterpret_cast<const char*>(data + 2), size - 2}, /*final=*/true, &valid);
  const std::string_view text = valid;
  // Any exception escapes and is reported by libFuzzer: the parser must not throw on model output.
  const ParsedOutput whole = infernix::ParseOutput(text, Options(flags));
  infernix::OutputParser parser(Options(flags));
  for (size_t at = 0; at < text.size();) {
    seed = seed * 1103515245u + 12345u;
    const size_t piece = 1 + (seed >> 16) % 7;  // 1 to 7 bytes: tags and UTF-8 sequences get split
    parser.Push(text.substr(at, piece));
    at += piece;
  }
  parser.Finish();
  const ParsedOutput& pieces = parser.result();
  if (pieces.reasoning != whole.reasoning) Fail("reasoning differs", whole, pieces);
  if (pieces.content != whole.content) Fail("content differs", whole, pieces);
  if (pieces.tool_calls.size() != whole.tool_calls.size()) Fail("number of tool calls differs", whole, pieces);
  for (size_t i = 0; i < whole.tool_calls.size(); ++i) {
    const auto& a = whole.tool_calls[i];
    const auto& b = pieces.tool_calls[i];
    if (a.id != b.id || a.name != b.name || a.arguments != b.arguments) Fail("a tool call differs", whole, pieces);
    // Arguments are the JSON text of an object.
    const auto parsed = nlohmann::json::parse(a.arguments, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) Fail("tool call arguments are not a JSON object", whole, pieces);
  }
  return 0;
}
