#include "chat/output/tool_call_parser.h"

#include <gtest/gtest.h>

#include "chat/output/output_parser.h"
#include "chat/output/tool_schema.h"

namespace infernix {
namespace {

using Json = nlohmann::ordered_json;

TEST(ToolSchema, FindsPropertiesInEveryToolShape) {
  Json tools = Json::parse(R"([
    {"type": "function", "function": {"name": "a", "parameters": {"properties": {"x": {"type": "integer"}}}}},
    {"name": "b", "parameters": {"properties": {"y": {"type": ["number", "null"]}}}},
    {"name": "c", "input_schema": {"properties": {"z": {"anyOf": [{"type": "boolean"}, {"type": "string"}]}}}},
    {"name": "d"}, 7, {"function": "e"}
  ])");
  EXPECT_EQ(ParameterTypes(FindToolProperties(tools, "a"), "x"), kParamInteger);
  EXPECT_EQ(ParameterTypes(FindToolProperties(tools, "b"), "y"), kParamNumber | kParamNull);
  EXPECT_EQ(ParameterTypes(FindToolProperties(tools, "c"), "z"), kParamBoolean | kParamString);
  EXPECT_EQ(ParameterTypes(FindToolProperties(tools, "a"), "missing"), 0u);
  EXPECT_EQ(FindToolProperties(tools, "d"), nullptr);
  EXPECT_EQ(FindToolProperties(tools, "nope"), nullptr);
  EXPECT_EQ(FindToolProperties(Json(), "a"), nullptr);
  EXPECT_EQ(FindToolProperties(Json::parse(R"({"a": 1})"), "a"), nullptr);
}

TEST(ToolSchema, FollowsLocalRefsWithinTheParameters) {
  Json tools = Json::parse(R"([{"name": "f", "parameters": {"type": "object",
    "$defs": {"pt": {"type": "object"}, "alias": {"$ref": "#/$defs/pt"}, "loop": {"$ref": "#/$defs/loop"}},
    "properties": {"p": {"$ref": "#/$defs/pt"}, "q": {"$ref": "#/$defs/alias"}, "r": {"$ref": "#/$defs/none"},
                   "s": {"anyOf": [{"$ref": "#/$defs/pt"}, {"type": "null"}]}, "t": {"$ref": "#/$defs/loop"}}}}])");
  const Json* params = FindToolParameters(tools, "f");
  ASSERT_NE(params, nullptr);
  const Json* props = FindToolProperties(tools, "f");
  EXPECT_EQ(ParameterTypes(props, "p", params), kParamObject);
  EXPECT_EQ(ParameterTypes(props, "q", params), kParamObject);
  EXPECT_EQ(ParameterTypes(props, "r", params), 0u);
  EXPECT_EQ(ParameterTypes(props, "s", params), kParamObject | kParamNull);
  EXPECT_EQ(ParameterTypes(props, "t", params), 0u);  // a cycle ends at the depth limit
  EXPECT_EQ(ParameterTypes(props, "p"), 0u);  // without the root, refs are unknown
  // The parser converts a $ref'd object parameter as an object.
  OutputParserOptions options;
  options.tools = tools;
  ParsedOutput out = ParseOutput("<tool_call>\n<function=f>\n<parameter=p>\n{\"x\": 1}\n</parameter>\n</function>\n</tool_call>",
                                 options);
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].arguments, R"({"p":{"x":1}})");
}

TEST(ToolSchema, ConvertsValuesByType) {
  EXPECT_EQ(ConvertParameterValue("42", kParamInteger), "42");
  EXPECT_EQ(ConvertParameterValue(" -7 ", kParamInteger), "-7");
  EXPECT_EQ(ConvertParameterValue("4.5", kParamInteger), "\"4.5\"");
  EXPECT_EQ(ConvertParameterValue("4.5", kParamNumber), "4.5");
  EXPECT_EQ(ConvertParameterValue("3", kParamNumber), "3");
  EXPECT_EQ(ConvertParameterValue("1e3", kParamNumber), "1000.0");
  EXPECT_EQ(ConvertParameterValue("0x10", kParamNumber), "\"0x10\"");
  EXPECT_EQ(ConvertParameterValue("TRUE", kParamBoolean), "true");
  EXPECT_EQ(ConvertParameterValue("False", kParamBoolean), "false");
  EXPECT_EQ(ConvertParameterValue("1", kParamBoolean), "\"1\"");
  EXPECT_EQ(ConvertParameterValue("null", kParamString | kParamNull), "null");
  EXPECT_EQ(ConvertParameterValue("None", kParamInteger | kParamNull), "null");
  EXPECT_EQ(ConvertParameterValue("null", kParamString), "\"null\"");
  EXPECT_EQ(ConvertParameterValue("{\"a\": [1, 2]}", kParamObject), "{\"a\":[1,2]}");
  EXPECT_EQ(ConvertParameterValue("[1, \"x\"]", kParamArray), "[1,\"x\"]");
  EXPECT_EQ(ConvertParameterValue("[1]", kParamObject), "\"[1]\"");
  EXPECT_EQ(ConvertParameterValue("{'a': 1}", kParamObject), "\"{'a': 1}\"");
  EXPECT_EQ(ConvertParameterValue("7", kParamInteger | kParamString), "7");
  EXPECT_EQ(ConvertParameterValue("seven", kParamInteger | kParamString), "\"seven\"");
  EXPECT_EQ(ConvertParameterValue(" keep \"quotes\"\n", 0), "\" keep \\\"quotes\\\"\\n\"");
}

TEST(ToolCallParser, SeparatesContentFromCalls) {
  int ids = 0;
  ToolCallParser parser({.tools = Json(), .make_call_id = [&ids] { return "id" + std::to_string(++ids); }});
  ToolCallParserDelta d = parser.Push("Hi\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n");
  EXPECT_EQ(d.content, "Hi");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].id, "id1");
  EXPECT_EQ(d.tool_calls[0].name, "f");
  EXPECT_EQ(d.tool_calls[0].arguments_fragment, "{\"a\":1}");
  d = parser.Push("<tool_call>\n<function=g>\n<parameter=b>\n2\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].index, 1);
  EXPECT_EQ(d.tool_calls[0].id, "id2");
  EXPECT_EQ(d.tool_calls[0].arguments_fragment, "{\"b\":\"2\"}");
  d = parser.Finish();
  EXPECT_EQ(d.content, "");
  EXPECT_TRUE(d.tool_calls.empty());
}

}  // namespace
}  // namespace infernix
