// OutputConstraint over the real Qwen3 vocabulary: eager masks, and lazy grammars that start after a
// trigger (within a token, across tokens, with bytes past the trigger) and end when complete.
#include "engine/output_constraint.h"

#include <gtest/gtest.h>

#include "grammar/gbnf.h"
#include "grammar/test_vocab.h"

namespace infernix {
namespace {

using grammar::testing::kImEnd;
using grammar::testing::Qwen;
using grammar::testing::Vocab;

std::shared_ptr<grammar::TokenGrammar> Compile(std::string_view gbnf) {
  return std::make_shared<grammar::TokenGrammar>(
      std::make_shared<const grammar::CompiledGrammar>(grammar::ParseGbnf(gbnf)), Vocab());
}

bool Allowed(std::span<const uint32_t> mask, int32_t id) { return (mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1; }

// Feeds the tokens of `text`, each checked against the mask when there is one.
void Feed(OutputConstraint& c, const std::string& text) {
  for (int32_t id : Qwen().Encode(text)) {
    OutputConstraint::Next next = c.NextMask();
    if (!next.mask.empty()) {
      ASSERT_TRUE(Allowed(next.mask, id)) << "token " << id << " of " << text;
    }
    c.Accept(id);
  }
}

constexpr int64_t kPaddedVocab = 151936;

TEST(OutputConstraint, EagerMasksEveryTokenAndIsExhaustedAtTheEnd) {
  OutputConstraint c(Compile(R"(root ::= "yes" | "no")"), {}, "", kPaddedVocab);
  OutputConstraint::Next first = c.NextMask();
  ASSERT_EQ(first.mask.size(), static_cast<size_t>(kPaddedVocab / 32));
  EXPECT_FALSE(first.exhausted);
  EXPECT_FALSE(Allowed(first.mask, Qwen().Encode("maybe")[0]));
  Feed(c, "yes");
  EXPECT_TRUE(c.NextMask().exhausted);  // complete, and no EOS id to allow
}

TEST(OutputConstraint, LazyStartsAtTheTriggerTokenAndEndsWhenComplete) {
  OutputConstraint c(Compile(R"(root ::= "\n" "X" [0-9] "</tool_call>")"), {kImEnd}, "<tool_call>", kPaddedVocab);
  EXPECT_TRUE(c.NextMask().mask.empty());
  Feed(c, "Let me call it. ");
  EXPECT_FALSE(c.constrained());
  c.Accept(151657);  // <tool_call>, one token
  ASSERT_TRUE(c.constrained());
  OutputConstraint::Next next = c.NextMask();
  ASSERT_FALSE(next.mask.empty());
  EXPECT_TRUE(Allowed(next.mask, Qwen().Encode("\n")[0]));
  EXPECT_FALSE(Allowed(next.mask, Qwen().Encode("Y")[0]));
  EXPECT_FALSE(Allowed(next.mask, kImEnd));  // not complete: no end
  Feed(c, "\nX7</tool_call>");
  EXPECT_FALSE(c.constrained());  // complete: free again
  EXPECT_TRUE(c.NextMask().mask.empty());
  Feed(c, " and again ");
  c.Accept(151657);
  EXPECT_TRUE(c.constrained());  // re-armed
}

TEST(OutputConstraint, LazyTriggerAcrossTokensAndBytesPastIt) {
  // Spelled in pieces: "<tool" then "_call>".
  OutputConstraint across(Compile(R"(root ::= "!" )"), {}, "<tool_call>", kPaddedVocab);
  Feed(across, "a <tool");
  EXPECT_FALSE(across.constrained());
  Feed(across, "_call>");
  EXPECT_TRUE(across.constrained());
  // The trigger ends inside a token: the rest of the token goes to the grammar.
  OutputConstraint inside(Compile(R"(root ::= "lo" " world")"), {}, "Hel", kPaddedVocab);
  Feed(inside, "Say Hello");
  ASSERT_TRUE(inside.constrained());
  OutputConstraint::Next next = inside.NextMask();
  EXPECT_TRUE(Allowed(next.mask, Qwen().Encode(" world")[0]));
  EXPECT_FALSE(Allowed(next.mask, Qwen().Encode(" there")[0]));
  // Bytes past the trigger the grammar refuses: the grammar does not start.
  OutputConstraint refused(Compile(R"(root ::= "x")"), {}, "Hel", kPaddedVocab);
  Feed(refused, "Say Hello");
  EXPECT_FALSE(refused.constrained());
}

}  // namespace
}  // namespace infernix
