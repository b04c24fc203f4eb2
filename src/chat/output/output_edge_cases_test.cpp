// Edge cases of the output parsers, each parsed whole and streamed at every split
// (output_test_util.h).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "chat/output/output_parser.h"
#include "chat/output/output_test_util.h"

namespace infernix {
namespace {

using Json = nlohmann::ordered_json;
using testing::Args;
using testing::CallId;
using testing::ExpectParses;

OutputParserOptions Options(bool starts_in_reasoning = false) {
  OutputParserOptions options;
  options.starts_in_reasoning = starts_in_reasoning;
  options.tools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                     "hourly": {"type": "boolean"}, "options": {"type": "object"}}}}}])");
  return options;
}

ParsedOutput Content(std::string content) {
  ParsedOutput out;
  out.content = std::move(content);
  return out;
}

ParsedOutput Reasoned(std::string reasoning, std::string content) {
  ParsedOutput out;
  out.reasoning = std::move(reasoning);
  out.content = std::move(content);
  return out;
}

const char kJsonCall[] = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
const char kXmlCall[] =
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>";

ToolCall ParisCall(int n) { return {CallId(n), "get_weather", Args({{"city", "Paris"}})}; }

TEST(OutputEdgeCases, NoThinkAtAll) {
  ExpectParses("Paris is the capital of France.", Options(), Content("Paris is the capital of France."));
}

TEST(OutputEdgeCases, ThinkingDisabledInThePrompt) {
  // enable_thinking=false renders "<think>\n\n</think>\n\n" in the prompt: the output is content.
  ExpectParses("\n\nHello! How can I help you today?\n", Options(), Content("Hello! How can I help you today?"));
}

TEST(OutputEdgeCases, ThinkOpenedByTheModel) {
  ExpectParses("\n<think>\nHmm, x < y.\n\n</think>\n\nYes: x < y.", Options(), Reasoned("Hmm, x < y.", "Yes: x < y."));
}

TEST(OutputEdgeCases, StartsInReasoningAndModelRepeatsThink) {
  ExpectParses("<think>\nShort thought.\n</think>\n\nAnswer.", Options(true), Reasoned("Short thought.", "Answer."));
}

TEST(OutputEdgeCases, EmptyReasoning) {
  ExpectParses("\n</think>\n\nAnswer.", Options(true), Reasoned("", "Answer."));
  ExpectParses("<think>\n\n</think>\n\nAnswer.", Options(), Reasoned("", "Answer."));
}

TEST(OutputEdgeCases, TruncatedInsideReasoning) {
  ExpectParses("Let me compare a<b and b</thi", Options(true), Reasoned("Let me compare a<b and b</thi", ""));
}

TEST(OutputEdgeCases, ThinkLaterInContentIsText) {
  ExpectParses("Tags like <think> and </think> are used by Qwen3.", Options(),
               Content("Tags like <think> and </think> are used by Qwen3."));
}

TEST(OutputEdgeCases, ReasoningNotParsed) {
  OutputParserOptions options = Options(true);
  options.parse_reasoning = false;
  ExpectParses("<think>\nx\n</think>\n\ny", options, Content("<think>\nx\n</think>\n\ny"));
}

TEST(OutputEdgeCases, ReasoningMentionsToolCallTag) {
  // A "<tool_call>" not followed by a call body does not end the reasoning.
  ExpectParses("I must wrap calls in <tool_call> tags.\n</think>\n\nOK.", Options(true),
               Reasoned("I must wrap calls in <tool_call> tags.", "OK."));
}

TEST(OutputEdgeCases, UnclosedThinkWithJsonCall) {
  ParsedOutput expected = Reasoned("I will call the tool.", "");
  expected.tool_calls = {ParisCall(1)};
  ExpectParses(std::string("I will call the tool.\n\n") + kJsonCall, Options(true), expected);
}

TEST(OutputEdgeCases, FencedCallInReasoningStaysReasoning) {
  std::string reasoning = std::string("The format is:\n```\n") + kJsonCall + "\n```\nso I answer directly.";
  ExpectParses(reasoning + "\n</think>\n\nHi.", Options(true), Reasoned(reasoning, "Hi."));
}

TEST(OutputEdgeCases, CodeFencedCallIsText) {
  std::string fenced = std::string("Here is how a call looks:\n\n```xml\n") + kXmlCall + "\n```\n\nThat is all.";
  ExpectParses(fenced, Options(), Content(fenced));
  std::string tilde = std::string("Example:\n  ~~~~\n") + kJsonCall + "\n  ~~~~ \nDone.";
  ExpectParses(tilde, Options(), Content(tilde));
}

TEST(OutputEdgeCases, CallAfterAClosedFenceIsParsed) {
  ParsedOutput expected = Content("```python\nprint('<tool_call>')\n```\nNow the real call:");
  expected.tool_calls = {ParisCall(1)};
  ExpectParses(expected.content + "\n" + kXmlCall, Options(), expected);
}

TEST(OutputEdgeCases, InlineToolCallMentionIsText) {
  ExpectParses("Use the `<tool_call>` tag, or <tool_call>x.", Options(),
               Content("Use the `<tool_call>` tag, or <tool_call>x."));
}

TEST(OutputEdgeCases, MalformedJsonCallsStayContent) {
  // A missing brace: the JSON runs into "</tool_call>".
  std::string missing_brace =
      "Calling now.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}\n</tool_call>";
  ExpectParses(missing_brace, Options(), Content(missing_brace));
  // Balanced but not JSON.
  std::string trailing_comma = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 1,}}\n</tool_call>";
  ExpectParses(trailing_comma, Options(), Content(trailing_comma));
  // No name; arguments that are not an object; a string that is not JSON.
  for (const char* body : {R"({"arguments": {"city": "Paris"}})", R"({"name": "get_weather", "arguments": [1]})",
                           R"({"name": "get_weather", "arguments": "city=Paris"})", R"({"name": ""})"}) {
    std::string text = std::string("<tool_call>\n") + body + "\n</tool_call>";
    ExpectParses(text, Options(), Content(text));
  }
  // Text after the object before the closing tag.
  std::string extra = "<tool_call>\n{\"name\": \"get_weather\"} trailing\n</tool_call>";
  ExpectParses(extra, Options(), Content(extra));
}

TEST(OutputEdgeCases, MalformedCallDoesNotHideTheNextOne) {
  std::string bad = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}\n</tool_call>";
  ParsedOutput expected = Content(bad);
  expected.tool_calls = {ParisCall(1)};
  ExpectParses(bad + "\n" + kJsonCall, Options(), expected);
}

TEST(OutputEdgeCases, UnterminatedJsonCallIsContent) {
  std::string text = "Sure.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
  ExpectParses(text, Options(), Content(text));
  std::string no_close = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool";
  ExpectParses(no_close, Options(), Content(no_close));
}

TEST(OutputEdgeCases, XmlCallCutInTheHeaderIsContent) {
  ExpectParses("<tool_call>\n<function=get_wea", Options(), Content("<tool_call>\n<function=get_wea"));
  ExpectParses("<tool_call>\n<function=get\nweather>", Options(), Content("<tool_call>\n<function=get\nweather>"));
}

TEST(OutputEdgeCases, XmlCallCutInAValueIsClosed) {
  // Committed at "<function=...>": the call keeps what arrived.
  ParsedOutput expected;
  expected.tool_calls = {{CallId(1), "get_weather", Args({{"city", "Pari"}})}};
  ExpectParses("<tool_call>\n<function=get_weather>\n<parameter=city>\nPari", Options(), expected);
  expected.tool_calls = {{CallId(1), "get_weather", Args({{"city", "Paris"}, {"days", 3}})}};
  ExpectParses("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n",
               Options(), expected);
  // A parameter tag cut short is kept as content.
  ParsedOutput partial_tag = Content("<parameter=da");
  partial_tag.tool_calls = {ParisCall(1)};
  ExpectParses("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=da", Options(),
               partial_tag);
}

TEST(OutputEdgeCases, TextBeforeAndAfterCalls) {
  ParsedOutput expected = Content("Checking.\n\nI have asked for both.");
  expected.tool_calls = {ParisCall(1), ParisCall(2)};
  ExpectParses(std::string("Checking.\n\n") + kJsonCall + "\n" + kXmlCall + "\n\nI have asked for both.\n", Options(),
               expected);
}

TEST(OutputEdgeCases, ToolCallsDisabled) {
  OutputParserOptions options = Options(true);
  options.parse_tool_calls = false;
  std::string content = std::string("Calling:\n") + kJsonCall;
  ExpectParses("Thinking.\n</think>\n\n" + content + "\n", options, Reasoned("Thinking.", content));
  // Nor does a call end the reasoning.
  ExpectParses(std::string("Thinking.\n") + kXmlCall, options, Reasoned(std::string("Thinking.\n") + kXmlCall, ""));
}

TEST(OutputEdgeCases, UnknownToolIsParsedWithStringValues) {
  ParsedOutput expected;
  expected.tool_calls = {{CallId(1), "send_email", Args({{"to", "a@b.c"}, {"count", "3"}, {"flag", "true"}})},
                         {CallId(2), "delete_everything", Args({{"force", true}})}};
  ExpectParses(
      "<tool_call>\n<function=send_email>\n<parameter=to>\na@b.c\n</parameter>\n<parameter=count>\n3\n</parameter>\n"
      "<parameter=flag>\ntrue\n</parameter>\n</function>\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"delete_everything\", \"arguments\": {\"force\": true}}\n</tool_call>",
      Options(), expected);
}

TEST(OutputEdgeCases, XmlValuesThatDoNotFitTheirTypeStayStrings) {
  ParsedOutput expected;
  expected.tool_calls = {{CallId(1), "get_weather",
                          Args({{"days", "three"}, {"hourly", "yes"}, {"options", "{oops"}, {"extra", "42"}})}};
  ExpectParses(
      "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n<parameter=hourly>\nyes\n"
      "</parameter>\n<parameter=options>\n{oops\n</parameter>\n<parameter=extra>\n42\n</parameter>\n</function>\n"
      "</tool_call>",
      Options(), expected);
}

TEST(OutputEdgeCases, XmlLeniency) {
  // No "</parameter>" before "</function>"; no "</function>" before "</tool_call>"; no newlines.
  ParsedOutput expected;
  expected.tool_calls = {ParisCall(1), {CallId(2), "get_weather", Args({{"city", "Rome"}, {"days", 2}})},
                         ParisCall(3)};
  ExpectParses(
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>\n"
      "<tool_call><function=get_weather><parameter=city>Rome</parameter><parameter=days> 2 </parameter>"
      "</tool_call>\n"
      "<tool_call>\n<function= get_weather >\n<parameter= city >\nParis\n</parameter>\n</function>",
      Options(), expected);
}

TEST(OutputEdgeCases, XmlValueKeepsInnerNewlinesAndTagLikeText) {
  std::string value = "\nfirst line\n<b>bold</b> </parameter>x </function>y\n\n";
  ParsedOutput expected;
  expected.tool_calls = {{CallId(1), "write", Args({{"text", value}})}};
  ExpectParses(
      "<tool_call>\n<function=write>\n<parameter=text>\n" + value + "\n</parameter>\n</function>\n</tool_call>",
      Options(), expected);
}

TEST(OutputEdgeCases, XmlCallWithoutParameters) {
  ParsedOutput expected;
  expected.tool_calls = {{CallId(1), "get_time", "{}"}};
  ExpectParses("<tool_call>\n<function=get_time>\n</function>\n</tool_call>", Options(), expected);
}

TEST(OutputEdgeCases, StrayTextInsideXmlCallIsContent) {
  ParsedOutput expected = Content("oops <bad>");
  expected.tool_calls = {ParisCall(1)};
  ExpectParses(
      "<tool_call>\n<function=get_weather>\noops <bad>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
      "</tool_call>",
      Options(), expected);
}

TEST(OutputEdgeCases, JsonCallVariants) {
  ParsedOutput expected;
  expected.tool_calls = {{CallId(1), "get_time", "{}"},
                         {CallId(2), "get_time", "{}"},
                         {CallId(3), "get_weather", Args({{"city", "Paris"}})},
                         {CallId(4), "get_weather", Args({{"text", "a </tool_call> <b> \"}\" {"}})}};
  ExpectParses(
      "<tool_call>\n{\"name\": \"get_time\"}\n</tool_call>\n"
      "<tool_call>{\"name\":\"get_time\",\"arguments\":null}</tool_call>\n"
      "<tool_call>\n  {\n    \"name\": \"get_weather\",\n    \"parameters\": {\"city\": \"Paris\"}\n  }\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"text\": \"a </tool_call> <b> \\\"}\\\" {\"}}\n"
      "</tool_call>",
      Options(), expected);
}

TEST(OutputEdgeCases, WhitespaceOnlyAndEmptyOutputs) {
  ExpectParses("", Options(), Content(""));
  ExpectParses("", Options(true), Content(""));
  ExpectParses("\n\n \n", Options(), Content(" "));
  ExpectParses("\n\n", Options(true), Content(""));
}

TEST(OutputEdgeCases, MultibyteTextAroundTags) {
  ParsedOutput expected = Reasoned("日本語で考える…", "答え: 東京 ☀️");
  expected.tool_calls = {{CallId(1), "get_weather", Args({{"city", "東京"}})}};
  ExpectParses(
      "<think>\n日本語で考える…\n</think>\n\n答え: 東京 ☀️\n<tool_call>\n<function=get_weather>\n<parameter=city>\n東京\n"
      "</parameter>\n</function>\n</tool_call>",
      Options(), expected);
}


// Random mixes of tags, fragments of tags, JSON and markdown: whatever the parse, it must not depend on
// how the text is split, and must not crash.
TEST(OutputEdgeCases, RandomMarkupIsSplitInvariant) {
  const std::vector<std::string> pieces = {
      "<think>", "</think>", "<tool_call>", "</tool_call>", "<function=get_weather>", "<function=f>", "</function>",
      "<parameter=city>", "<parameter=days>", "<parameter=options>", "</parameter>", "<tool_", "</para", "<", ">",
      "\n", "\n\n", " ", "```", "~~~", "`", "{", "}", "[", "]", "\"", "\"name\": \"f\"", "\"arguments\": ",
      ":", ",", "\\", "Paris", "3", "true", "null", "x < y", "é", "日本",
      "<tool_call>\n<function=get_weather>\n<parameter=days>\n", "\n</parameter>\n", "\n</function>\n</tool_call>",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": ", "}}\n</tool_call>", "\\\""};
  std::mt19937 rng(42);
  size_t calls = 0;
  for (int round = 0; round < 300 && !::testing::Test::HasFailure(); ++round) {
    std::string text;
    std::uniform_int_distribution<size_t> pick(0, pieces.size() - 1);
    for (int n = std::uniform_int_distribution<int>(1, 40)(rng); n > 0; --n) text += pieces[pick(rng)];
    for (bool starts_in_reasoning : {false, true}) {
      OutputParserOptions options = Options(starts_in_reasoning);
      OutputParserOptions whole = options;
      whole.make_call_id = testing::SequentialIds();
      SCOPED_TRACE(text);
      ParsedOutput parsed = ParseOutput(text, whole);
      calls += parsed.tool_calls.size();
      ExpectParses(text, options, parsed, {.every_two_way_split = false, .random_rounds = 40});
    }
  }
  EXPECT_GT(calls, 100u);  // the mix does exercise tool calls
}

}  // namespace
}  // namespace infernix
