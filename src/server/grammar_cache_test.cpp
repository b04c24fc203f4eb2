#include "server/grammar_cache.h"

#include <gtest/gtest.h>

#include "grammar/gbnf.h"

namespace infernix {
namespace {

std::shared_ptr<grammar::TokenGrammar> Make(const std::shared_ptr<const grammar::TokenVocabulary>& vocab) {
  return std::make_shared<grammar::TokenGrammar>(
      std::make_shared<const grammar::CompiledGrammar>(grammar::ParseGbnf(R"(root ::= "ab"+)")), vocab);
}

std::shared_ptr<const grammar::TokenVocabulary> SmallVocab() {
  return std::make_shared<const grammar::TokenVocabulary>(std::vector<std::string>{"a", "b", "ab", "c"},
                                                          std::vector<bool>{false, false, false, false});
}

TEST(GrammarCache, EvictsTheLeastRecentlyUsed) {
  auto vocab = SmallVocab();
  GrammarCache cache(2);
  auto a = cache.Insert("a", Make(vocab));
  auto b = cache.Insert("b", Make(vocab));
  EXPECT_EQ(cache.Find("a"), a);  // a is now the most recent
  cache.Insert("c", Make(vocab));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.Find("b"), nullptr);  // b was the least recent
  EXPECT_EQ(cache.Find("a"), a);
  EXPECT_NE(cache.Find("c"), nullptr);
  // Inserting a present key keeps the first value.
  EXPECT_EQ(cache.Insert("a", Make(vocab)), a);
}

TEST(GrammarCache, BoundsTheMasksBytes) {
  auto vocab = SmallVocab();
  GrammarCache cache(10, /*max_bytes=*/1);
  auto a = cache.Insert("a", Make(vocab));
  grammar::TokenMatcher m(a, {});
  std::vector<uint32_t> mask(m.mask_words());
  m.FillNextTokenBitmask(mask);  // stores a per-stack mask in a
  ASSERT_GT(a->memory_bytes(), 1u);
  EXPECT_EQ(cache.Find("a"), a);  // the only entry stays, however big
  cache.Insert("b", Make(vocab));
  EXPECT_EQ(cache.Find("a"), nullptr);  // over the byte budget: the older entry goes
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace infernix
