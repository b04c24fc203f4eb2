// The regex and choices front ends: lowering and errors (matching is covered by the shared cases
// of test_cases.h in matcher_test.cpp and token_matcher_test.cpp).
#include "grammar/regex.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "grammar/matcher.h"

namespace infernix::grammar {
namespace {

std::string RegexError(std::string_view pattern) {
  try {
    ParseRegex(pattern);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "(no error)";
}

bool Matches(const Grammar& g, std::string_view text) {
  GrammarMatcher m(std::make_shared<const CompiledGrammar>(g));
  return m.Accept(text) && m.IsComplete();
}

TEST(RegexTest, Lowering) {
  const Grammar g = ParseRegex("a[0-9]+");
  EXPECT_EQ(g.rules[g.root].name, "root");
  EXPECT_THAT(g.ToString(), ::testing::HasSubstr("root ::= \"a\" [0-9] repeat-"));
}

TEST(RegexTest, ClassEscapesAreAscii) {
  EXPECT_TRUE(Matches(ParseRegex(R"(\w+)"), "abc_XYZ_019"));
  EXPECT_FALSE(Matches(ParseRegex(R"(\w)"), "é"));
  EXPECT_TRUE(Matches(ParseRegex(R"(\W)"), "é"));
  EXPECT_TRUE(Matches(ParseRegex(R"(\s\S\d\D)"), "\vx7y"));
  EXPECT_FALSE(Matches(ParseRegex(R"(.)"), "\n"));
  EXPECT_TRUE(Matches(ParseRegex(R"([\b])"), "\b"));
  EXPECT_TRUE(Matches(ParseRegex(R"([]a])"), "]"));  // a leading ']' is literal
  EXPECT_TRUE(Matches(ParseRegex(R"(a{2}b{0,1}c{1,})"), "aacc"));
  EXPECT_TRUE(Matches(ParseRegex(R"(\(\)\[\]\{\}\*\+\?\.\|\^\$\/)"), "()[]{}*+?.|^$/"));
}

TEST(RegexTest, ErrorsGiveColumn) {
  using ::testing::HasSubstr;
  EXPECT_THAT(RegexError("(ab"), HasSubstr("column 1: unclosed '('"));
  EXPECT_THAT(RegexError("ab)"), HasSubstr("column 3: unexpected ')'"));
  EXPECT_THAT(RegexError("ab\xc3"), HasSubstr("column 3: invalid UTF-8"));
  EXPECT_THAT(RegexError("a\xed\xa0\x80"), HasSubstr("column 2: invalid UTF-8"));  // a surrogate
  EXPECT_THAT(RegexError("a[bc"), HasSubstr("column 2: unterminated character class"));
  EXPECT_THAT(RegexError("*a"), HasSubstr("column 1: nothing to repeat"));
  EXPECT_THAT(RegexError("a**"), HasSubstr("column 3: nested quantifier"));
  EXPECT_THAT(RegexError("a{3,1}"), HasSubstr("column 2: repetition {m,n} with n < m"));
  EXPECT_THAT(RegexError("a{2"), HasSubstr("column 2: unterminated repetition"));
  EXPECT_THAT(RegexError("(?=a)"), HasSubstr("column 1: lookaround"));
  EXPECT_THAT(RegexError("a\\1"), HasSubstr("column 2: unsupported escape '\\1'"));
  EXPECT_THAT(RegexError("a^b"), HasSubstr("column 2: anchor '^'"));
  EXPECT_THAT(RegexError("[z-a]"), HasSubstr("column 2: character range is reversed"));
  EXPECT_THAT(RegexError("[a-\\d]"), HasSubstr("column 2: a class escape cannot end a range"));
  EXPECT_THAT(RegexError("\\u12"), HasSubstr("column 1: bad escape"));
  EXPECT_THAT(RegexError("\\u{110000}"), HasSubstr("column 1: bad escape: not a Unicode scalar value"));
  EXPECT_THAT(RegexError("ab\\"), HasSubstr("column 3: pattern ends in '\\'"));
}

TEST(ChoicesTest, BuildsAndRefuses) {
  const Grammar g = ChoicesGrammar({"a", "ab", "日"});
  EXPECT_TRUE(Matches(g, "ab"));
  EXPECT_TRUE(Matches(g, "日"));
  EXPECT_FALSE(Matches(g, "b"));
  EXPECT_THROW(ChoicesGrammar({}), Error);
  EXPECT_THROW(ChoicesGrammar({"ok", std::string("\xC3")}), Error);
}

}  // namespace
}  // namespace infernix::grammar
