// Recorded-style outputs of Qwen3 (JSON tool calls, <think> reasoning), Qwen3-Coder (XML tool calls
// with code) and Qwen3.5 (reasoning opened by the template, XML calls), each parsed whole and streamed
// at every split (output_test_util.h).
#include "chat/output/output_parser.h"

#include <gtest/gtest.h>

#include "chat/output/output_test_util.h"

namespace infernix {
namespace {

using Json = nlohmann::ordered_json;
using testing::Args;
using testing::CallId;
using testing::ExpectParses;

Json Tools() {
  return Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather forecast",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "write_file",
      "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "content": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "run_tests",
      "parameters": {"type": "object", "properties": {
        "filter": {"type": "string"}, "timeout_s": {"type": "integer"}, "verbose": {"type": "boolean"},
        "env": {"type": "object"}, "ratio": {"type": "number"},
        "labels": {"type": "array", "items": {"type": "string"}}, "note": {"type": ["string", "null"]}}}}},
    {"type": "function", "function": {"name": "list_dir",
      "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "recursive": {"type": "boolean"},
        "max_depth": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}}}}
  ])");
}

OutputParserOptions Options(bool starts_in_reasoning = false) {
  OutputParserOptions options;
  options.starts_in_reasoning = starts_in_reasoning;
  options.tools = Tools();
  return options;
}

// Qwen3 (hybrid thinking, older template): the model opens <think> itself, then calls in JSON form.
TEST(OutputParser, Qwen3JsonCallsAfterReasoning) {
  const std::string text = R"OUT(<think>
The user wants the weather in Paris and Tokyo for the next 3 days.
I have get_weather(city, unit, days). Two cities: two calls; temperatures < 0 are possible, so celsius.
</think>

<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 3}}
</tool_call>
<tool_call>
{"name": "get_weather", "arguments": {"city": "Tokyo", "unit": "celsius", "days": 3}}
</tool_call>)OUT";
  ParsedOutput expected;
  expected.reasoning =
      "The user wants the weather in Paris and Tokyo for the next 3 days.\nI have get_weather(city, unit, days). Two "
      "cities: two calls; temperatures < 0 are possible, so celsius.";
  expected.tool_calls = {
      {CallId(1), "get_weather", Args({{"city", "Paris"}, {"unit", "celsius"}, {"days", 3}})},
      {CallId(2), "get_weather", Args({{"city", "Tokyo"}, {"unit", "celsius"}, {"days", 3}})},
  };
  ExpectParses(text, Options(), expected);
}

// Qwen3 thinking model: the template opened <think>, the answer is markdown content.
TEST(OutputParser, Qwen3ThinkingAnswer) {
  const std::string text = R"OUT(Okay, 17 * 23: 17 * 20 = 340, 17 * 3 = 51, total 391.

Check: 391 / 17 = 23, and 23 > 20.
</think>

17 × 23 = **391**.

Check: `391 / 17 = 23`.
)OUT";
  ParsedOutput expected;
  expected.reasoning = "Okay, 17 * 23: 17 * 20 = 340, 17 * 3 = 51, total 391.\n\nCheck: 391 / 17 = 23, and 23 > 20.";
  expected.content = "17 × 23 = **391**.\n\nCheck: `391 / 17 = 23`.";
  ExpectParses(text, Options(/*starts_in_reasoning=*/true), expected);
}

// Qwen3 with content before a JSON call whose arguments are a JSON string holding JSON.
TEST(OutputParser, Qwen3JsonCallWithStringArgumentsAndContent) {
  const std::string text = R"OUT(I need the forecast first.
</think>

Let me look that up for you.

<tool_call>
{"name": "get_weather", "arguments": "{\"city\": \"Zürich\", \"days\": 2}"}
</tool_call>)OUT";
  ParsedOutput expected;
  expected.reasoning = "I need the forecast first.";
  expected.content = "Let me look that up for you.";
  expected.tool_calls = {{CallId(1), "get_weather", Args({{"city", "Zürich"}, {"days", 2}})}};
  ExpectParses(text, Options(/*starts_in_reasoning=*/true), expected);
}

const char kCompareHeader[] = R"OUT(#pragma once
#include <vector>

// Returns true when a < b in the strict weak order, e.g. Less(1, 2).
template <typename T>
bool Less(const T& a, const T& b) {
  return a < b && !(b < a);
}

inline const char* kTagHint = "</parameter> is not the end here";
)OUT";

// Qwen3-Coder: XML calls, a multi-line code value with '<' and '>' (and a literal "</parameter>"), and
// values converted by the schema.
TEST(OutputParser, Qwen3CoderXmlCalls) {
  const std::string text = std::string(R"OUT(I'll add the comparison helper and run the tests.

<tool_call>
<function=write_file>
<parameter=path>
src/compare.h
</parameter>
<parameter=content>
)OUT") + kCompareHeader + R"OUT(
</parameter>
</function>
</tool_call>
<tool_call>
<function=run_tests>
<parameter=filter>
Compare.*
</parameter>
<parameter=timeout_s>
120
</parameter>
<parameter=verbose>
True
</parameter>
<parameter=env>
{"CTEST_OUTPUT_ON_FAILURE": "1", "OMP_NUM_THREADS": 2}
</parameter>
<parameter=ratio>
0.75
</parameter>
<parameter=labels>
["unit", "fast"]
</parameter>
<parameter=note>
None
</parameter>
</function>
</tool_call>)OUT";
  ParsedOutput expected;
  expected.content = "I'll add the comparison helper and run the tests.";
  expected.tool_calls = {
      {CallId(1), "write_file", Args({{"path", "src/compare.h"}, {"content", kCompareHeader}})},
      {CallId(2), "run_tests",
       Args({{"filter", "Compare.*"},
             {"timeout_s", 120},
             {"verbose", true},
             {"env", {{"CTEST_OUTPUT_ON_FAILURE", "1"}, {"OMP_NUM_THREADS", 2}}},
             {"ratio", 0.75},
             {"labels", {"unit", "fast"}},
             {"note", nullptr}})},
  };
  ExpectParses(text, Options(), expected);
}

// Qwen3.5: the template opened <think>; the model calls a tool without closing it.
TEST(OutputParser, Qwen35CallInsideUnclosedThink) {
  const std::string text = R"OUT(The user wants the files under /var/log, two levels deep.
list_dir takes path, recursive and max_depth.

<tool_call>
<function=list_dir>
<parameter=path>
/var/log
</parameter>
<parameter=recursive>
true
</parameter>
<parameter=max_depth>
2
</parameter>
</function>
</tool_call>)OUT";
  ParsedOutput expected;
  expected.reasoning =
      "The user wants the files under /var/log, two levels deep.\nlist_dir takes path, recursive and max_depth.";
  expected.tool_calls = {
      {CallId(1), "list_dir", Args({{"path", "/var/log"}, {"recursive", true}, {"max_depth", 2}})}};
  ExpectParses(text, Options(/*starts_in_reasoning=*/true), expected);
}

// Qwen3.5: reasoning, content, then two XML calls with text between them and after them.
TEST(OutputParser, Qwen35ReasoningContentAndCalls) {
  const std::string text = R"OUT(São Paulo and Lima: two get_weather calls.
</think>

Let me check both cities.

<tool_call>
<function=get_weather>
<parameter=city>
São Paulo
</parameter>
<parameter=days>
3
</parameter>
</function>
</tool_call>
Now the second one.
<tool_call>
<function=get_weather>
<parameter=city>
Lima
</parameter>
<parameter=unit>
fahrenheit
</parameter>
</function>
</tool_call>

Both requested.)OUT";
  ParsedOutput expected;
  expected.reasoning = "São Paulo and Lima: two get_weather calls.";
  expected.content = "Let me check both cities.\n\nNow the second one.\nBoth requested.";
  expected.tool_calls = {
      {CallId(1), "get_weather", Args({{"city", "São Paulo"}, {"days", 3}})},
      {CallId(2), "get_weather", Args({{"city", "Lima"}, {"unit", "fahrenheit"}})},
  };
  ExpectParses(text, Options(/*starts_in_reasoning=*/true), expected);
}

TEST(OutputParser, StreamsXmlStringArgumentsBeforeTheParameterEnds) {
  OutputParserOptions options = Options();
  options.make_call_id = testing::SequentialIds();
  OutputParser parser(std::move(options));
  OutputDelta d = parser.Push("<tool_call>\n<function=write_file>\n<parameter=content>\nline one\n");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].id, CallId(1));
  EXPECT_EQ(d.tool_calls[0].name, "write_file");
  EXPECT_EQ(d.tool_calls[0].arguments_fragment, R"({"content":"line one)");  // the newline may end it
  d = parser.Push("line two");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_TRUE(d.tool_calls[0].id.empty());
  EXPECT_EQ(d.tool_calls[0].arguments_fragment, R"(\nline two)");
  d = parser.Push("\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments_fragment, R"("})");
  EXPECT_TRUE(parser.Finish().empty());
  EXPECT_EQ(parser.result().tool_calls[0].arguments, R"({"content":"line one\nline two"})");
}

TEST(OutputParser, EmitsJsonCallsWholeWhenClosed) {
  OutputParserOptions options = Options();
  options.make_call_id = testing::SequentialIds();
  OutputParser parser(std::move(options));
  EXPECT_TRUE(parser.Push("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": ").empty());
  EXPECT_TRUE(parser.Push("\"Oslo\"}}\n</tool_").empty());
  OutputDelta d = parser.Push("call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].index, 0);
  EXPECT_EQ(d.tool_calls[0].id, CallId(1));
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments_fragment, R"({"city":"Oslo"})");
}

TEST(OutputParser, AppendDeltaKeepsOneEntryPerCall) {
  OutputDelta a{"r", "c", {{0, "id0", "f", "{\"x\":"}}};
  AppendDelta(&a, OutputDelta{"s", "d", {{0, "", "", "1}"}, {1, "id1", "g", "{}"}}});
  EXPECT_EQ(a.reasoning, "rs");
  EXPECT_EQ(a.content, "cd");
  ASSERT_EQ(a.tool_calls.size(), 2u);
  EXPECT_EQ(a.tool_calls[0].id, "id0");
  EXPECT_EQ(a.tool_calls[0].arguments_fragment, "{\"x\":1}");
  EXPECT_EQ(a.tool_calls[1].id, "id1");
}

TEST(OutputParser, DefaultCallIds) {
  OutputParserOptions options;
  ParsedOutput out = ParseOutput(
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>",
      options);
  ASSERT_EQ(out.tool_calls.size(), 2u);
  for (const ToolCall& call : out.tool_calls) {
    ASSERT_EQ(call.id.size(), 5u + 24u);
    EXPECT_EQ(call.id.substr(0, 5), "call_");
    for (char c : call.id.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << call.id;
  }
  EXPECT_NE(out.tool_calls[0].id, out.tool_calls[1].id);
}

}  // namespace
}  // namespace infernix
