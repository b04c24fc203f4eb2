// The JSON Schema cases (json_schema_cases.h) token-wise over the real Qwen3 vocabulary: each string
// is tokenized by the real tokenizer and stepped through a TokenMatcher; every token of an accepted
// string must be allowed by the mask (and the mask must agree with AcceptToken), the end must be
// complete with EOS allowed; a rejected string must be refused at some token or end incomplete. The
// verdict must equal the character-level matcher's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/json_schema_cases.h"
#include "grammar/test_cases.h"
#include "grammar/matcher.h"
#include "grammar/test_vocab.h"

namespace infernix::grammar {
namespace {

using testing::kImEnd;
using testing::Qwen;
using testing::Vocab;

bool Allowed(const std::vector<uint32_t>& mask, int32_t id) { return (mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1; }

bool MatchesCharacterWise(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.Accept(text) && m.IsComplete();
}

// Steps the tokens of `text`; returns whether all were allowed and the end is complete.
bool MatchesTokenWise(const std::shared_ptr<TokenGrammar>& tg, const std::string& text, size_t* n_tokens) {
  TokenMatcher m(tg, {kImEnd});
  std::vector<uint32_t> mask(m.mask_words());
  const std::vector<int32_t> ids = Qwen().Encode(text);
  *n_tokens += ids.size();
  for (int32_t id : ids) {
    m.FillNextTokenBitmask(mask);
    const bool allowed = Allowed(mask, id);
    const bool accepted = m.AcceptToken(id);
    EXPECT_EQ(allowed, accepted) << "token " << id << " '" << Qwen().TokenBytes(id) << "' in " << text;
    if (!accepted) return false;
  }
  m.FillNextTokenBitmask(mask);
  EXPECT_EQ(Allowed(mask, kImEnd), m.IsComplete()) << text;
  return m.IsComplete();
}

TEST(JsonSchemaTokenTest, CasesOverTheRealVocabulary) {
  size_t n_strings = 0, n_tokens = 0;
  for (const testing::SchemaCase& c : testing::SchemaCases()) {
    SCOPED_TRACE(c.name);
    auto compiled = std::make_shared<const CompiledGrammar>(JsonSchemaGrammar(nlohmann::ordered_json::parse(c.schema)));
    auto tg = std::make_shared<TokenGrammar>(compiled, Vocab());
    for (const std::string& s : c.accept) {
      EXPECT_TRUE(MatchesCharacterWise(compiled, s)) << "character-wise should accept: " << s;
      EXPECT_TRUE(MatchesTokenWise(tg, s, &n_tokens)) << "token-wise should accept: " << s;
    }
    for (const std::string& s : c.reject) {
      EXPECT_FALSE(MatchesCharacterWise(compiled, s)) << "character-wise should reject: " << s;
      EXPECT_FALSE(MatchesTokenWise(tg, s, &n_tokens)) << "token-wise should reject: " << s;
    }
    n_strings += c.accept.size() + c.reject.size();
  }
  EXPECT_GE(testing::SchemaCases().size(), 39u);
  RecordProperty("strings", static_cast<int>(n_strings));
  RecordProperty("tokens", static_cast<int>(n_tokens));
}


// The stack masks built level by level (a trie walk from the top grammar position, each deeper
// cut refined from the shallower one's uncertain tokens, walks numbering the states they meet)
// give exactly the masks of a plain trie walk from the real state, on every state along the
// accepted and (up to the refused token) rejected strings of every schema and grammar case.
TEST(JsonSchemaTokenTest, LevelMasksEqualFullWalks) {
  std::vector<std::pair<std::shared_ptr<const CompiledGrammar>, std::vector<std::string>>> cases;
  for (const testing::SchemaCase& c : testing::SchemaCases()) {
    std::vector<std::string> texts = c.accept;
    texts.insert(texts.end(), c.reject.begin(), c.reject.end());
    cases.emplace_back(std::make_shared<const CompiledGrammar>(JsonSchemaGrammar(nlohmann::ordered_json::parse(c.schema))),
                       std::move(texts));
  }
  for (const testing::GrammarCase& c : testing::GrammarCases()) {
    std::vector<std::string> texts = c.accept;
    texts.insert(texts.end(), c.reject.begin(), c.reject.end());
    cases.emplace_back(std::make_shared<const CompiledGrammar>(testing::BuildGrammar(c)), std::move(texts));
  }
  size_t n_states = 0;
  for (const auto& [grammar, texts] : cases) {
    auto shared = std::make_shared<TokenGrammar>(grammar, Vocab());
    for (const std::string& text : texts) {
      TokenMatcher full(grammar, Vocab(), {kImEnd});
      full.set_cut_depth(0);
      TokenMatcher d1(shared, {kImEnd}), d2(shared, {kImEnd}), d4(shared, {kImEnd}), fresh(grammar, Vocab(), {kImEnd});
      d1.set_cut_depth(1);
      d2.set_cut_depth(2);
      std::vector<TokenMatcher*> matchers = {&full, &d1, &d2, &d4, &fresh};
      for (TokenMatcher* m : matchers) m->set_cache_capacity(0);
      std::vector<uint32_t> expected(full.mask_words()), mask(full.mask_words());
      for (int32_t id : Qwen().Encode(text)) {
        full.FillNextTokenBitmask(expected);
        ++n_states;
        for (TokenMatcher* m : matchers) {
          m->FillNextTokenBitmask(mask);
          ASSERT_EQ(mask, expected) << "before token " << id << " of " << text;
        }
        if (!full.AcceptToken(id)) break;
        for (TokenMatcher* m : matchers) {
          if (m != &full) {
            ASSERT_TRUE(m->AcceptToken(id));
          }
        }
      }
    }
  }
  RecordProperty("states", static_cast<int>(n_states));
  EXPECT_GT(n_states, 2000u);
}

}  // namespace
}  // namespace infernix::grammar
