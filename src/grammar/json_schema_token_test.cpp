// The JSON Schema cases (json_schema_cases.h) token-wise over the real Qwen3 vocabulary: each string
// is tokenized by the real tokenizer and stepped through a TokenMatcher; every token of an accepted
// string must be allowed by the mask (and the mask must agree with AcceptToken), the end must be
// complete with EOS allowed; a rejected string must be refused at some token or end incomplete. The
// verdict must equal the character-level matcher's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/json_schema_cases.h"
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

}  // namespace
}  // namespace infernix::grammar
