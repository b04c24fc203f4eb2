// ToolCallGate alone and driving the engine's lazy OutputConstraint over the real Qwen3 vocabulary: a
// `<tool_call>` inside a markdown code fence stays text, one outside starts the constrained call.
#include "server/tool_call_gate.h"

#include <gtest/gtest.h>

#include "engine/output_constraint.h"
#include "grammar/gbnf.h"
#include "grammar/test_vocab.h"

namespace infernix {
namespace {

TEST(ToolCallGate, ClosedInsideFencesOpenOutside) {
  ToolCallGate gate;
  EXPECT_TRUE(gate.Open());
  gate.Feed("Here is the format:\n```\n");
  EXPECT_FALSE(gate.Open());
  gate.Feed("text ");
  EXPECT_FALSE(gate.Open());
  gate.Feed("\n``");  // the closing marker in pieces
  gate.Feed("`\nNow the call: ");
  EXPECT_TRUE(gate.Open());
  // Open() is asked where a trigger ('<') follows, which decides the line: each case on its own gate.
  // Tildes, indented up to three spaces; four backticks need four to close.
  ToolCallGate tildes;
  tildes.Feed("  ~~~\n");
  EXPECT_FALSE(tildes.Open());
  ToolCallGate three_in_four;
  three_in_four.Feed("````\n```\n");
  EXPECT_FALSE(three_in_four.Open());
  ToolCallGate four;
  four.Feed("````\n```\n````\n");
  EXPECT_TRUE(four.Open());
}

TEST(ToolCallGate, ReasoningEndStartsOutsideAnyFence) {
  ToolCallGate gate;
  gate.Feed("thinking:\n```\nunclosed </th");
  EXPECT_FALSE(gate.Open());
  gate.Feed("ink>\n\n");
  EXPECT_TRUE(gate.Open());
  // A completed call ends its line: a fence may open right after it.
  gate.AfterConstrained();
  gate.Feed("```\n");
  EXPECT_FALSE(gate.Open());
}

TEST(ToolCallGate, DrivesTheLazyConstraint) {
  using grammar::testing::Qwen;
  auto grammar = std::make_shared<grammar::TokenGrammar>(
      std::make_shared<const grammar::CompiledGrammar>(grammar::ParseGbnf(R"(root ::= "!")")), grammar::testing::Vocab());
  auto feed = [](OutputConstraint& c, const std::string& text) {
    for (int32_t id : Qwen().Encode(text)) c.Accept(id);
  };
  OutputConstraint c(grammar, {}, "<tool_call>", 151936, std::make_shared<ToolCallGate>());
  feed(c, "Write it like this:\n```\n<tool_call>\n{\"name\": \"f\"}\n</tool_call>\n```\n");
  EXPECT_FALSE(c.constrained());  // quoted in the fence
  feed(c, "Calling it now. <tool_call>");
  EXPECT_TRUE(c.constrained());
  // Without a gate every trigger counts (as before).
  OutputConstraint plain(grammar, {}, "<tool_call>", 151936);
  feed(plain, "```\n<tool_call>");
  EXPECT_TRUE(plain.constrained());
}

}  // namespace
}  // namespace infernix
