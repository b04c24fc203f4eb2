#include "grammar/compose.h"

#include <algorithm>

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

Grammar Literal(std::string_view text) {
  Grammar out;
  Sequence seq;
  AppendLiteral(out, text, &seq);
  out.rules.push_back(Rule{"literal", {std::move(seq)}});
  out.root = 0;
  return out;
}

Grammar Concat(const std::vector<Grammar>& parts) {
  Grammar out;
  Sequence seq;
  for (const Grammar& g : parts) seq.push_back(Element{Element::Kind::kRule, Append(out, g)});
  out.rules.push_back(Rule{"concat", {std::move(seq)}});
  out.root = static_cast<uint32_t>(out.rules.size() - 1);
  return out;
}

Grammar Optional(const Grammar& g) {
  Grammar out;
  uint32_t inner = Append(out, g);
  out.rules.push_back(Rule{"optional", {{Element{Element::Kind::kRule, inner}}, {}}});
  out.root = static_cast<uint32_t>(out.rules.size() - 1);
  return out;
}

Grammar ZeroOrMore(const Grammar& g) {
  Grammar out;
  uint32_t inner = Append(out, g);
  const auto self = static_cast<uint32_t>(out.rules.size());
  out.rules.push_back(Rule{"zero-or-more", {{Element{Element::Kind::kRule, inner}, Element{Element::Kind::kRule, self}}, {}}});
  out.root = self;
  return out;
}

Grammar TextExcluding(std::string_view stop) {
  // The code points of `stop` (AppendLiteral decodes and validates the UTF-8).
  GrammarBuilder scratch;
  Sequence lit;
  scratch.AppendLiteral(stop, &lit);
  std::vector<char32_t> s;
  for (Element e : lit) s.push_back(scratch.grammar().classes[e.index].front().lo);
  INFX_CHECK(!s.empty());
  const size_t n = s.size();
  // prefix[i]: the length of the longest proper border of s[0..i].
  std::vector<size_t> prefix(n, 0);
  for (size_t i = 1; i < n; ++i) {
    size_t k = prefix[i - 1];
    while (k > 0 && s[i] != s[k]) k = prefix[k - 1];
    prefix[i] = s[i] == s[k] ? k + 1 : 0;
  }
  // next(state, c): the matched length after reading c with `state` code points of stop matched.
  auto next = [&](size_t state, char32_t c) {
    for (;;) {
      if (s[state] == c) return state + 1;
      if (state == 0) return size_t{0};
      state = prefix[state - 1];
    }
  };
  std::vector<char32_t> distinct = s;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::vector<CharRange> others;
  for (char32_t c : distinct) others.push_back({c, c});

  Grammar out;
  out.classes.push_back(MakeCharClass(others, /*negate=*/true));  // class 0: none of stop's code points
  for (char32_t c : distinct) out.classes.push_back(CharClass{{c, c}});
  for (size_t state = 0; state < n; ++state) {
    Rule r{"text-excluding-" + std::to_string(state), {{}}};  // "" : the text may end here
    r.alternatives.push_back({Element{Element::Kind::kChars, 0}, Element{Element::Kind::kRule, 0}});
    for (size_t i = 0; i < distinct.size(); ++i) {
      size_t to = next(state, distinct[i]);
      if (to == n) continue;  // would complete stop
      r.alternatives.push_back({Element{Element::Kind::kChars, static_cast<uint32_t>(i + 1)},
                                Element{Element::Kind::kRule, static_cast<uint32_t>(to)}});
    }
    out.rules.push_back(std::move(r));
  }
  out.root = 0;
  return out;
}

}  // namespace infernix::grammar
