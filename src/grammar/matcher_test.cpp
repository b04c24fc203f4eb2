// The character-level matcher: every test grammar over its accepted and rejected strings, fed one
// character and one byte at a time, and rollback.
#include "grammar/matcher.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "grammar/gbnf.h"
#include "grammar/test_cases.h"

namespace infernix::grammar {
namespace {

std::shared_ptr<const CompiledGrammar> Compile(std::string_view gbnf) {
  return std::make_shared<const CompiledGrammar>(ParseGbnf(gbnf));
}

// Feeds `text` in pieces of `piece` bytes (0: one UTF-8 character at a time).
bool MatchesInPieces(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text, size_t piece) {
  GrammarMatcher m(g);
  for (size_t i = 0; i < text.size();) {
    size_t n = piece;
    if (n == 0) {
      const auto b = static_cast<unsigned char>(text[i]);
      n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    }
    n = std::min(n, text.size() - i);
    if (!m.Accept(text.substr(i, n))) return false;
    i += n;
  }
  return m.IsComplete();
}

// A lone lead byte stands for code points of its sequence length only: 0xF0 means U+10000 or more,
// so it can never start an ASCII letter (regression: it used to be taken as "U+0000 and up").
TEST(MatcherTest, LeadBytesNarrowToTheirLengthsRange) {
  auto ascii = Compile(R"(root ::= "red" | "green")");
  for (const char* lead : {"\xC3", "\xE0", "\xE4", "\xF0", "\xF4"}) {
    GrammarMatcher m(ascii);
    EXPECT_FALSE(m.Accept(lead)) << static_cast<int>(static_cast<unsigned char>(lead[0]));
  }
  auto wide = Compile(R"(root ::= [\U0001F600-\U0001F64F])");
  GrammarMatcher m(wide);
  EXPECT_FALSE(m.Accept("\xE4"));       // 3-byte sequences end below U+10000
  EXPECT_TRUE(m.Accept("\xF0\x9F"));   // on the way to U+1F600
  EXPECT_TRUE(m.Accept("\x98\x80"));
  EXPECT_TRUE(m.IsComplete());
}

TEST(MatcherTest, GrammarCasesCharacterWise) {
  for (const auto& c : testing::GrammarCases()) {
    SCOPED_TRACE(c.name);
    const auto g = std::make_shared<const CompiledGrammar>(testing::BuildGrammar(c));
    for (const std::string& s : c.accept) {
      EXPECT_TRUE(MatchesInPieces(g, s, 0)) << "should accept: " << s;
      EXPECT_TRUE(MatchesInPieces(g, s, 1)) << "should accept byte-wise: " << s;
      EXPECT_TRUE(MatchesInPieces(g, s, 3)) << "should accept 3 bytes at a time: " << s;
    }
    for (const std::string& s : c.reject) {
      EXPECT_FALSE(MatchesInPieces(g, s, 0)) << "should reject: " << s;
      EXPECT_FALSE(MatchesInPieces(g, s, 1)) << "should reject byte-wise: " << s;
    }
  }
}

TEST(MatcherTest, CodePointsAndInvalidUtf8) {
  const auto g = Compile(R"(root ::= [^a]*)");
  GrammarMatcher m(g);
  EXPECT_TRUE(m.AcceptCodePoint(0x1F600));
  EXPECT_TRUE(m.AcceptCodePoint(0xE9));
  EXPECT_FALSE(m.AcceptCodePoint('a'));
  EXPECT_FALSE(m.Accept("\xC0\x80"));      // overlong
  EXPECT_FALSE(m.Accept("\xED\xA0\x80"));  // surrogate
  EXPECT_FALSE(m.Accept("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(m.Accept("\x80"));          // stray continuation byte
  EXPECT_TRUE(m.Accept("\xE4"));           // a partial character: not complete until finished
  EXPECT_FALSE(m.IsComplete());
  EXPECT_TRUE(m.Accept("\xB8\xAD"));
  EXPECT_TRUE(m.IsComplete());
}

TEST(MatcherTest, PartialCharacterPrunesByClass) {
  const auto g = Compile(R"(root ::= [\u4E00-\u4E0F])");
  GrammarMatcher m(g);
  EXPECT_FALSE(m.Accept("\xE5"));  // U+5xxx: outside the class
  EXPECT_TRUE(m.Accept("\xE4\xB8"));
  EXPECT_FALSE(m.Accept("\x90"));  // U+4E10
  EXPECT_TRUE(m.Accept("\x8F"));   // U+4E0F
  EXPECT_TRUE(m.IsComplete());
}

TEST(MatcherTest, RollbackRestoresStates) {
  const auto g = Compile(testing::CaseNamed("json").gbnf);  // JSON
  GrammarMatcher m(g);
  std::vector<MatchState> states = {m.state()};
  for (std::string_view piece : {"{\"", "ab", "\": [", "1", ", tr", "ue]}"}) {
    ASSERT_TRUE(m.Accept(piece)) << piece;
    states.push_back(m.state());
  }
  EXPECT_TRUE(m.IsComplete());
  m.Rollback(2);
  EXPECT_EQ(m.state(), states[4]);
  EXPECT_FALSE(m.IsComplete());
  EXPECT_TRUE(m.Accept(", false]}"));
  EXPECT_TRUE(m.IsComplete());
  m.Rollback(5);
  EXPECT_EQ(m.state(), states[0]);
  EXPECT_EQ(m.num_steps(), 0u);
  EXPECT_THROW(m.Rollback(1), Error);
}

TEST(MatcherTest, DeepNestingKeepsStacksBounded) {
  const auto g = Compile(testing::CaseNamed("json").gbnf);
  GrammarMatcher m(g);
  std::string deep(200, '[');
  ASSERT_TRUE(m.Accept(deep));
  EXPECT_LE(m.state().stacks.size(), 16u);
  ASSERT_TRUE(m.Accept(std::string(200, ']')));
  EXPECT_TRUE(m.IsComplete());
  // A long repetition does not grow the stack store (tail calls are not stacked).
  GrammarMatcher r(Compile(R"(root ::= ("ab" | "c")*)"));
  ASSERT_TRUE(r.Accept("ab"));
  ASSERT_TRUE(r.Accept("c"));
  const size_t stacks = r.engine().num_stacks();
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(r.Accept(i % 2 ? "ab" : "c"));
  EXPECT_EQ(r.engine().num_stacks(), stacks);
}

}  // namespace
}  // namespace infernix::grammar
