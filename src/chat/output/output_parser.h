// Turns a Qwen model's output text, streamed as deltas of any size, into the structured deltas of the
// OpenAI and Anthropic APIs: reasoning, content and tool calls. Combines ReasoningParser (<think>
// blocks) and ToolCallParser (<tool_call> blocks, JSON and XML forms). docs/tool-calls.md states the
// formats and conventions.
//
// Guarantees, for any split of the same text into Push calls:
// - the concatenation of the deltas is the same, and equals ParseOutput of the whole text;
// - no tag text (nor part of one) reaches reasoning or content, except text that is not markup (a tag
//   in a code fence, a malformed tool call, an unterminated tag at the end of the stream);
// - model output never makes it throw.
// Not thread-safe; one parser per generated sequence.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/output/reasoning_parser.h"
#include "chat/output/text_scan.h"
#include "chat/output/tool_call_parser.h"

namespace infernix {

struct OutputDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;

  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of an object
};

struct ParsedOutput {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;
};

struct OutputParserOptions {
  // The prompt ends inside an open <think> block (the generation prompt ends with "<think>\n").
  bool starts_in_reasoning = false;
  // false: <think> tags are plain content (and starts_in_reasoning is ignored).
  bool parse_reasoning = true;
  // false (tool_choice "none", or no tools): <tool_call> blocks are plain content.
  bool parse_tool_calls = true;
  // The request's `tools` array, OpenAI shape; types the values of XML-form parameters.
  nlohmann::ordered_json tools;
  // Makes the id of each tool call; empty: RandomCallIdGenerator().
  std::function<std::string()> make_call_id;
  // The turn ends with its first complete tool call (parallel tool calls disabled): the output after
  // `</tool_call>` is ignored, and done() turns true there. With parse_tool_calls only.
  bool single_tool_call = false;
};

// "call_" followed by 24 characters of [A-Za-z0-9], from a generator seeded by std::random_device.
std::function<std::string()> RandomCallIdGenerator();

class OutputParser {
 public:
  explicit OutputParser(OutputParserOptions options);

  // `text` is the next piece of output (stop sequences and the end-of-turn token excluded).
  OutputDelta Push(std::string_view text);
  // End of the stream: flushes held-back text; unterminated constructs become content (an XML-form
  // call already streamed is closed instead). Call once; no Push after it.
  OutputDelta Finish();
  // Everything emitted so far: the concatenation of the deltas (complete after Finish).
  const ParsedOutput& result() const { return result_; }
  // With single_tool_call: the turn's one call is complete; what is pushed from now on is ignored, so
  // generation may stop. Pushing in other pieces, it turns true at the same byte of the output.
  bool done() const { return tool_calls_ && tool_calls_->done(); }

 private:
  void Route(ReasoningDelta reasoning, OutputDelta* out);
  void Record(const OutputDelta& delta);

  std::optional<ReasoningParser> reasoning_;
  std::optional<ToolCallParser> tool_calls_;
  output::NewlineTrimmer content_trimmer_;  // used when tool calls are not parsed
  bool finished_ = false;
  ParsedOutput result_;
};

// Appends `next` to `delta` (say, the Finish after a Push, sent as one chunk), keeping the rule that a
// call appears at most once in a delta: fragments of a call already in `delta` are joined to it.
void AppendDelta(OutputDelta* delta, OutputDelta next);

// Parses a complete output: the same as one Push of `text` and Finish.
ParsedOutput ParseOutput(std::string_view text, OutputParserOptions options);

}  // namespace infernix
