// Extracts Qwen tool calls from the content of a model's output stream (what follows the reasoning):
//
//   JSON (Hermes) form:  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   XML (Qwen3-Coder / Qwen3.5) form:
//     <tool_call>\n<function=f>\n<parameter=p>\nvalue\n</parameter>\n</function>\n</tool_call>
//
// Everything else is content. docs/tool-calls.md states the rules; in short:
// - "<tool_call>" starts a call only outside markdown code fences and only when a JSON object with a
//   string key or "<function=" follows.
// - JSON form: the call is emitted whole once "</tool_call>" closes it; a malformed one (bad JSON, no
//   name, not closed) stays content, byte for byte.
// - XML form: the call is committed when "<function=name>" is complete (its first delta goes out);
//   arguments then stream as parameters arrive (string values piece by piece, others once complete,
//   converted by the type the tool's schema declares). A call cut off by the end of the stream is
//   closed with what arrived.
// - Content newlines follow NewlineTrimmer; each tool call ends a segment.
// - With single_call the stream ends with the first complete call: everything after it is ignored.
//
// Text is pushed in any pieces; the output does not depend on how the text was split. Not thread-safe.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/output/text_scan.h"

namespace infernix {

// One streamed piece of a tool call. Within one delta a call appears at most once; its first
// appearance ever carries its id and name, later ones leave them empty. The concatenation of a call's
// fragments is its arguments JSON text.
struct ToolCallDelta {
  int index = 0;
  std::string id;
  std::string name;
  std::string arguments_fragment;
};

struct ToolCallParserOptions {
  nlohmann::ordered_json tools;               // the request's `tools` (OpenAI shape), may be null
  std::function<std::string()> make_call_id;  // required
  // The turn allows one call (parallel tool calls disabled): once the first call is complete, the rest
  // of the stream is ignored (no content, no calls) and done() is true.
  bool single_call = false;
};

struct ToolCallParserDelta {
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
};

class ToolCallParser {
 public:
  explicit ToolCallParser(ToolCallParserOptions options);

  ToolCallParserDelta Push(std::string_view text);
  // End of the stream: unfinished JSON calls become content, an open XML call is closed.
  ToolCallParserDelta Finish();
  // With single_call: the first call is complete and the rest of the stream is ignored.
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kText, kJson, kXmlName, kXmlBetween, kXmlParamName, kXmlValue, kXmlAfterFunction, kDone };
  static constexpr size_t kNone = std::string::npos;

  void Run(bool at_end);
  // Consumes what can be decided from buf_[pos_..]; false when that needs more text.
  bool Step(bool at_end);
  bool StepText(bool at_end);
  bool StepJson(bool at_end);
  bool StepXmlName();
  bool StepXmlBetween(bool at_end);
  bool StepXmlParamName();
  bool StepXmlValue(bool at_end);
  bool StepXmlAfterFunction(bool at_end);
  void FinishStream();

  void EmitContent(std::string_view text);
  // The raw text held since hold_ up to `end` becomes content; scanning resumes at `end` in `next`.
  void Abandon(size_t end, State next);
  void StartCall(const std::string& name);
  void EmitArguments(std::string_view fragment);
  void StartParameter(std::string_view name);
  void AddValue(std::string_view text);
  void FinishParameter();
  void CloseArguments();
  void EndCall();

  ToolCallParserOptions options_;
  ToolCallParserDelta out_;  // what the current Push/Finish emits
  State state_ = State::kText;
  std::string buf_;
  size_t pos_ = 0;       // next unread byte of buf_
  size_t hold_ = kNone;  // start of raw text kept in case a tentative construct turns out malformed
  output::FenceTracker fence_;
  output::NewlineTrimmer trimmer_;

  // JSON form: brace matching over buf_[pos_..scan_).
  size_t scan_ = 0;
  size_t object_begin_ = kNone;
  size_t object_end_ = kNone;
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;

  // XML form.
  int index_ = -1;  // of the call being emitted
  int calls_ = 0;
  nlohmann::ordered_json parameters_;  // the parameters schema of the call's function, or null
  bool arguments_open_ = false;
  bool after_stray_ = false;    // the last thing read in the call was stray text
  unsigned param_types_ = 0;
  bool value_started_ = false;  // the newline after <parameter=name> was dealt with
  bool held_newline_ = false;   // a value's last newline, dropped if the value ends there
  std::string value_;           // a non-string value, converted when complete
};

}  // namespace infernix
