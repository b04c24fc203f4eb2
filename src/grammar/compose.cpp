#include "grammar/compose.h"

#include "base/check.h"

namespace infernix::grammar {
namespace {

// Appends `from`'s rules and classes to `to`, shifting indices; returns the new index of from's root.
uint32_t Append(Grammar& to, const Grammar& from) {
  const uint32_t rule_offset = static_cast<uint32_t>(to.rules.size());
  const uint32_t class_offset = static_cast<uint32_t>(to.classes.size());
  to.classes.insert(to.classes.end(), from.classes.begin(), from.classes.end());
  for (const Rule& r : from.rules) {
    Rule copy = r;
    for (Sequence& seq : copy.alternatives)
      for (Element& e : seq) e.index += e.kind == Element::Kind::kRule ? rule_offset : class_offset;
    to.rules.push_back(std::move(copy));
  }
  return from.root + rule_offset;
}

void AppendLiteral(Grammar& g, std::string_view text, Sequence* seq) {
  GrammarBuilder scratch;
  Sequence lit;
  scratch.AppendLiteral(text, &lit);
  for (Element e : lit) {
    g.classes.push_back(scratch.grammar().classes[e.index]);
    seq->push_back(Element{Element::Kind::kChars, static_cast<uint32_t>(g.classes.size() - 1)});
  }
}

}  // namespace

Grammar Surround(const Grammar& g, std::string_view prefix, std::string_view suffix) {
  Grammar out;
  uint32_t inner = Append(out, g);
  Sequence seq;
  AppendLiteral(out, prefix, &seq);
  seq.push_back(Element{Element::Kind::kRule, inner});
  AppendLiteral(out, suffix, &seq);
  out.rules.push_back(Rule{"surround", {std::move(seq)}});
  out.root = static_cast<uint32_t>(out.rules.size() - 1);
  return out;
}

Grammar Union(const std::vector<Grammar>& grammars) {
  INFX_CHECK(!grammars.empty());
  Grammar out;
  Rule root{"union", {}};
  for (const Grammar& g : grammars) root.alternatives.push_back({Element{Element::Kind::kRule, Append(out, g)}});
  out.rules.push_back(std::move(root));
  out.root = static_cast<uint32_t>(out.rules.size() - 1);
  return out;
}

}  // namespace infernix::grammar
