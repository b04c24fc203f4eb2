// The GBNF parser: what it accepts, its lowering, and its errors with line:column.
#include "grammar/gbnf.h"

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"

namespace infernix::grammar {
namespace {

std::string ErrorOf(std::string_view text) {
  try {
    ParseGbnf(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "(no error)";
}

TEST(GbnfTest, ParsesRulesAndLowersRepetition) {
  const Grammar g = ParseGbnf(R"(
root ::= greeting (" " name)+   # a comment
greeting ::= "hi" | "hello"
name ::= [A-Z] [a-z]*
)");
  EXPECT_EQ(g.rules[g.root].name, "root");
  const std::string text = g.ToString();
  EXPECT_THAT(text, ::testing::HasSubstr("greeting ::= \"h\" \"i\" | \"h\" \"e\" \"l\" \"l\" \"o\""));
  EXPECT_THAT(text, ::testing::HasSubstr("name ::= [A-Z] name-"));
  // The printed grammar parses back to the same rules (in another order: rules are numbered by
  // first mention).
  auto lines = [](const std::string& t) {
    std::vector<std::string> out;
    for (size_t start = 0, end; start < t.size(); start = end + 1) {
      end = t.find('\n', start);
      out.push_back(t.substr(start, end - start));
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(lines(ParseGbnf(text).ToString()), lines(text));
}

TEST(GbnfTest, CharClasses) {
  const Grammar g = ParseGbnf(R"(root ::= [^a-c\n] [\x30-\x39x] [\-\]] .)");
  ASSERT_EQ(g.rules[g.root].alternatives.size(), 1u);
  const Sequence& seq = g.rules[g.root].alternatives[0];
  ASSERT_EQ(seq.size(), 4u);
  const CharClass& negated = g.classes[seq[0].index];
  EXPECT_FALSE(ClassContains(negated, 'a'));
  EXPECT_FALSE(ClassContains(negated, 'c'));
  EXPECT_FALSE(ClassContains(negated, '\n'));
  EXPECT_TRUE(ClassContains(negated, 'd'));
  EXPECT_TRUE(ClassContains(negated, 0x10FFFF));
  EXPECT_EQ(g.classes[seq[1].index], (CharClass{{'0', '9'}, {'x', 'x'}}));
  EXPECT_EQ(g.classes[seq[2].index], (CharClass{{'-', '-'}, {']', ']'}}));
  EXPECT_EQ(g.classes[seq[3].index], (CharClass{{0, kMaxCodePoint}}));
}

TEST(GbnfTest, CustomRootAndRulesOnOneLine) {
  const Grammar g = ParseGbnf("a ::= \"x\" b b ::= \"y\"", "a");
  EXPECT_EQ(g.rules[g.root].name, "a");
  EXPECT_EQ(g.rules.size(), 2u);
}

TEST(GbnfTest, JsonGrammarParses) {
  const Grammar g = ParseGbnf(JsonGbnf());
  EXPECT_GT(g.rules.size(), 8u);
}

TEST(GbnfTest, ErrorsGiveLineAndColumn) {
  using ::testing::HasSubstr;
  EXPECT_THAT(ErrorOf("root ::= foo"), HasSubstr("line 1, column 10: undefined rule 'foo'"));
  EXPECT_THAT(ErrorOf("root ::= \"abc"), HasSubstr("line 1, column 10: unterminated string literal"));
  EXPECT_THAT(ErrorOf("root ::= \"a\"\nx ::= [abc"), HasSubstr("line 2, column 7: unterminated character class"));
  EXPECT_THAT(ErrorOf("root ::= \"a\\q\""), HasSubstr("line 1, column 12: unknown escape '\\q'"));
  EXPECT_THAT(ErrorOf("root ::= \"\\x4\""), HasSubstr("line 1, column 11: bad escape: expected 2 hex digits"));
  // Ill-formed UTF-8 is reported at the character's first byte: a stray continuation byte, a truncated
  // sequence, an overlong form.
  EXPECT_THAT(ErrorOf("root ::= \"a\x80\""), HasSubstr("line 1, column 12: invalid UTF-8"));
  EXPECT_THAT(ErrorOf("root ::= \"a\xc3\""), HasSubstr("line 1, column 12: invalid UTF-8"));
  EXPECT_THAT(ErrorOf("root ::= \"\xc0\xaf\""), HasSubstr("line 1, column 11: invalid UTF-8"));
  EXPECT_THAT(ErrorOf("start ::= \"a\""), HasSubstr("no 'root' rule"));
  EXPECT_THAT(ErrorOf("root ::= \"a\"\nroot ::= \"b\""), HasSubstr("line 2, column 1: rule 'root' is defined twice"));
  EXPECT_THAT(ErrorOf("root ::= (\"a\" | \"b\""), HasSubstr("line 1, column 10: unclosed '('"));
  EXPECT_THAT(ErrorOf("root ::= \"a\" )"), HasSubstr("line 1, column 14: unexpected ')'"));
  EXPECT_THAT(ErrorOf("root ::= [z-a]"), HasSubstr("line 1, column 13: character range is reversed"));
  EXPECT_THAT(ErrorOf("root ::= \"a\"{3,1}"), HasSubstr("line 1, column 13: repetition {m,n} with n < m"));
  EXPECT_THAT(ErrorOf("root ::= \"a\"{2"), HasSubstr("line 1, column 13: unterminated repetition"));
  EXPECT_THAT(ErrorOf("root ::= \"a\" @"), HasSubstr("line 1, column 14: unexpected character '@'"));
  EXPECT_THAT(ErrorOf("root = \"a\""), HasSubstr("line 1, column 6: expected '::='"));
  EXPECT_THAT(ErrorOf("# only a comment\n"), HasSubstr("the grammar is empty"));
  EXPECT_THAT(ErrorOf("root ::= \"a\nb\""), HasSubstr("line 1, column 10: unterminated string literal"));
}

TEST(GbnfTest, RefusesLeftRecursion) {
  using ::testing::HasSubstr;
  EXPECT_THAT(ErrorOf("root ::= root \"a\" | \"b\""), HasSubstr("line 1, column 1: rule 'root' is left-recursive"));
  EXPECT_THAT(ErrorOf("root ::= x\nx ::= y? root \"a\" | \"b\"\ny ::= \"c\""), HasSubstr("left-recursive"));
  EXPECT_THAT(ErrorOf("root ::= \"a\"\n  expr ::= (expr \"+\")? \"1\""),
              HasSubstr("line 2, column 3: rule 'expr"));
  EXPECT_THAT(ErrorOf("root ::= (root)* \"a\""), HasSubstr("left-recursive"));
  // Right recursion and recursion after a consumed character are fine.
  EXPECT_NO_THROW(ParseGbnf("root ::= \"a\" root | \"b\""));
  EXPECT_NO_THROW(ParseGbnf("root ::= \"(\" root* \")\""));
}

}  // namespace
}  // namespace infernix::grammar
