#include "chat/output/reasoning_parser.h"

#include <gtest/gtest.h>

#include <string>

namespace infernix {
namespace {

// Pushes `text` one byte at a time; returns {reasoning, content}.
std::pair<std::string, std::string> ByteByByte(std::string_view text, ReasoningParserOptions options) {
  ReasoningParser parser(options);
  std::string reasoning, content;
  for (char c : text) {
    ReasoningDelta d = parser.Push(std::string_view(&c, 1));
    reasoning += d.reasoning;
    content += d.content;
  }
  ReasoningDelta d = parser.Finish();
  return {reasoning + d.reasoning, content + d.content};
}

TEST(ReasoningParser, PassesContentRaw) {
  auto [reasoning, content] = ByteByByte("<think>\nr\n</think>\n\n<tool_call>x\n", {});
  EXPECT_EQ(reasoning, "r");
  EXPECT_EQ(content, "\n\n<tool_call>x\n");  // newline trimming of content is the tool call parser's
}

TEST(ReasoningParser, HoldsBackOnlyWhatCouldBeATag) {
  ReasoningParser parser({.starts_in_reasoning = true});
  EXPECT_EQ(parser.Push("a <b").reasoning, "a <b");
  EXPECT_EQ(parser.Push(" c </th").reasoning, " c ");
  ReasoningDelta d = parser.Push("ink>\n\nd");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "\n\nd");
}

TEST(ReasoningParser, ToolCallEndsReasoningOnlyWhenDetected) {
  const std::string text = "plan\n<tool_call>\n<function=f>\n</function>\n</tool_call>";
  auto [r1, c1] = ByteByByte(text, {.starts_in_reasoning = true, .detect_tool_calls = true});
  EXPECT_EQ(r1, "plan");
  EXPECT_EQ(c1, "<tool_call>\n<function=f>\n</function>\n</tool_call>");
  auto [r2, c2] = ByteByByte(text, {.starts_in_reasoning = true, .detect_tool_calls = false});
  EXPECT_EQ(r2, text);
  EXPECT_EQ(c2, "");
}

TEST(ReasoningParser, ContentWhenNoThink) {
  auto [reasoning, content] = ByteByByte("  hello <think>", {});
  EXPECT_EQ(reasoning, "");
  EXPECT_EQ(content, "  hello <think>");
}

}  // namespace
}  // namespace infernix
