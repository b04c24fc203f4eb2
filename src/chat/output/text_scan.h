// Lexical helpers shared by the output parsers (reasoning_parser, tool_call_parser): matching tags at
// the front of a buffer that may still grow, markdown code fence tracking, the newline trimming of the
// reasoning and content channels, and JSON string escaping. Nothing here throws.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace infernix::output {

// The outcome of matching a pattern at the front of a buffer that may grow: kPartial when the buffer is
// a proper prefix of a possible match, so the answer needs more text.
enum class Match { kNo, kPartial, kYes };

// Whether `text` starts with `literal`.
Match MatchLiteral(std::string_view text, std::string_view literal);

// The two tool call bodies Qwen models emit after <tool_call>.
enum class ToolCallForm { kJson, kXml };

inline constexpr std::string_view kThinkOpen = "<think>";
inline constexpr std::string_view kThinkClose = "</think>";
inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";
inline constexpr std::string_view kFunctionOpen = "<function=";
inline constexpr std::string_view kFunctionClose = "</function>";
inline constexpr std::string_view kParameterOpen = "<parameter=";
inline constexpr std::string_view kParameterClose = "</parameter>";

// Whether `text` starts a tool call: "<tool_call>", optional whitespace, then either `{` and optional
// whitespace and `"` (JSON form) or "<function=" (XML form). A bare "<tool_call>" mention is not a call.
// With at_end (no more text will come) a partial match is kNo. On kYes, *form is set.
Match MatchToolCallStart(std::string_view text, bool at_end, ToolCallForm* form);

inline bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Follows markdown code fences (a line starting, after up to three spaces, with three or more backticks
// or tildes; closed by a line starting with at least as many of the same character) over a text fed in
// order, in any pieces. Tags inside a fence are quoted, not markup.
class FenceTracker {
 public:
  void Feed(std::string_view text);
  // Whether the next character is inside a fence, given that it is markup ('<'), so it ends a fence
  // marker in progress at the start of the line.
  bool InFenceBeforeMarkup();
  // The next text starts a new line (after a tag that ended a block).
  void StartLine();

 private:
  void Feed(char c);
  void EndMarker();

  bool in_fence_ = false;
  char fence_char_ = 0;
  int fence_len_ = 0;
  bool line_decided_ = false;  // the start of the current line can no longer be a fence marker
  int indent_ = 0;
  char run_char_ = 0;
  int run_len_ = 0;
};

// The newline convention of the reasoning and content channels (docs/tool-calls.md): newlines at the
// start of a segment (the start of the channel, or text right after a tool call) are dropped, and a run
// of trailing newlines is held back until more non-newline text follows in the same channel, so
// newlines at the very end are dropped. Fed in any pieces, it emits the same text.
class NewlineTrimmer {
 public:
  // Returns the text to emit now.
  std::string Add(std::string_view text);
  // The next text starts a new segment: its leading newlines are dropped (held ones stay held).
  void StartSegment() { segment_start_ = true; }

 private:
  bool segment_start_ = true;
  size_t held_newlines_ = 0;
};

// Appends `text` escaped as the inside of a JSON string (no quotes): `"`, `\` and control characters
// are escaped, every other byte is copied, so escaping a text in pieces gives the escaping of the whole
// (and, for valid UTF-8, what nlohmann::json::dump gives).
void AppendJsonEscaped(std::string_view text, std::string* out);

}  // namespace infernix::output
