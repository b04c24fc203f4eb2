// The JSON Schema front end: schemas over documents they must accept and reject (matched one
// character at a time), and errors naming the JSON pointer of the offending keyword.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"

namespace infernix::grammar {
namespace {

using Json = nlohmann::ordered_json;

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

struct SchemaCase {
  const char* name;
  const char* schema;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

const std::vector<SchemaCase>& Cases() {
  static const std::vector<SchemaCase> cases = {
      {"tool_arguments",
       R"({"type": "object", "description": "get weather",
           "properties": {"location": {"type": "string", "description": "city"},
                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                          "days": {"type": "integer"}},
           "required": ["location"], "additionalProperties": false})",
       {R"({"location":"Paris"})", R"({"location": "Paris", "unit": "celsius"})", R"({"location":"Paris","days":3})",
        R"({"location":"P","unit":"fahrenheit","days":-2})", "{\n  \"location\": \"Oslo\",\n  \"days\": 10\n}",
        R"({"location":"a\"b\\c\u00e9"})"},
       {R"({})", R"({"unit":"celsius"})", R"({"unit":"celsius","location":"Paris"})",
        R"({"location":"Paris","unit":"kelvin"})", R"({"location":"Paris","other":1})", R"({"location":"Paris",})",
        R"({"location":"Paris""days":3})", R"({"location":"Paris","days":1.5})", R"( {"location":"Paris"})",
        "{" + std::string(40, ' ') + "\"location\":\"x\"}"}},
      {"all_optional",
       R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"}},"additionalProperties":false})",
       {"{}", "{ }", R"({"a":true})", R"({"b":null})", R"({"a":false,"b":null})"},
       {R"({"b":null,"a":true})", R"({,"b":null})", R"({"a":true,})", R"({"a":1})"}},
      {"additional_properties_default",
       R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]})",
       {R"({"id":1})", R"({"id":1,"x":[1,{"y":null}],"z":"s"})"},
       {R"({"x":1,"id":1})", R"({"id":1,"x":})"}},
      {"additional_properties_schema",
       R"({"type":"object","additionalProperties":{"type":"number"}})",
       {"{}", R"({"a":1,"b":-2.5e3})"},
       {R"({"a":"x"})"}},
      {"nested",
       R"({"type":"object","properties":{"user":{"type":"object","properties":{"name":{"type":"string"},
           "tags":{"type":"array","items":{"type":"string"}}},"required":["name","tags"],
           "additionalProperties":false}},"required":["user"],"additionalProperties":false})",
       {R"({"user":{"name":"a","tags":[]}})", R"({"user":{"name":"a","tags":["x", "y"]}})"},
       {R"({"user":{"name":"a"}})", R"({"user":{"name":"a","tags":[1]}})", R"({"user":{"name":"a","tags":["x",]}})"}},
      {"type_list", R"({"type":["string","null"]})", {R"("x")", "null"}, {"1", "true"}},
      {"anyof",
       R"({"anyOf":[{"type":"integer"},{"type":"object","properties":{"k":{"const":"v"}},"required":["k"],
           "additionalProperties":false}]})",
       {"12", R"({"k":"v"})"},
       {"1.5", R"({"k":"w"})", R"("v")"}},
      {"oneof_enum",
       R"({"oneOf":[{"enum":[1,"two",null,[3]]},{"const":{"a":true}}]})",
       {"1", R"("two")", "null", "[3]", R"({"a":true})"},
       {"2", R"("three")", R"({"a":false})"}},
      {"ref_tree",
       R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},
           "children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["value","children"],
           "additionalProperties":false}},"$ref":"#/$defs/node"})",
       {R"({"value":1,"children":[]})",
        R"({"value":1,"children":[{"value":2,"children":[{"value":3,"children":[]}]}]})"},
       {R"({"value":1})", R"({"value":1,"children":[{"value":2}]})"}},
      {"ref_definitions_and_root",
       R"({"definitions":{"id":{"type":"string","minLength":1}},"type":"object",
           "properties":{"id":{"$ref":"#/definitions/id"},"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},
           "required":["id","next"],"additionalProperties":false})",
       {R"({"id":"a","next":null})", R"({"id":"a","next":{"id":"b","next":null}})"},
       {R"({"id":"","next":null})", R"({"id":"a","next":{"id":"b"}})"}},
      {"integer_range",
       R"({"type":"integer","minimum":-15,"maximum":120})",
       {"-15", "-9", "-1", "0", "7", "10", "99", "100", "119", "120"},
       {"-16", "-20", "121", "200", "1000", "-0", "007", "1.0", "-"}},
      {"integer_exclusive",
       R"({"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10})",
       {"1", "9"},
       {"0", "10", "-1"}},
      {"integer_min_only",
       R"({"type":"integer","minimum":1000})",
       {"1000", "1001", "9999", "10000", "123456789012"},
       {"999", "0", "-1000", "0999"}},
      {"integer_max_only", R"({"type":"integer","maximum":-5})", {"-5", "-6", "-100000"}, {"-4", "0", "5"}},
      {"string_length",
       R"({"type":"string","minLength":2,"maxLength":4})",
       {R"("ab")", R"("abcd")", R"("a\nb")", R"("éé")"},
       {R"("a")", R"("abcde")", R"("ab)"}},
      {"format_date",
       R"({"type":"string","format":"date"})",
       {R"("2024-02-29")", R"("1999-12-31")"},
       {R"("2024-13-01")", R"("2024-1-01")", R"("2024-01-32")"}},
      {"format_time",
       R"({"type":"string","format":"time"})",
       {R"("23:59:59Z")", R"("08:00:00.123+02:00")"},
       {R"("24:00:00Z")", R"("08:00:00")"}},
      {"format_date_time",
       R"({"type":"string","format":"date-time"})",
       {R"("2024-05-01T12:30:00Z")", R"("2024-05-01t12:30:00-05:30")"},
       {R"("2024-05-01 12:30:00Z")"}},
      {"format_uuid",
       R"({"type":"string","format":"uuid"})",
       {R"("123e4567-e89b-12d3-a456-426614174000")"},
       {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400g")"}},
      {"format_email",
       R"({"type":"string","format":"email"})",
       {R"("a.b+c@example.com")", R"("x@sub.example.org")"},
       {R"("a@b")", R"("@example.com")", R"("a b@example.com")"}},
      {"pattern_anchored",
       R"({"type":"string","pattern":"^[A-Z]{2}-[0-9]+$"})",
       {R"("AB-1")", R"("XY-12345")"},
       {R"("ab-1")", R"("AB-")", R"("xAB-1")", R"("AB-1x")"}},
      {"pattern_unanchored",
       R"({"type":"string","pattern":"ab+"})",
       {R"("ab")", R"("xxabbby")"},
       {R"("a")", R"("ba")"}},
      {"pattern_no_quote",
       R"({"type":"string","pattern":"^.*$"})",
       {R"("anything")", R"("")"},
       {"\"a\"b\"", R"("a\"b")"}},
      {"array_counts",
       R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
       {"[1]", "[1, 2, 3]", "[ 1 ,2 ]"},
       {"[]", "[1,2,3,4]", "[1,]", "[\"a\"]"}},
      {"array_any", R"({"type":"array"})", {"[]", R"([1,"a",{"b":[null]}])"}, {"[,]", "{}"}},
      {"prefix_items",
       R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})",
       {"[]", R"(["a"])", R"(["a",1])"},
       {R"(["a",1,2])", R"([1])", R"(["a","b"])"}},
      {"prefix_items_then_items",
       R"({"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"boolean"},"minItems":2,"maxItems":3})",
       {R"(["a",true])", R"(["a",true,false])"},
       {R"(["a"])", R"(["a",true,false,true])", R"([true,true])"}},
      {"odd_keys",
       R"({"type":"object","properties":{"a\"b":{"type":"integer"},"é/x":{"const":"\n"}},
           "required":["a\"b","é/x"],"additionalProperties":false})",
       {R"({"a\"b":1,"é/x":"\n"})"},
       {R"({"ab":1,"é/x":"\n"})", "{\"a\\\"b\":1,\"é/x\":\"\n\"}"}},
      {"nullable_object",
       R"({"type":["object","null"],"properties":{"x":{"type":"integer"}},"required":["x"],
           "additionalProperties":false})",
       {"null", R"({"x":0})"},
       {"{}", R"({"x":null})"}},
      {"big_integer_range",
       R"({"type":"integer","minimum":0,"maximum":1000000})",
       {"0", "999999", "1000000", "123456"},
       {"1000001", "9999999", "-1"}},
      {"empty_schema", "{}", {"1", R"({"a":[true]})", R"("s")", "null"}, {"", "nul", "{"}},
      {"inferred_object",
       R"({"properties":{"a":{"type":"number"}},"required":["a"]})",
       {R"({"a":1.25})", R"({"a":-0.5E+10})"},
       {R"({"a":01})", R"({"a":.5})"}},
  };
  return cases;
}

TEST(JsonSchemaTest, AcceptsAndRejects) {
  for (const SchemaCase& c : Cases()) {
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
  for (const SchemaCase& c : Cases()) {
    for (const std::string& text : c.accept) EXPECT_TRUE(Json::accept(text)) << c.name << ": " << text;
  }
}

TEST(JsonSchemaTest, GbnfTextReparses) {
  const Json schema = Json::parse(Cases()[0].schema);
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

}  // namespace
}  // namespace infernix::grammar
