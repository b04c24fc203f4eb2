// Test harness for the output parsers: runs a model output through OutputParser whole, split at every
// byte boundary, fed byte by byte and split at random points, and checks that every run gives the same
// result and well-formed deltas.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "chat/output/output_parser.h"
#include "chat/output/tool_schema.h"

namespace infernix {

inline bool operator==(const ToolCall& a, const ToolCall& b) {
  return a.id == b.id && a.name == b.name && a.arguments == b.arguments;
}

inline void PrintTo(const ToolCall& call, std::ostream* os) {
  *os << "{" << call.id << ", " << call.name << ", " << call.arguments << "}";
}

namespace testing {

inline std::string CallId(int n) {
  char id[40];
  std::snprintf(id, sizeof(id), "call_%024d", n);
  return id;
}

// Deterministic ids: CallId(1), CallId(2), ...
inline std::function<std::string()> SequentialIds() {
  auto next = std::make_shared<int>(0);
  return [next]() { return CallId(++*next); };
}

inline std::string Args(const nlohmann::ordered_json& object) { return DumpJson(object); }

inline void ExpectSame(const ParsedOutput& actual, const ParsedOutput& expected, const std::string& how) {
  EXPECT_EQ(actual.reasoning, expected.reasoning) << how;
  EXPECT_EQ(actual.content, expected.content) << how;
  EXPECT_EQ(actual.tool_calls, expected.tool_calls) << how;
}

// Feeds `text` cut at `cuts` (increasing offsets), checks the shape of each delta and returns the
// concatenation of the deltas (checked against result() too).
inline ParsedOutput ParseSplit(std::string_view text, OutputParserOptions options, const std::vector<size_t>& cuts,
                               const std::string& how) {
  options.make_call_id = SequentialIds();
  OutputParser parser(std::move(options));
  ParsedOutput joined;
  auto take = [&](const OutputDelta& delta) {
    joined.reasoning += delta.reasoning;
    joined.content += delta.content;
    std::vector<int> seen;
    for (const ToolCallDelta& call : delta.tool_calls) {
      for (int s : seen) EXPECT_NE(s, call.index) << how << ": a call twice in one delta";
      seen.push_back(call.index);
      auto index = static_cast<size_t>(call.index);
      if (index == joined.tool_calls.size()) {
        EXPECT_FALSE(call.id.empty()) << how;
        EXPECT_FALSE(call.name.empty()) << how;
        joined.tool_calls.push_back(ToolCall{call.id, call.name, call.arguments_fragment});
      } else {
        ASSERT_LT(index, joined.tool_calls.size()) << how << ": call indices must appear in order";
        EXPECT_TRUE(call.id.empty() && call.name.empty()) << how << ": id and name only on the first delta";
        EXPECT_FALSE(call.arguments_fragment.empty()) << how << ": empty continuation delta";
        joined.tool_calls[index].arguments += call.arguments_fragment;
      }
    }
  };
  size_t begin = 0;
  for (size_t cut : cuts) {
    take(parser.Push(text.substr(begin, cut - begin)));
    begin = cut;
  }
  take(parser.Push(text.substr(begin)));
  take(parser.Finish());
  ExpectSame(parser.result(), joined, how + " (result() against the deltas)");
  return joined;
}

struct SplitEffort {
  bool every_two_way_split = true;
  int random_rounds = 200;
};

// The whole check: ParseOutput, every two-way split, byte by byte, and random multi-way splits.
inline void ExpectParses(std::string_view text, const OutputParserOptions& options, const ParsedOutput& expected,
                         SplitEffort effort = {}) {
  OutputParserOptions whole = options;
  whole.make_call_id = SequentialIds();
  ExpectSame(ParseOutput(text, whole), expected, "ParseOutput");
  if (::testing::Test::HasFailure()) return;  // one report is enough
  for (size_t k = 0; effort.every_two_way_split && k <= text.size() && !::testing::Test::HasFailure(); ++k) {
    std::string how = "split at " + std::to_string(k);
    ExpectSame(ParseSplit(text, options, {k}, how), expected, how);
  }
  std::vector<size_t> every;
  for (size_t k = 1; k < text.size(); ++k) every.push_back(k);
  ExpectSame(ParseSplit(text, options, every, "byte by byte"), expected, "byte by byte");
  std::mt19937 rng(1234);
  for (int round = 0; round < effort.random_rounds && !::testing::Test::HasFailure(); ++round) {
    std::vector<size_t> cuts;
    std::uniform_int_distribution<size_t> step(1, 1 + round % 23);
    for (size_t k = step(rng); k < text.size(); k += step(rng)) cuts.push_back(k);
    std::string how = "random split round " + std::to_string(round);
    ExpectSame(ParseSplit(text, options, cuts, how), expected, how);
  }
}

}  // namespace testing
}  // namespace infernix
