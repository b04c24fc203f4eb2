#include "grammar/compose.h"

#include <gtest/gtest.h>

#include <memory>

#include <nlohmann/json.hpp>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace infernix::grammar {
namespace {

bool Matches(const Grammar& g, std::string_view text) {
  GrammarMatcher m(std::make_shared<const CompiledGrammar>(g));
  return m.Accept(text) && m.IsComplete();
}

TEST(Compose, SurroundAndUnion) {
  Grammar digits = ParseGbnf(R"(root ::= [0-9]+)");
  Grammar words = ParseGbnf(R"(root ::= ("ab" | "cd") x  
x ::= "!"?)");
  Grammar s = Surround(digits, "<n>", "</n>");
  EXPECT_TRUE(Matches(s, "<n>42</n>"));
  EXPECT_FALSE(Matches(s, "42"));
  EXPECT_FALSE(Matches(s, "<n></n>"));
  Grammar u = Union({s, words});
  for (const char* ok : {"<n>7</n>", "ab", "cd!"}) EXPECT_TRUE(Matches(u, ok)) << ok;
  for (const char* bad : {"<n>a</n>", "abcd", "", "7"}) EXPECT_FALSE(Matches(u, bad)) << bad;
}

TEST(Compose, ToolCallShapeAroundASchema) {
  auto schema = nlohmann::ordered_json::parse(
      R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"],
          "additionalProperties": false})");
  Grammar call = Surround(JsonSchemaGrammar(schema), "{\"name\": \"get_weather\", \"arguments\": ", "}\n</tool_call>");
  EXPECT_TRUE(Matches(call, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
  EXPECT_FALSE(Matches(call, "{\"name\": \"get_weather\", \"arguments\": {\"town\": \"Paris\"}}\n</tool_call>"));
  EXPECT_FALSE(Matches(call, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"));
}

TEST(Compose, LiteralConcatOptionalZeroOrMore) {
  Grammar g = Concat({Literal("a"), Optional(Literal("b")), ZeroOrMore(Literal("cd")), Literal("é")});
  for (const char* ok : {"aé", "abé", "acdé", "abcdcdé"}) EXPECT_TRUE(Matches(g, ok)) << ok;
  for (const char* bad : {"a", "bé", "abbé", "acé", "aé!"}) EXPECT_FALSE(Matches(g, bad)) << bad;
  EXPECT_TRUE(Matches(Concat({}), ""));
}

TEST(Compose, TextExcludingRefusesExactlyTheStop) {
  Grammar g = TextExcluding("</p>");
  for (const char* ok : {"", "x", "<", "</", "</p", "<</p", "</p</", "a</q>b", "é\n</ p>", "<//p>"})
    EXPECT_TRUE(Matches(g, ok)) << ok;
  for (const char* bad : {"</p>", "x</p>", "</p>x", "<</p>", "</</p>"}) EXPECT_FALSE(Matches(g, bad)) << bad;
  // A stop with a border: "aab" after "aa" must still be seen.
  Grammar b = TextExcluding("aab");
  for (const char* ok : {"aa", "aaa", "aba", "abab"}) EXPECT_TRUE(Matches(b, ok)) << ok;
  for (const char* bad : {"aab", "aaab", "xaaab", "abaab"}) EXPECT_FALSE(Matches(b, bad)) << bad;
  // Several stops, one a suffix of a prefix of the other.
  Grammar two = TextExcluding(std::vector<std::string_view>{"</p>", "/f>"});
  for (const char* ok : {"", "</", "</f", "/f", "a</q>", "<//p"}) EXPECT_TRUE(Matches(two, ok)) << ok;
  for (const char* bad : {"</p>", "/f>", "</f>", "x/f>y", "<</p>"}) EXPECT_FALSE(Matches(two, bad)) << bad;
  // Followed by the stop: the stop can only be the end.
  Grammar closed = Concat({TextExcluding("</p>"), Literal("</p>")});
  EXPECT_TRUE(Matches(closed, "a<b</p>"));
  EXPECT_FALSE(Matches(closed, "a</p>b</p>"));
}

}  // namespace
}  // namespace infernix::grammar
