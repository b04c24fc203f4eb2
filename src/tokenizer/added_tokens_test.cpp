// Added-token matching and its flags (special, lstrip, rstrip, normalized, single_word), directly
// on the matcher (cases from Hugging Face's own AddedVocabulary tests) and through tokenizer.json.
#include "tokenizer/added_tokens.h"

#include <gtest/gtest.h>

#include "tokenizer/test_util.h"

namespace infernix {
namespace {

using testing::LoadJson;
using testing::SmallTokenizerJson;

AddedToken Token(int32_t id, std::string content) {
  AddedToken token;
  token.id = id;
  token.content = std::move(content);
  return token;
}

AddedTokenMatcher Matcher(const std::vector<AddedToken>& tokens) {
  AddedTokenMatcher matcher;
  for (const AddedToken& token : tokens) matcher.Add(token.content, token);
  return matcher;
}

// The segments as "text" for ordinary text and "text=id" for tokens.
std::vector<std::string> Segments(const AddedTokenMatcher& matcher, std::string_view text) {
  std::vector<AddedTokenMatcher::Segment> segments;
  matcher.Split(text, &segments);
  std::vector<std::string> out;
  for (const auto& s : segments) out.push_back(s.id < 0 ? std::string(s.text) : fmt::format("{}={}", s.text, s.id));
  return out;
}

using V = std::vector<std::string>;

TEST(AddedTokenMatcherTest, SplitsAroundTokens) {
  const auto matcher = Matcher({Token(0, "my"), Token(1, "name"), Token(2, "[CLS]"), Token(3, "[SEP]")});
  EXPECT_EQ(Segments(matcher, "[CLS] My name is Anthony [SEP]"),
            (V{"[CLS]=2", " My ", "name=1", " is Anthony ", "[SEP]=3"}));
  EXPECT_EQ(Segments(matcher, ""), V{});
  EXPECT_EQ(Segments(AddedTokenMatcher(), "no tokens"), V{"no tokens"});
}

TEST(AddedTokenMatcherTest, LstripRstripAndSingleWord) {
  AddedToken my = Token(0, "my");
  my.lstrip = my.rstrip = true;
  AddedToken ony = Token(2, "ony");
  ony.single_word = true;
  const auto matcher = Matcher({my, Token(1, "name"), ony, Token(3, "[CLS]"), Token(4, "[SEP]")});
  EXPECT_EQ(Segments(matcher, "[CLS] my name is anthony [SEP]"),
            (V{"[CLS]=3", " my =0", "name=1", " is anthony ", "[SEP]=4"}));
}

TEST(AddedTokenMatcherTest, SingleWordNeedsNonWordNeighbours) {
  AddedToken mask = Token(0, "<mask>");
  mask.single_word = true;
  const auto matcher = Matcher({mask});
  EXPECT_EQ(Segments(matcher, "<mask> My name <mask> A<mask> <mask>ony <mask>"),
            (V{"<mask>=0", " My name ", "<mask>=0", " A<mask> <mask>ony ", "<mask>=0"}));
  // Punctuation is not a word character; a combining mark is.
  EXPECT_EQ(Segments(matcher, "<mask>, <mask>- \u25CC\u0330<mask>"),
            (V{"<mask>=0", ", ", "<mask>=0", "- \u25CC\u0330<mask>"}));
}

TEST(AddedTokenMatcherTest, StripsUnicodeWhiteSpaceWithoutOverlapping) {
  AddedToken mask = Token(0, "<mask>");
  mask.lstrip = mask.rstrip = mask.single_word = true;
  const auto matcher = Matcher({mask});
  EXPECT_EQ(Segments(matcher, "Hi <mask> there\t<mask>\t<mask>\u2000"),
            (V{"Hi", " <mask> =0", "there", "\t<mask>\t=0", "<mask>\u2000=0"}));
  EXPECT_EQ(Segments(matcher, "a \u00A0\u3000<mask>"), (V{"a", " \u00A0\u3000<mask>=0"}));
}

TEST(AddedTokenMatcherTest, LeftmostLongest) {
  const auto matcher = Matcher({Token(0, "<a>"), Token(1, "<a><b>"), Token(2, "ab"), Token(3, "bcd")});
  EXPECT_EQ(Segments(matcher, "x<a><b><a>"), (V{"x", "<a><b>=1", "<a>=0"}));
  EXPECT_EQ(Segments(matcher, "abcd"), (V{"ab=2", "cd"}));  // leftmost beats longer
}

TEST(AddedTokenMatcherTest, DroppedSingleWordMatchIsNotRetriedShorter) {
  AddedToken long_token = Token(0, "<ab>x");
  long_token.single_word = true;
  const auto matcher = Matcher({long_token, Token(1, "<ab>")});
  // Like Hugging Face's automaton, the scan resumes after the dropped match.
  EXPECT_EQ(Segments(matcher, "<ab>xy <ab>"), (V{"<ab>xy ", "<ab>=1"}));
}

// Through tokenizer.json: the small byte-level tokenizer with an NFC normalizer and added tokens.
nlohmann::json WithAddedTokens(nlohmann::json added) {
  nlohmann::json j = SmallTokenizerJson({"h i", "Ġ x"});
  j["normalizer"] = {{"type", "NFC"}};
  j["added_tokens"] = std::move(added);
  return j;
}

nlohmann::json Added(int id, const std::string& content, bool special, bool normalized) {
  return {{"id", id},          {"content", content},     {"special", special}, {"normalized", normalized},
          {"lstrip", false},   {"rstrip", false},        {"single_word", false}};
}

TEST(AddedTokensTest, NormalizedTokensMatchTheNormalizedText) {
  // "e\u0301" normalizes to "é", which the normalized token (given decomposed) matches.
  const auto tok = LoadJson(WithAddedTokens({Added(300, "e\u0301", false, true)}));
  EXPECT_EQ(tok->Encode("e\u0301"), (std::vector<int32_t>{300}));
  EXPECT_EQ(tok->Encode("\u00E9hi"), (std::vector<int32_t>{300, 256}));
}

TEST(AddedTokensTest, RawTokensMatchTheRawText) {
  const auto tok = LoadJson(WithAddedTokens({Added(300, "\u00E9", false, false)}));
  EXPECT_EQ(tok->Encode("\u00E9"), (std::vector<int32_t>{300}));
  EXPECT_EQ(tok->Encode("e\u0301"), (std::vector<int32_t>{0xC3, 0xA9}));  // NFC'd after matching: bytes
}

TEST(AddedTokensTest, LstripThroughTheTokenizer) {
  nlohmann::json mask = Added(300, "<mask>", true, false);
  mask["lstrip"] = true;
  const auto tok = LoadJson(WithAddedTokens({mask}));
  std::vector<int32_t> expected = tok->Encode("hi");
  expected.push_back(300);
  for (int32_t id : tok->Encode(" x")) expected.push_back(id);
  EXPECT_EQ(tok->Encode("hi  <mask> x"), expected);
  EXPECT_EQ(tok->Decode(expected), "hi<mask> x");
}

TEST(AddedTokensTest, SpecialTokensAndDecoding) {
  const auto tok = LoadJson(WithAddedTokens({Added(300, "<|end|>", true, false), Added(301, "a b", false, false)}));
  const std::vector<int32_t> ids = tok->Encode("hi<|end|>a b");
  EXPECT_EQ(ids, (std::vector<int32_t>{256, 300, 301}));
  EXPECT_EQ(tok->Decode(ids), "hi<|end|>a b");  // a content outside the alphabet is kept as is
  EXPECT_EQ(tok->Decode(ids, /*skip_special=*/true), "hia b");
  EXPECT_TRUE(tok->IsSpecial(300));
  EXPECT_FALSE(tok->IsSpecial(301));
  EXPECT_FALSE(tok->IsSpecial(256));
  EXPECT_EQ(tok->vocab_size(), 302);
  EXPECT_EQ(tok->TokenToId("<|end|>"), 300);
  EXPECT_EQ(tok->IdToToken(301), "a b");
}

TEST(AddedTokensTest, SplitSpecialTokensLeavesSpecialTokensToBpe) {
  const nlohmann::json j = WithAddedTokens({Added(300, "<|end|>", true, false), Added(301, "<x>", false, false)});
  const auto tok = LoadJson(j, {{"split_special_tokens", true}});
  const std::vector<int32_t> ids = tok->Encode("<|end|><x>");
  EXPECT_EQ(ids.back(), 301);
  EXPECT_EQ(ids.size(), 8u);  // 7 one-byte tokens (no merges apply), then <x>
  EXPECT_EQ(tok->Decode(ids), "<|end|><x>");
}

}  // namespace
}  // namespace infernix
