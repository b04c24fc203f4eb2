#include "grammar/tool_call_grammar.h"

#include <gtest/gtest.h>

#include <memory>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "chat/output/output_parser.h"
#include "grammar/matcher.h"
#include "grammar/test_vocab.h"
#include "grammar/token_matcher.h"

namespace infernix::grammar {
namespace {

using Json = nlohmann::ordered_json;

bool Matches(const Grammar& g, std::string_view text) {
  GrammarMatcher m(std::make_shared<const CompiledGrammar>(g));
  return m.Accept(text) && m.IsComplete();
}

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "write_file", "strict": true, "parameters": {"type": "object",
    "properties": {"path": {"type": "string"}, "mode": {"enum": ["w", "a"]}, "lines": {"type": "integer", "minimum": 1},
                   "opts": {"type": "object", "properties": {"sync": {"type": "boolean"}}, "required": ["sync"],
                            "additionalProperties": false},
                   "tag": {"type": ["string", "null"], "maxLength": 5}},
    "required": ["path", "lines"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}])");

std::string Call(const std::string& body) { return "<function=" + body; }

TEST(XmlToolCallGrammar, AcceptsCallsInTheTemplatesForm) {
  Grammar g = ToolCallGrammar(kTools, ToolCallSyntax::kXml);
  const char* ok[] = {
      "write_file>\n<parameter=path>\nsrc/a.cpp\n</parameter>\n<parameter=lines>\n3\n</parameter>\n</function>\n</tool_call>",
      "write_file>\n<parameter=path>\nint main() {\n  return 1 < 2;\n}\n</parameter>\n<parameter=mode>\na\n</parameter>\n"
      "<parameter=lines>\n12\n</parameter>\n<parameter=opts>\n{\"sync\": true}\n</parameter>\n"
      "<parameter=tag>\nnull\n</parameter>\n</function>\n</tool_call>",
      "write_file>\n<parameter=path>\n\n</parameter>\n<parameter=lines>\n1\n</parameter>\n</function>\n</tool_call>",
      "ping>\n</function>\n</tool_call>",
      "ping>\n<parameter=anything>\nfree </param> text\n</parameter>\n</function>\n</tool_call>",
  };
  for (const char* s : ok) EXPECT_TRUE(Matches(g, Call(s))) << s;
  const char* bad[] = {
      // required parameter missing; order changed; wrong types; unknown parameter; </parameter> inside a value
      "write_file>\n<parameter=path>\na\n</parameter>\n</function>\n</tool_call>",
      "write_file>\n<parameter=lines>\n3\n</parameter>\n<parameter=path>\na\n</parameter>\n</function>\n</tool_call>",
      "write_file>\n<parameter=path>\na\n</parameter>\n<parameter=lines>\nthree\n</parameter>\n</function>\n</tool_call>",
      "write_file>\n<parameter=path>\na\n</parameter>\n<parameter=lines>\n0\n</parameter>\n</function>\n</tool_call>",
      "write_file>\n<parameter=path>\na\n</parameter>\n<parameter=mode>\nx\n</parameter>\n<parameter=lines>\n1\n"
      "</parameter>\n</function>\n</tool_call>",
      "write_file>\n<parameter=path>\na\n</parameter>\n<parameter=lines>\n1\n</parameter>\n<parameter=tag>\ntoolong\n"
      "</parameter>\n</function>\n</tool_call>",
      "write_file>\n<parameter=path>\na\n</parameter>\n<parameter=lines>\n1\n</parameter>\n<parameter=x>\n1\n"
      "</parameter>\n</function>\n</tool_call>",
      "write_file>\n<parameter=path>\na</parameter>b\n</parameter>\n<parameter=lines>\n1\n</parameter>\n</function>\n</tool_call>",
      "write_file>\n<parameter=path>\na\n</parameter>\n<parameter=lines>\n1\n</parameter>\n</function>\n",
      "write_file>\n<parameter=path>\na</function>\n</tool_call>\n</parameter>\n<parameter=lines>\n1\n</parameter>\n"
      "</function>\n</tool_call>",
      "other>\n</function>\n</tool_call>",
  };
  for (const char* s : bad) EXPECT_FALSE(Matches(g, Call(s))) << s;
}

TEST(XmlToolCallGrammar, AcceptedCallsParseBackToValidArguments) {
  Grammar g = ToolCallGrammar(kTools, ToolCallSyntax::kXml);
  const std::string text =
      "<tool_call>\n<function=write_file>\n<parameter=path>\n a<b>\n</parameter>\n<parameter=lines>\n7\n</parameter>\n"
      "<parameter=opts>\n{\"sync\":false}\n</parameter>\n<parameter=tag>\nnull\n</parameter>\n</function>\n</tool_call>";
  ASSERT_TRUE(Matches(g, text.substr(std::string("<tool_call>\n").size())));
  OutputParserOptions options;
  options.tools = kTools;
  ParsedOutput out = ParseOutput(text, options);
  ASSERT_EQ(out.tool_calls.size(), 1u);
  Json args = Json::parse(out.tool_calls[0].arguments);
  EXPECT_EQ(args["path"], " a<b>");
  EXPECT_EQ(args["lines"], 7);
  EXPECT_EQ(args["opts"]["sync"], false);
  EXPECT_TRUE(args["tag"].is_null());
}

TEST(XmlToolCallGrammar, StrictToolsThatCannotBeEnforcedAreErrorsWithThePointer) {
  Json strict = Json::parse(R"([{"type": "function", "function": {"name": "f", "strict": true, "parameters": {
    "type": "object", "properties": {"when": {"type": "string", "format": "date"}}}}}])");
  try {
    ToolCallGrammar(strict, ToolCallSyntax::kXml);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tools[0] (f): JSON schema /properties/when/format"), std::string::npos) << e.what();
  }
  Json nested = Json::parse(R"([{"type": "function", "function": {"name": "f", "strict": true, "parameters": {
    "type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}}}}])");
  try {
    ToolCallGrammar(nested, ToolCallSyntax::kXml);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/properties/n/multipleOf"), std::string::npos) << e.what();
  }
  // Not strict: any parameters.
  strict[0]["function"].erase("strict");
  Grammar g = ToolCallGrammar(strict, ToolCallSyntax::kXml);
  EXPECT_TRUE(Matches(g, "<function=f>\n<parameter=when>\nsoon\n</parameter>\n</function>\n</tool_call>"));
}

TEST(XmlToolCallGrammar, ParameterValues) {
  Json root = Json::parse(R"({"$defs": {"pt": {"type": "object", "properties": {"x": {"type": "number"}},
                                                "required": ["x"], "additionalProperties": false}}})");
  Grammar ref = XmlParameterValueGrammar(
      Json::parse(R"({"type": "object", "properties": {"p": {"$ref": "#/$defs/pt"}}, "required": ["p"]})"), root);
  EXPECT_TRUE(Matches(ref, "{\"p\": {\"x\": 1.5}}"));
  EXPECT_FALSE(Matches(ref, "{\"p\": {\"y\": 1}}"));
  Grammar pattern = XmlParameterValueGrammar(Json::parse(R"({"type": "string", "pattern": "^[a-z]+-[0-9]{2}$"})"), root);
  EXPECT_TRUE(Matches(pattern, "ab-12"));
  EXPECT_FALSE(Matches(pattern, "ab-1"));
  Grammar optional = XmlParameterValueGrammar(Json::parse(R"({"anyOf": [{"type": "string"}, {"type": "null"}]})"), root);
  EXPECT_TRUE(Matches(optional, "any text\nat all"));
  Grammar boolean = XmlParameterValueGrammar(Json::parse(R"({"type": "boolean"})"), root);
  EXPECT_TRUE(Matches(boolean, "false"));
  EXPECT_FALSE(Matches(boolean, "False"));
  Grammar bare_ref = XmlParameterValueGrammar(Json::parse(R"({"$ref": "#/$defs/pt"})"), root);
  EXPECT_TRUE(Matches(bare_ref, "{\"x\": -2}"));
  EXPECT_FALSE(Matches(bare_ref, "{}"));
  EXPECT_THROW(XmlParameterValueGrammar(Json::parse(R"({"$ref": "#/$defs/none"})"), root), Error);
  EXPECT_THROW(XmlParameterValueGrammar(Json::parse(R"({"$ref": "other.json#/x"})"), root), Error);
  EXPECT_THROW(XmlParameterValueGrammar(Json::parse(R"({"enum": [1, 2]})"), root), Error);
}

// Token-wise over the real Qwen3 vocabulary: the tokenizer's own tokens of accepted calls are each
// allowed by the mask (</tool_call> included, one token), and the end allows EOS.
TEST(ToolCallGrammar, TokenWiseOverTheRealVocabulary) {
  using testing::kImEnd;
  const std::pair<ToolCallSyntax, std::string> calls[] = {
      {ToolCallSyntax::kXml,
       "<function=write_file>\n<parameter=path>\nsrc/main.cpp\n</parameter>\n<parameter=lines>\n42\n</parameter>\n"
       "<parameter=opts>\n{\"sync\": true}\n</parameter>\n</function>\n</tool_call>"},
      {ToolCallSyntax::kJson, "{\"name\": \"write_file\", \"arguments\": {\"path\": \"a b\", \"lines\": 7}}\n</tool_call>"},
  };
  for (const auto& [syntax, text] : calls) {
    SCOPED_TRACE(text);
    TokenMatcher m(std::make_shared<const CompiledGrammar>(ToolCallGrammar(kTools, syntax)), testing::Vocab(), {kImEnd});
    std::vector<uint32_t> mask(m.mask_words());
    const std::vector<int32_t> ids = testing::Qwen().Encode(text);
    EXPECT_NE(std::find(ids.begin(), ids.end(), 151658), ids.end());  // </tool_call> as its own token
    for (int32_t id : ids) {
      m.FillNextTokenBitmask(mask);
      ASSERT_TRUE((mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1) << "token " << id;
      ASSERT_TRUE(m.AcceptToken(id));
    }
    m.FillNextTokenBitmask(mask);
    EXPECT_TRUE((mask[kImEnd >> 5] >> (kImEnd & 31)) & 1);
    EXPECT_TRUE(m.IsComplete());
  }
}

TEST(JsonToolCallGrammar, NameAndArguments) {
  Grammar g = ToolCallGrammar(kTools, ToolCallSyntax::kJson);
  EXPECT_TRUE(Matches(g, "{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_TRUE(Matches(g, "{\"name\": \"write_file\", \"arguments\": {\"path\": \"a\", \"lines\": 2}}\n</tool_call>"));
  EXPECT_FALSE(Matches(g, "{\"name\": \"write_file\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>"));
  EXPECT_FALSE(Matches(g, "{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"));
}


TEST(ToolCallGrammarLimits, TooDeepParametersAreErrorsForStrictToolsOnly) {
  Json params = {{"type", "string"}};
  for (int i = 0; i < 100; ++i) params = Json{{"type", "object"}, {"properties", {{"a", params}}}};
  for (ToolCallSyntax syntax : {ToolCallSyntax::kJson, ToolCallSyntax::kXml}) {
    Json tools = Json::array({Json{{"type", "function"},
                                   {"function", {{"name", "f"}, {"strict", true}, {"parameters", params}}}}});
    try {
      ToolCallGrammar(tools, syntax);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("tools[0] (f): JSON schema /properties/a/"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("nested deeper than 64 levels"), std::string::npos) << e.what();
    }
    tools[0]["function"].erase("strict");  // not strict: any arguments, and no slow compile
    EXPECT_NO_THROW(ToolCallGrammar(tools, syntax));
  }
}

// The limits are summed over all tools and checked before any tool is compiled: a request whose strict
// tools are over them in all is refused at once, not after compiling the tools before the one that
// crosses them (tool 0's own error, found only by compiling it, is not the one reported).
TEST(ToolCallGrammarLimits, ToolsOverTheLimitsInAllAreRefusedBeforeAnyCompile) {
  Json values = Json::array();
  for (int i = 0; i < 5000; ++i) values.push_back(i);
  auto tool = [](const std::string& name, Json params) {
    return Json{{"type", "function"}, {"function", {{"name", name}, {"strict", true}, {"parameters", params}}}};
  };
  Json big = {{"type", "object"}, {"properties", {{"v", {{"enum", values}}}}}};
  Json tools = Json::array({tool("a", Json::parse(R"({"type": "object", "properties": {
                                        "n": {"type": "integer", "multipleOf": 2}}})")),
                            tool("b", big), tool("c", big)});
  for (ToolCallSyntax syntax : {ToolCallSyntax::kJson, ToolCallSyntax::kXml}) {
    try {
      ToolCallGrammar(tools, syntax);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("tools[2] (c): JSON schema: the tools' parameters have more than 8192"),
                std::string::npos)
          << e.what();
    }
  }
  // Without tool c, tool a's compile error is the one.
  tools.erase(2);
  try {
    ToolCallGrammar(tools, ToolCallSyntax::kJson);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tools[0] (a):"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("multipleOf"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace infernix::grammar
