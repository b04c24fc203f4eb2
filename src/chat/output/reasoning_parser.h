// Splits a Qwen3 model's output stream into reasoning (inside <think> ... </think>) and the rest, which
// it passes on untouched for the tool call parser. docs/tool-calls.md states the conventions:
//
// - starts_in_reasoning: the prompt already ended with "<think>\n" (the chat template opened the
//   block), so the output starts as reasoning. A "<think>" the model repeats at the start is dropped.
// - Otherwise the output is content, unless its first non-whitespace text is "<think>": then the model
//   opened the block itself. A "<think>" anywhere later is plain text.
// - "</think>" ends the reasoning. When detect_tool_calls is set, a tool call start outside a code
//   fence (MatchToolCallStart) also ends it: the model forgot "</think>" before calling a tool.
// - Reasoning newlines follow NewlineTrimmer: the newlines after <think> and before </think> go.
//
// Text is pushed in any pieces (a piece may end inside a tag); the output does not depend on how the
// text was split. Not thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "chat/output/text_scan.h"

namespace infernix {

struct ReasoningParserOptions {
  bool starts_in_reasoning = false;
  bool detect_tool_calls = true;
};

struct ReasoningDelta {
  std::string reasoning;  // final reasoning text
  std::string content;    // raw text after the reasoning: tags and newlines as the model wrote them
};

class ReasoningParser {
 public:
  explicit ReasoningParser(ReasoningParserOptions options);

  ReasoningDelta Push(std::string_view text);
  // End of the stream: held-back text is resolved (an unfinished tag is plain text).
  ReasoningDelta Finish();

 private:
  enum class State { kStart, kReasoningStart, kReasoning, kContent };

  void Run(bool at_end, ReasoningDelta* out);
  // Consumes what can be decided from buf_[pos_..]; false when that needs more text.
  bool Step(bool at_end, ReasoningDelta* out);
  bool StepReasoning(bool at_end, ReasoningDelta* out);
  void EmitReasoning(std::string_view text, ReasoningDelta* out);

  ReasoningParserOptions options_;
  State state_;
  std::string buf_;
  size_t pos_ = 0;
  output::FenceTracker fence_;
  output::NewlineTrimmer trimmer_;
};

}  // namespace infernix
