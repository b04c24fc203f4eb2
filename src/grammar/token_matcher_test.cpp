// The token-level matcher over the real Qwen3 vocabulary: the test grammars token-wise, the mask
// checked against per-token acceptance over the whole vocabulary, EOS, and rollback.
#include "grammar/token_matcher.h"

#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include "base/error.h"
#include "base/file_set.h"
#include "grammar/gbnf.h"
#include "grammar/test_cases.h"
#include "grammar/test_vocab.h"
#include "tokenizer/tokenizer.h"

namespace infernix::grammar {
namespace {


using testing::kEndOfText;
using testing::kImEnd;
using testing::Qwen;
using testing::Vocab;

TokenMatcher MakeMatcher(const Grammar& grammar) {
  return TokenMatcher(std::make_shared<const CompiledGrammar>(grammar), Vocab(), {kEndOfText, kImEnd});
}

TokenMatcher MakeMatcher(std::string_view gbnf) { return MakeMatcher(ParseGbnf(gbnf)); }

bool Allowed(const std::vector<uint32_t>& mask, int32_t id) { return (mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1; }

// Runs the tokens of `text` through a matcher, checking each against the mask first. Returns
// whether every token was allowed and the end state is complete.
bool MatchesTokenWise(const Grammar& grammar, const std::string& text) {
  TokenMatcher m = MakeMatcher(grammar);
  std::vector<uint32_t> mask(m.mask_words());
  for (int32_t id : Qwen().Encode(text)) {
    m.FillNextTokenBitmask(mask);
    const bool allowed = Allowed(mask, id);
    const bool accepted = m.AcceptToken(id);
    EXPECT_EQ(allowed, accepted) << "token " << id << " in " << text;
    if (!accepted) return false;
  }
  m.FillNextTokenBitmask(mask);
  EXPECT_EQ(Allowed(mask, kImEnd), m.IsComplete());
  EXPECT_EQ(Allowed(mask, kEndOfText), m.IsComplete());
  return m.IsComplete();
}

TEST(TokenMatcherTest, VocabularyTrie) {
  const TokenVocabulary& v = *Vocab();
  EXPECT_EQ(v.size(), Qwen().vocab_size());
  EXPECT_TRUE(v.special(kImEnd));
  EXPECT_EQ(v.trie()[0].subtree_end, v.trie().size());
  // Every non-special token with bytes is in the trie exactly once.
  std::vector<int> seen(static_cast<size_t>(v.size()), 0);
  for (int32_t id : v.trie_tokens()) ++seen[static_cast<size_t>(id)];
  for (int32_t id = 0; id < v.size(); ++id) {
    ASSERT_EQ(seen[static_cast<size_t>(id)], v.special(id) || v.bytes(id).empty() ? 0 : 1) << id;
  }
}

TEST(TokenMatcherTest, GrammarCasesTokenWise) {
  for (const auto& c : testing::GrammarCases()) {
    SCOPED_TRACE(c.name);
    const Grammar g = testing::BuildGrammar(c);
    for (const std::string& s : c.accept) EXPECT_TRUE(MatchesTokenWise(g, s)) << "should accept: " << s;
    for (const std::string& s : c.reject) EXPECT_FALSE(MatchesTokenWise(g, s)) << "should reject: " << s;
  }
}

// The mask equals, token by token, what AcceptToken says over the whole vocabulary.
TEST(TokenMatcherTest, MaskAgreesWithAcceptTokenOverTheVocabulary) {
  TokenMatcher m = MakeMatcher(JsonGbnf());
  std::vector<uint32_t> mask(m.mask_words());
  for (std::string_view prefix : {"", "{\"k", "ey\": [1", ", \"\\u00", "e9\"]", "}"}) {
    if (!prefix.empty()) {
      for (int32_t id : Qwen().Encode(prefix)) ASSERT_TRUE(m.AcceptToken(id)) << prefix;
    }
    m.FillNextTokenBitmask(mask);
    size_t allowed = 0;
    for (int32_t id = 0; id < Vocab()->size(); ++id) {
      const bool accepted = m.AcceptToken(id);
      if (accepted) m.Rollback(1);
      ASSERT_EQ(Allowed(mask, id), accepted) << "after '" << prefix << "': token " << id << " '" << Vocab()->bytes(id) << "'";
      allowed += accepted;
    }
    EXPECT_GT(allowed, 0u);
  }
  EXPECT_TRUE(m.IsComplete());
  EXPECT_TRUE(Allowed(mask, kImEnd));
}

TEST(TokenMatcherTest, EosAndTermination) {
  TokenMatcher m = MakeMatcher(R"(root ::= "ok" "!"?)");
  std::vector<uint32_t> mask(m.mask_words() + 8, 0xFFFFFFFFu);  // padded like a model vocabulary
  m.FillNextTokenBitmask(mask);
  EXPECT_FALSE(Allowed(mask, kImEnd));
  EXPECT_EQ(mask.back(), 0u);
  EXPECT_FALSE(m.AcceptToken(kImEnd));
  EXPECT_FALSE(m.AcceptToken(151644));  // <|im_start|>: special, never allowed
  ASSERT_TRUE(m.AcceptToken(Qwen().Encode("ok")[0]));
  EXPECT_TRUE(m.IsComplete());
  m.FillNextTokenBitmask(mask);
  EXPECT_TRUE(Allowed(mask, kImEnd));
  EXPECT_TRUE(Allowed(mask, kEndOfText));
  EXPECT_TRUE(m.AcceptToken(kImEnd));
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_FALSE(m.IsComplete());
  m.FillNextTokenBitmask(mask);
  EXPECT_TRUE(std::all_of(mask.begin(), mask.end(), [](uint32_t w) { return w == 0; }));
  EXPECT_FALSE(m.AcceptToken(Qwen().Encode("!")[0]));
  m.Rollback(1);
  EXPECT_TRUE(m.AcceptToken(Qwen().Encode("!")[0]));
  EXPECT_EQ(m.num_accepted(), 2u);
  std::vector<uint32_t> small(3);
  EXPECT_THROW(m.FillNextTokenBitmask(small), Error);
  EXPECT_THROW(m.Rollback(3), Error);
  EXPECT_FALSE(m.AcceptToken(-1));
  EXPECT_FALSE(m.AcceptToken(Vocab()->size()));
}

TEST(TokenMatcherTest, RollbackRestoresMasksExactly) {
  TokenMatcher m = MakeMatcher(JsonGbnf());
  m.set_cache_capacity(0);  // recompute every mask: rollback must not depend on the cache
  const std::vector<int32_t> ids = Qwen().Encode(R"({"name": "Ada", "tags": ["x", 1.5e3], "ok": false})");
  std::vector<std::vector<uint32_t>> masks;
  std::vector<uint32_t> mask(m.mask_words());
  for (int32_t id : ids) {
    m.FillNextTokenBitmask(mask);
    masks.push_back(mask);
    ASSERT_TRUE(m.AcceptToken(id));
  }
  EXPECT_TRUE(m.IsComplete());
  for (size_t back : {size_t{1}, size_t{4}, ids.size() - 3}) {
    m.Rollback(back);
    m.FillNextTokenBitmask(mask);
    EXPECT_EQ(mask, masks[ids.size() - back]) << "after rolling back " << back;
    for (size_t i = ids.size() - back; i < ids.size(); ++i) ASSERT_TRUE(m.AcceptToken(ids[i]));
  }
  m.Rollback(ids.size());
  m.FillNextTokenBitmask(mask);
  EXPECT_EQ(mask, masks[0]);
}

// Masks from per-stack parts (any cut depth, shared between matchers) equal plain trie walks.
TEST(TokenMatcherTest, StackMasksEqualFullWalks) {
  auto compiled = std::make_shared<TokenGrammar>(std::make_shared<const CompiledGrammar>(ParseGbnf(JsonGbnf())), Vocab());
  TokenMatcher full(compiled->grammar(), Vocab(), {kImEnd});
  full.set_cut_depth(0);
  TokenMatcher shallow(compiled, {kImEnd}), deep(compiled, {kImEnd}), shared(compiled, {kImEnd});
  shallow.set_cut_depth(1);
  deep.set_cut_depth(6);
  std::vector<TokenMatcher*> matchers = {&full, &shallow, &deep, &shared};
  for (TokenMatcher* m : matchers) m->set_cache_capacity(0);
  std::vector<uint32_t> expected(full.mask_words()), mask(full.mask_words());
  const std::vector<int32_t> ids = Qwen().Encode(R"([{"a": {"b": [[1], {"c": "\"x\"é"}]}, "d": -0.5}, "z", true])");
  for (size_t step = 0; step <= ids.size(); ++step) {
    full.FillNextTokenBitmask(expected);
    for (TokenMatcher* m : matchers) {
      m->FillNextTokenBitmask(mask);
      ASSERT_EQ(mask, expected) << "step " << step;
      if (step < ids.size()) {
        ASSERT_TRUE(m->AcceptToken(ids[step]));
      }
    }
  }
  EXPECT_GT(compiled->size(), 0u);
  // A second matcher over the same TokenGrammar computes no new stack masks.
  const size_t computed = compiled->size();
  TokenMatcher again(compiled, {kImEnd});
  for (int32_t id : ids) {
    again.FillNextTokenBitmask(mask);
    ASSERT_TRUE(again.AcceptToken(id));
  }
  EXPECT_EQ(compiled->size(), computed);
}

// Matchers on several threads share one TokenGrammar and agree with a matcher of their own.
TEST(TokenMatcherTest, SharedTokenGrammarAcrossThreads) {
  auto compiled = std::make_shared<TokenGrammar>(std::make_shared<const CompiledGrammar>(ParseGbnf(JsonGbnf())), Vocab());
  const std::vector<int32_t> ids = Qwen().Encode(R"({"list": [1, 2, {"x": "y"}], "s": "text, more text"})");
  std::vector<std::vector<uint32_t>> expected;
  {
    TokenMatcher own(compiled->grammar(), Vocab(), {kImEnd});
    std::vector<uint32_t> mask(own.mask_words());
    for (int32_t id : ids) {
      own.FillNextTokenBitmask(mask);
      expected.push_back(mask);
      ASSERT_TRUE(own.AcceptToken(id));
    }
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < mismatches.size(); ++t) {
    threads.emplace_back([&, t] {
      TokenMatcher m(compiled, {kImEnd});
      std::vector<uint32_t> mask(m.mask_words());
      for (size_t i = 0; i < ids.size(); ++i) {
        m.FillNextTokenBitmask(mask);
        mismatches[t] += mask != expected[i];
        if (!m.AcceptToken(ids[i])) ++mismatches[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int count : mismatches) EXPECT_EQ(count, 0);
}

TEST(TokenMatcherTest, CacheHitsOnRepeatedStates) {
  TokenMatcher m = MakeMatcher(R"(root ::= "[" ("1" ",")* "1]")");
  std::vector<uint32_t> mask(m.mask_words());
  const int32_t one = Qwen().Encode("1")[0], comma = Qwen().Encode(",")[0];
  for (int i = 0; i < 5; ++i) {
    m.FillNextTokenBitmask(mask);
    ASSERT_TRUE(m.AcceptToken(i == 0 ? Qwen().Encode("[")[0] : comma));
    m.FillNextTokenBitmask(mask);
    ASSERT_TRUE(m.AcceptToken(one));
  }
  EXPECT_GE(m.cache_hits(), 6u);
  EXPECT_LE(m.cache_misses(), 4u);
}

}  // namespace
}  // namespace infernix::grammar
