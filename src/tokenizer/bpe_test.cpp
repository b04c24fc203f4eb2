// The BPE core on hand-made vocabularies: merge order, ties, unknown characters, byte fallback,
// ignore_merges, broken inputs; and the two spellings of merges in tokenizer.json.
#include "tokenizer/bpe.h"

#include <gtest/gtest.h>

#include "tokenizer/test_util.h"

namespace infernix {
namespace {

using testing::ErrorOf;
using testing::LoadJson;
using testing::SmallTokenizerJson;
using testing::Spell;

// Vocabulary a=0 b=1 c=2 ab=3 bc=4 abc=5 aa=6 x=7.
Bpe::Vocab SmallVocab() {
  return {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}, {"aa", 6}, {"x", 7}};
}

std::vector<int32_t> Encode(const Bpe& bpe, std::string_view word) {
  std::vector<int32_t> ids;
  bpe.Encode(word, &ids);
  return ids;
}

TEST(BpeTest, MergesLowestRankFirst) {
  const Bpe bpe(SmallVocab(), {{"a", "b"}, {"ab", "c"}, {"b", "c"}}, {}, "test");
  EXPECT_EQ(Encode(bpe, "abc"), (std::vector<int32_t>{5}));
  EXPECT_EQ(Encode(bpe, "abab"), (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(Encode(bpe, "cab"), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(Encode(bpe, "bcb"), (std::vector<int32_t>{4, 1}));
  EXPECT_EQ(Encode(bpe, ""), (std::vector<int32_t>{}));
}

TEST(BpeTest, RankDecidesOverPosition) {
  // "b c" outranks "a b": abc -> a + bc, and (a, bc) is not a merge.
  const Bpe bpe(SmallVocab(), {{"b", "c"}, {"a", "b"}, {"ab", "c"}}, {}, "test");
  EXPECT_EQ(Encode(bpe, "abc"), (std::vector<int32_t>{0, 4}));
}

TEST(BpeTest, EqualRanksMergeLeftmostFirst) {
  const Bpe bpe(SmallVocab(), {{"a", "a"}}, {}, "test");
  EXPECT_EQ(Encode(bpe, "aaa"), (std::vector<int32_t>{6, 0}));
  EXPECT_EQ(Encode(bpe, "aaaa"), (std::vector<int32_t>{6, 6}));
}

TEST(BpeTest, UnknownCharactersAreDroppedWithoutUnkToken) {
  const Bpe bpe(SmallVocab(), {{"a", "b"}}, {}, "test");
  EXPECT_EQ(Encode(bpe, "a?b"), (std::vector<int32_t>{3}));  // as in Hugging Face: no gap is left, a+b merge
  EXPECT_EQ(Encode(bpe, "é"), (std::vector<int32_t>{}));
}

TEST(BpeTest, UnkTokenWithAndWithoutFusing) {
  BpeOptions options;
  options.unk_token = "x";
  const Bpe plain(SmallVocab(), {}, options, "test");
  EXPECT_EQ(Encode(plain, "a??b"), (std::vector<int32_t>{0, 7, 7, 1}));
  options.fuse_unk = true;
  const Bpe fused(SmallVocab(), {}, options, "test");
  EXPECT_EQ(Encode(fused, "a??b?"), (std::vector<int32_t>{0, 7, 1, 7}));
}

TEST(BpeTest, ByteFallbackSpellsUnknownCharactersAsBytes) {
  Bpe::Vocab vocab = SmallVocab();
  vocab.emplace_back("<0xC3>", 8);
  vocab.emplace_back("<0xA9>", 9);
  BpeOptions options;
  options.byte_fallback = true;
  options.unk_token = "x";
  const Bpe bpe(vocab, {}, options, "test");
  EXPECT_EQ(Encode(bpe, "aéb"), (std::vector<int32_t>{0, 8, 9, 1}));
  EXPECT_EQ(Encode(bpe, "a€"), (std::vector<int32_t>{0, 7}));  // E2 82 AC: no byte tokens -> unk
}

TEST(BpeTest, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  BpeOptions options;
  options.ignore_merges = true;
  const Bpe bpe(SmallVocab(), {{"a", "b"}}, options, "test");
  EXPECT_EQ(Encode(bpe, "abc"), (std::vector<int32_t>{5}));
  EXPECT_EQ(Encode(bpe, "abb"), (std::vector<int32_t>{3, 1}));
}

TEST(BpeTest, LaterDuplicateMergeSetsTheRank) {
  // ("a","b") listed at rank 0 and again at rank 2: rank 2 counts, so "b c" (rank 1) goes first.
  const Bpe bpe(SmallVocab(), {{"a", "b"}, {"b", "c"}, {"a", "b"}}, {}, "test");
  EXPECT_EQ(Encode(bpe, "abc"), (std::vector<int32_t>{0, 4}));
}

TEST(BpeTest, VocabularyLookups) {
  const Bpe bpe({{"a", 0}, {"b", 5}}, {}, {}, "test");
  EXPECT_EQ(bpe.id_limit(), 6);
  EXPECT_EQ(bpe.size(), 2u);
  EXPECT_EQ(bpe.TokenToId("b"), 5);
  EXPECT_EQ(bpe.TokenToId("c"), std::nullopt);
  EXPECT_EQ(bpe.IdToToken(5), "b");
  EXPECT_EQ(bpe.IdToToken(3), "");
  EXPECT_EQ(bpe.IdToToken(-1), "");
  EXPECT_EQ(bpe.IdToToken(6), "");
}

TEST(BpeTest, BrokenVocabulariesAndMerges) {
  std::string message = ErrorOf(ErrorCode::kInvalidFormat, [] { Bpe(SmallVocab(), {{"a", "q"}}, {}, "v.json"); });
  EXPECT_NE(message.find("v.json: model.merges[0]"), std::string::npos) << message;
  EXPECT_NE(message.find("'q'"), std::string::npos) << message;
  message = ErrorOf(ErrorCode::kInvalidFormat, [] { Bpe(SmallVocab(), {{"c", "a"}}, {}, "v.json"); });
  EXPECT_NE(message.find("'ca' is not in model.vocab"), std::string::npos) << message;
  message = ErrorOf(ErrorCode::kInvalidFormat, [] { Bpe({{"a", 0}, {"b", 0}}, {}, {}, "v.json"); });
  EXPECT_NE(message.find("both have id 0"), std::string::npos) << message;
  BpeOptions options;
  options.unk_token = "<unk>";
  message = ErrorOf(ErrorCode::kInvalidFormat, [&] { Bpe(SmallVocab(), {}, options, "v.json"); });
  EXPECT_NE(message.find("unk_token '<unk>'"), std::string::npos) << message;
}

TEST(BpeTest, MergesAsStringsAndAsArraysAgree) {
  const std::vector<std::string> merges = {"h e", "Ġ t", "Ġt he", "l l", "ll o", "he llo"};
  nlohmann::json as_strings = SmallTokenizerJson(merges);
  nlohmann::json as_arrays = as_strings;
  as_arrays["model"]["merges"] = nlohmann::json::array();
  for (const std::string& merge : merges) {
    const size_t space = merge.find(' ');
    as_arrays["model"]["merges"].push_back({merge.substr(0, space), merge.substr(space + 1)});
  }
  const auto a = LoadJson(as_strings);
  const auto b = LoadJson(as_arrays);
  const std::string text = "hello the theme, hell";
  const std::vector<int32_t> ids = a->Encode(text);
  EXPECT_EQ(ids, b->Encode(text));
  // "hello" -> 261; " the" -> 258; " theme" -> 258 m e; ","; " hell" -> Ġ(32) he(256) ll(259).
  EXPECT_EQ(ids, (std::vector<int32_t>{261, 258, 258, 'm', 'e', ',', ' ', 256, 259}));
  EXPECT_EQ(a->Decode(ids), text);
  EXPECT_EQ(a->IdToToken(258), Spell(" the"));
}

TEST(BpeTest, MalformedMergeStrings) {
  nlohmann::json j = SmallTokenizerJson({});
  j["model"]["merges"] = {"a b c"};
  std::string message = ErrorOf(ErrorCode::kInvalidFormat, [&] { LoadJson(j); });
  EXPECT_NE(message.find("<test>/tokenizer.json: field 'model.merges[0]'"), std::string::npos) << message;
  j["model"]["merges"] = {{"a"}};
  message = ErrorOf(ErrorCode::kInvalidFormat, [&] { LoadJson(j); });
  EXPECT_NE(message.find("model.merges[0]"), std::string::npos) << message;
}

}  // namespace
}  // namespace infernix
