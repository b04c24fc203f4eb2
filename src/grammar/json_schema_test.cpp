// The JSON Schema front end: schemas over documents they must accept and reject (matched one
// character at a time), and errors naming the JSON pointer of the offending keyword.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema_cases.h"
#include "grammar/matcher.h"

namespace infernix::grammar {
namespace {

using Json = nlohmann::ordered_json;
using testing::SchemaCase;
using testing::SchemaCases;

bool Matches(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const size_t n = std::min<size_t>(b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4, text.size() - i);
    if (!m.Accept(text.substr(i, n))) return false;
    i += n;
  }
  return m.IsComplete();
}


TEST(JsonSchemaTest, AcceptsAndRejects) {
  for (const SchemaCase& c : SchemaCases()) {
    SCOPED_TRACE(c.name);
    Grammar g;
    ASSERT_NO_THROW(g = JsonSchemaGrammar(Json::parse(c.schema))) << JsonSchemaToGbnf(Json::parse(c.schema));
    auto compiled = std::make_shared<const CompiledGrammar>(g);
    for (const std::string& text : c.accept) EXPECT_TRUE(Matches(compiled, text)) << "should accept: " << text;
    for (const std::string& text : c.reject) EXPECT_FALSE(Matches(compiled, text)) << "should reject: " << text;
  }
}

// Accepted documents are valid JSON (a sanity check on the test data itself).
TEST(JsonSchemaTest, AcceptedCasesAreJson) {
  for (const SchemaCase& c : SchemaCases()) {
    for (const std::string& text : c.accept) EXPECT_TRUE(Json::accept(text)) << c.name << ": " << text;
  }
}

TEST(JsonSchemaTest, GbnfTextReparses) {
  const Json schema = Json::parse(SchemaCases()[0].schema);
  const std::string text = JsonSchemaToGbnf(schema);
  EXPECT_NE(text.find("root ::="), std::string::npos);
  EXPECT_NO_THROW(ParseGbnf(text));
}

// Integer bounds are exact: every value in a window checked against several ranges.
TEST(JsonSchemaTest, IntegerRangesAreExact) {
  const std::pair<int, int> ranges[] = {{-250, 250}, {-99, -7}, {0, 0}, {1, 9}, {13, 207}, {-1, 100}, {-130, -100}};
  for (const auto& [lo, hi] : ranges) {
    const Json schema = {{"type", "integer"}, {"minimum", lo}, {"maximum", hi}};
    auto g = std::make_shared<const CompiledGrammar>(JsonSchemaGrammar(schema));
    for (int v = -300; v <= 300; ++v) {
      EXPECT_EQ(Matches(g, std::to_string(v)), v >= lo && v <= hi) << lo << ".." << hi << ": " << v;
    }
  }
}

// Whitespace is bounded: a model cannot pad forever.
TEST(JsonSchemaTest, WhitespaceIsBounded) {
  auto g = std::make_shared<const CompiledGrammar>(JsonSchemaGrammar(Json::parse(R"({"type":"array"})")));
  GrammarMatcher m(g);
  ASSERT_TRUE(m.Accept("["));
  int spaces = 0;
  while (spaces < 100 && m.Accept(" ")) ++spaces;
  EXPECT_EQ(spaces, 32);
}

void ExpectError(const char* schema, const std::string& fragment) {
  try {
    JsonSchemaGrammar(Json::parse(schema));
    ADD_FAILURE() << "no error for " << schema;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(JsonSchemaTest, Errors) {
  ExpectError(R"({"type":"object","properties":{"age":{"type":"number","minimum":0}}})", "/properties/age/minimum");
  ExpectError(R"({"type":"string","not":{"const":"x"}})", "/not: unsupported keyword");
  ExpectError(R"({"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}})",
              "/properties/a/$ref: '#/$defs/missing' does not resolve");
  ExpectError(R"({"$ref":"https://example.com/schema.json"})", "/$ref: only local references");
  ExpectError(R"({"type":"strin"})", "/type: unknown type 'strin'");
  ExpectError(R"({"type":3})", "/type: must be");
  ExpectError(R"({"type":"object","properties":{"a":{}},"required":"a"})", "/required: must be an array");
  ExpectError(R"({"type":"object","properties":{"a":{}},"required":["b"]})", "/required: names 'b'");
  ExpectError(R"({"type":"string","minLength":-1})", "/minLength: must be a non-negative integer");
  ExpectError(R"({"type":"string","minLength":5,"maxLength":2})", "/maxLength: is less than minLength");
  ExpectError(R"({"type":"string","format":"ipv4"})", "/format: unsupported format 'ipv4'");
  ExpectError(R"({"type":"string","pattern":"(a)\\1"})", "/pattern: unsupported pattern");
  ExpectError(R"({"type":"integer","minimum":5,"maximum":4})", "no integer satisfies");
  ExpectError(R"({"type":"array","items":{"type":"string","foo":1}})", "/items/foo: unsupported keyword");
  ExpectError(R"({"allOf":[{"type":"string"},{"minLength":1}]})", "/allOf: allOf with more than one");
  ExpectError(R"({"anyOf":[]})", "/anyOf: must be a non-empty array");
  ExpectError(R"({"type":"object","properties":{"a":false}})", "/properties/a: the schema `false`");
  ExpectError(R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})", "$ref cycle");
  ExpectError(R"({"type":"string","enum":[]})", "/enum: must be a non-empty array");
  ExpectError(R"({"type":"object","properties":{"a/b":{"type":"string","foo":1}}})", "/properties/a~1b/foo");
  ExpectError(R"({"$defs":{"d":{"type":"integer","multipleOf":2}},"$ref":"#/$defs/d"})", "/$defs/d/multipleOf");
  ExpectError(R"({"type":"string","maxLength":20000})", "/maxLength: more than 10000");
}


// `levels` schemas nested through `properties` (the root is level 1).
Json NestedObjects(int levels) {
  Json root;
  Json* at = &root;  // built in place: copying ever larger trees would be quadratic
  for (int i = 1; i < levels; ++i) {
    *at = Json{{"type", "object"}, {"properties", {{"a", nullptr}}}, {"required", {"a"}}};
    at = &(*at)["properties"]["a"];
  }
  *at = Json{{"type", "string"}};
  return root;
}

TEST(JsonSchemaTest, DepthLimit) {
  // At the limit: compiles (quickly: see docs/grammar.md); one level more: a clear error, before any work.
  Grammar g = JsonSchemaGrammar(NestedObjects(kMaxSchemaDepth));
  auto compiled = std::make_shared<const CompiledGrammar>(g);
  std::string doc = "\"x\"";
  for (int i = 1; i < kMaxSchemaDepth; ++i) doc = "{\"a\":" + doc + "}";
  EXPECT_TRUE(Matches(compiled, doc));
  for (const Json& deep : {NestedObjects(kMaxSchemaDepth + 1), NestedObjects(3000)}) {
    try {
      JsonSchemaGrammar(deep);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("nested deeper than 64 levels"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("/properties/a/properties/a"), std::string::npos) << e.what();
    }
  }
  // items, anyOf and $defs nest too; so does a chain of $ref through flat $defs.
  Json items = {{"type", "string"}};
  for (int i = 0; i < kMaxSchemaDepth; ++i) items = Json{{"anyOf", Json::array({Json{{"type", "array"}, {"items", items}}})}};
  EXPECT_THROW(JsonSchemaToGbnf(items), Error);
  Json chain = {{"$defs", Json::object()}, {"$ref", "#/$defs/d0"}};
  for (int i = 0; i < 100; ++i)
    chain["$defs"]["d" + std::to_string(i)] = Json{{"type", "array"}, {"items", {{"$ref", "#/$defs/d" + std::to_string(i + 1)}}}};
  chain["$defs"]["d100"] = Json{{"type", "string"}};
  ExpectError(chain.dump().c_str(), "nested deeper than 64 levels (schemas inside schemas, $ref chains included)");
  // Recursion through $ref is not depth: each target is defined once.
  EXPECT_NO_THROW(JsonSchemaGrammar(Json::parse(
      R"({"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}}}})")));
}

TEST(JsonSchemaTest, SizeLimit) {
  Json flat = {{"type", "object"}, {"properties", Json::object()}};
  for (int64_t i = 1; i < kMaxSchemaNodes; ++i) flat["properties"]["p" + std::to_string(i)] = Json{{"type", "integer"}};
  EXPECT_EQ(CheckSchemaLimits(flat), kMaxSchemaNodes);
  flat["properties"]["one_more"] = Json{{"type", "integer"}};
  ExpectError(flat.dump().c_str(), "more than 8192 subschemas and enum values");
  Json values = Json::array();
  for (int i = 0; i < 9000; ++i) values.push_back(i);
  ExpectError(Json{{"enum", values}}.dump().c_str(), "more than 8192 subschemas and enum values");
}

}  // namespace
}  // namespace infernix::grammar
