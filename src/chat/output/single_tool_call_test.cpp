// OutputParserOptions::single_tool_call (parallel tool calls disabled): the turn ends with its first
// complete call, whatever follows it; done() turns true at the byte that completes the call, however
// the output is split. Each case parsed whole and streamed at every split (output_test_util.h).
#include <gtest/gtest.h>

#include <string>

#include "chat/output/output_parser.h"
#include "chat/output/output_test_util.h"

namespace infernix {
namespace {

using Json = nlohmann::ordered_json;
using testing::Args;
using testing::CallId;
using testing::ExpectParses;

OutputParserOptions Single(bool starts_in_reasoning = false) {
  OutputParserOptions options;
  options.starts_in_reasoning = starts_in_reasoning;
  options.single_tool_call = true;
  options.tools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}])");
  return options;
}

std::string JsonCall(const std::string& city) {
  return "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"" + city + "\"}}\n</tool_call>";
}

std::string XmlCall(const std::string& city) {
  return "<tool_call>\n<function=get_weather>\n<parameter=city>\n" + city + "\n</parameter>\n</function>\n</tool_call>";
}

ToolCall Call(int n, const std::string& city) { return {CallId(n), "get_weather", Args({{"city", city}})}; }

// The number of bytes pushed, one at a time, when done() turned true (npos: never).
size_t DoneAfter(const std::string& text, OutputParserOptions options) {
  OutputParser parser(std::move(options));
  for (size_t i = 0; i < text.size(); ++i) {
    parser.Push(text.substr(i, 1));
    if (parser.done()) return i + 1;
  }
  return std::string::npos;
}

TEST(SingleToolCall, JsonFormKeepsTheFirstCallOnly) {
  const std::string first = "Let me check.\n\n" + JsonCall("Paris");
  const std::string text = first + "\n" + JsonCall("Tokyo") + "\nBoth asked.";
  ParsedOutput expected;
  expected.content = "Let me check.";
  expected.tool_calls = {Call(1, "Paris")};
  ExpectParses(text, Single(), expected);
  EXPECT_EQ(DoneAfter(text, Single()), first.size());
  // Allowed in parallel, the same output has two calls and the trailing text.
  OutputParserOptions parallel = Single();
  parallel.single_tool_call = false;
  expected.content = "Let me check.\n\nBoth asked.";
  expected.tool_calls = {Call(1, "Paris"), Call(2, "Tokyo")};
  ExpectParses(text, parallel, expected);
  EXPECT_EQ(DoneAfter(text, parallel), std::string::npos);
}

TEST(SingleToolCall, XmlFormKeepsTheFirstCallOnly) {
  const std::string first = XmlCall("Paris");
  const std::string text = first + "\n" + XmlCall("Tokyo");
  ParsedOutput expected;
  expected.tool_calls = {Call(1, "Paris")};
  ExpectParses(text, Single(), expected);
  EXPECT_EQ(DoneAfter(text, Single()), first.size());
  // `</tool_call>` forgotten after `</function>`: the call ends where other text starts, which is ignored.
  const std::string forgot = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n";
  ExpectParses(forgot + "Now Tokyo: " + XmlCall("Tokyo"), Single(), expected);
  EXPECT_EQ(DoneAfter(forgot + "Now", Single()), forgot.size() + 1);
}

TEST(SingleToolCall, OnlyARealCallEndsTheTurn) {
  // A quoted call (code fence) and a malformed one stay content; the first well-formed call counts.
  const std::string quoted = "Format:\n```\n" + JsonCall("Rome") + "\n```\n";
  const std::string malformed = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }}\n</tool_call>\n";
  const std::string first = quoted + malformed + JsonCall("Paris");
  const std::string text = first + JsonCall("Tokyo");
  ParsedOutput expected;
  expected.content = quoted + malformed;
  expected.content.pop_back();  // the newline before the call is held back, and nothing follows
  expected.tool_calls = {Call(1, "Paris")};
  ExpectParses(text, Single(), expected);
  EXPECT_EQ(DoneAfter(text, Single()), first.size());
}

TEST(SingleToolCall, CallsThatEndTheReasoning) {
  // Qwen3.5: the template opened <think>, the model calls without closing it, twice.
  const std::string first = "Two cities, one call each.\n\n" + XmlCall("Paris");
  const std::string text = first + "\n" + XmlCall("Tokyo");
  ParsedOutput expected;
  expected.reasoning = "Two cities, one call each.";
  expected.tool_calls = {Call(1, "Paris")};
  ExpectParses(text, Single(/*starts_in_reasoning=*/true), expected);
  EXPECT_EQ(DoneAfter(text, Single(true)), first.size());
  // Reasoning closed, then content and calls.
  const std::string closed = "Think.\n</think>\n\nCalling.\n" + JsonCall("Paris");
  expected.reasoning = "Think.";
  expected.content = "Calling.";
  ExpectParses(closed + JsonCall("Tokyo") + "</think>", Single(true), expected);
  EXPECT_EQ(DoneAfter(closed + JsonCall("Tokyo"), Single(true)), closed.size());
}

TEST(SingleToolCall, NothingAfterDoneAndNoCallNoEnd) {
  OutputParser parser(Single());
  parser.Push("Sure. " + JsonCall("Paris"));
  ASSERT_TRUE(parser.done());
  EXPECT_TRUE(parser.Push(" more text " + JsonCall("Tokyo")).empty());
  EXPECT_TRUE(parser.Finish().empty());
  ASSERT_EQ(parser.result().tool_calls.size(), 1u);
  EXPECT_EQ(parser.result().content, "Sure. ");
  // No call at all: the output is parsed as usual and the turn never ends early.
  ExpectParses("Just text, `<tool_call>` mentioned.", Single(), ParsedOutput{"", "Just text, `<tool_call>` mentioned.", {}});
  EXPECT_EQ(DoneAfter("Just text.", Single()), std::string::npos);
  // Tool calls not parsed (tool_choice none): never done.
  OutputParserOptions none = Single();
  none.parse_tool_calls = false;
  EXPECT_EQ(DoneAfter(JsonCall("Paris") + JsonCall("Tokyo"), none), std::string::npos);
}

}  // namespace
}  // namespace infernix
