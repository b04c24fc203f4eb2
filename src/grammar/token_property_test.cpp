// Property tests (rapidcheck) of the token-level matcher over the real Qwen3 vocabulary:
//  1. every token sequence the masks allow is a prefix the grammar accepts character by character
//     (and a complete string when the walk ends with EOS);
//  2. every string the grammar accepts, reached that way, has a token path the masks allow: its
//     tokenizer encoding passes every mask and ends complete;
//  3. every XML-form tool call the masks allow (walked to EOS) is parsed back by the output parser
//     as one call whose arguments have the schema's types and bounds.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdlib>

#include "base/file_set.h"
#include <nlohmann/json.hpp>

#include "chat/output/output_parser.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/json_schema_cases.h"
#include "grammar/tool_call_grammar.h"
#include "grammar/test_cases.h"
#include "grammar/test_vocab.h"
#include "grammar/token_matcher.h"
#include "tokenizer/tokenizer.h"

namespace infernix::grammar {
namespace {


using testing::kImEnd;
using testing::Qwen;
using testing::Vocab;

// The grammars of the shared cases, compiled once for the vocabulary (masks shared between runs).
const std::vector<std::shared_ptr<TokenGrammar>>& Compiled() {
  static const std::vector<std::shared_ptr<TokenGrammar>> compiled = [] {
    std::vector<std::shared_ptr<TokenGrammar>> out;
    for (const auto& c : testing::GrammarCases())
      out.push_back(std::make_shared<TokenGrammar>(std::make_shared<const CompiledGrammar>(testing::BuildGrammar(c)),
                                                   Vocab()));
    out.push_back(std::make_shared<TokenGrammar>(std::make_shared<const CompiledGrammar>(ParseGbnf(JsonGbnf())),
                                                 Vocab()));
    for (const auto& c : testing::SchemaCases())
      out.push_back(std::make_shared<TokenGrammar>(
          std::make_shared<const CompiledGrammar>(JsonSchemaGrammar(nlohmann::ordered_json::parse(c.schema))), Vocab()));
    return out;
  }();
  return compiled;
}

std::vector<int32_t> AllowedIds(const std::vector<uint32_t>& mask) {
  std::vector<int32_t> ids;
  for (size_t w = 0; w < mask.size(); ++w)
    for (uint32_t bits = mask[w]; bits != 0; bits &= bits - 1)
      ids.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(__builtin_ctz(bits))));
  return ids;
}

struct Walk {
  std::string bytes;
  bool ended_with_eos = false;
};

// A random walk through the masks: at each step one allowed token, chosen by rapidcheck.
Walk RandomWalk(const std::shared_ptr<TokenGrammar>& grammar, int max_steps) {
  TokenMatcher m(grammar, {kImEnd});
  std::vector<uint32_t> mask(m.mask_words());
  Walk walk;
  for (int step = 0; step < max_steps; ++step) {
    m.FillNextTokenBitmask(mask);
    std::vector<int32_t> allowed = AllowedIds(mask);
    if (allowed.empty()) break;
    int32_t id = allowed[*rc::gen::inRange<size_t>(0, allowed.size())];
    RC_ASSERT(m.AcceptToken(id));
    if (id == kImEnd) {
      walk.ended_with_eos = true;
      break;
    }
    walk.bytes += Qwen().TokenBytes(id);
  }
  return walk;
}

RC_GTEST_PROP(TokenMatcherProperty, AllowedTokenPathsSpellAcceptedStrings, ()) {
  const auto& grammars = Compiled();
  size_t g = *rc::gen::inRange<size_t>(0, grammars.size());
  Walk walk = RandomWalk(grammars[g], 12);
  RC_TAG(walk.ended_with_eos ? "complete" : "prefix");
  GrammarMatcher chars(grammars[g]->grammar());
  RC_ASSERT(chars.Accept(walk.bytes));  // a valid prefix, byte by byte
  if (walk.ended_with_eos) RC_ASSERT(chars.IsComplete());
}

RC_GTEST_PROP(TokenMatcherProperty, AcceptedStringsHaveAnAllowedTokenPath, ()) {
  const auto& grammars = Compiled();
  size_t g = *rc::gen::inRange<size_t>(0, grammars.size());
  Walk walk = RandomWalk(grammars[g], 12);
  RC_PRE(walk.ended_with_eos);  // a complete string the grammar accepts
  TokenMatcher m(grammars[g], {kImEnd});
  std::vector<uint32_t> mask(m.mask_words());
  for (int32_t id : Qwen().Encode(walk.bytes)) {
    m.FillNextTokenBitmask(mask);
    RC_ASSERT(((mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u) == 1u);
    RC_ASSERT(m.AcceptToken(id));
  }
  RC_ASSERT(m.IsComplete());
}

const nlohmann::ordered_json& AlarmTools() {
  static const auto tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "set_alarm",
    "strict": true, "parameters": {"type": "object", "properties": {
      "hour": {"type": "integer", "minimum": 0, "maximum": 23}, "loud": {"type": "boolean"},
      "mode": {"enum": ["beep", "ring"]}, "label": {"type": "string", "maxLength": 6},
      "at": {"$ref": "#/$defs/day"}},
    "$defs": {"day": {"type": "object", "properties": {"d": {"type": "integer", "minimum": 1, "maximum": 31}},
                      "required": ["d"], "additionalProperties": false}},
    "required": ["hour", "loud"], "additionalProperties": false}}}])");
  return tools;
}

RC_GTEST_PROP(TokenMatcherProperty, XmlToolCallsTheMasksAllowParseBackValid, ()) {
  static const auto grammar = std::make_shared<TokenGrammar>(
      std::make_shared<const CompiledGrammar>(ToolCallGrammar(AlarmTools(), ToolCallSyntax::kXml)), Vocab());
  Walk walk = RandomWalk(grammar, 400);
  RC_PRE(walk.ended_with_eos);
  OutputParserOptions options;
  options.tools = AlarmTools();
  ParsedOutput out = ParseOutput("<tool_call>\n" + walk.bytes, options);
  RC_ASSERT(out.tool_calls.size() == 1u);
  RC_ASSERT(out.content.empty());
  RC_ASSERT(out.tool_calls[0].name == "set_alarm");
  const auto args = nlohmann::json::parse(out.tool_calls[0].arguments);
  RC_TAG(std::to_string(args.size()) + " arguments");
  RC_ASSERT(args.at("hour").is_number_integer());
  RC_ASSERT(args["hour"].get<int>() >= 0 && args["hour"].get<int>() <= 23);
  RC_ASSERT(args.at("loud").is_boolean());
  if (args.contains("mode")) RC_ASSERT(args["mode"] == "beep" || args["mode"] == "ring");
  if (args.contains("label")) RC_ASSERT(args["label"].is_string());
  if (args.contains("at")) {
    RC_ASSERT(args["at"].at("d").is_number_integer());
    RC_ASSERT(args["at"]["d"].get<int>() >= 1 && args["at"]["d"].get<int>() <= 31);
  }
  for (const auto& [key, value] : args.items()) RC_ASSERT(AlarmTools()[0]["function"]["parameters"]["properties"].contains(key));
}

}  // namespace
}  // namespace infernix::grammar
