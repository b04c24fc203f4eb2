#include "grammar/compose.h"

#include <algorithm>
#include <map>

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

Grammar TextExcluding(std::string_view stop) { return TextExcluding(std::vector<std::string_view>{stop}); }

Grammar TextExcluding(const std::vector<std::string_view>& stops) {
  // The Aho-Corasick automaton of the stops: trie nodes, failure links, and `out` for nodes whose
  // text ends with a stop. The text is in the language while the automaton avoids `out` nodes.
  std::vector<std::map<char32_t, uint32_t>> next(1);
  std::vector<bool> out(1, false);
  std::vector<char32_t> alphabet;
  for (std::string_view stop : stops) {
    GrammarBuilder scratch;
    Sequence lit;
    scratch.AppendLiteral(stop, &lit);  // decodes (and checks) the UTF-8
    INFX_CHECK(!lit.empty());
    uint32_t node = 0;
    for (Element e : lit) {
      const char32_t c = scratch.grammar().classes[e.index].front().lo;
      alphabet.push_back(c);
      auto it = next[node].find(c);
      if (it == next[node].end()) {
        it = next[node].emplace(c, static_cast<uint32_t>(next.size())).first;
        next.emplace_back();
        out.push_back(false);
      }
      node = it->second;
    }
    out[node] = true;
  }
  std::sort(alphabet.begin(), alphabet.end());
  alphabet.erase(std::unique(alphabet.begin(), alphabet.end()), alphabet.end());
  // Breadth-first: complete the transitions (goto through failure links) and propagate `out`.
  const size_t n = next.size();
  std::vector<uint32_t> fail(n, 0);
  std::vector<std::vector<uint32_t>> delta(n, std::vector<uint32_t>(alphabet.size(), 0));
  std::vector<uint32_t> queue{0};
  for (size_t qi = 0; qi < queue.size(); ++qi) {
    const uint32_t u = queue[qi];
    if (u != 0) out[u] = out[u] || out[fail[u]];
    for (size_t k = 0; k < alphabet.size(); ++k) {
      auto it = next[u].find(alphabet[k]);
      if (it != next[u].end()) {
        const uint32_t v = it->second;
        fail[v] = u == 0 ? 0 : delta[fail[u]][k];
        delta[u][k] = v;
        queue.push_back(v);
      } else {
        delta[u][k] = u == 0 ? 0 : delta[fail[u]][k];
      }
    }
  }
  // One rule per node that is not `out`, in node order (the root, node 0, is rule 0).
  std::vector<uint32_t> rule_of(n, 0);
  uint32_t rules = 0;
  for (size_t u = 0; u < n; ++u)
    if (!out[u]) rule_of[u] = rules++;
  std::vector<CharRange> in_alphabet;
  for (char32_t c : alphabet) in_alphabet.push_back({c, c});
  Grammar g;
  g.classes.push_back(MakeCharClass(in_alphabet, /*negate=*/true));  // class 0: no stop's code point
  for (char32_t c : alphabet) g.classes.push_back(CharClass{{c, c}});
  for (size_t u = 0; u < n; ++u) {
    if (out[u]) continue;
    Rule r{"text-excluding-" + std::to_string(rule_of[u]), {{}}};  // "": the text may end here
    r.alternatives.push_back({Element{Element::Kind::kChars, 0}, Element{Element::Kind::kRule, 0}});
    for (size_t k = 0; k < alphabet.size(); ++k) {
      const uint32_t v = delta[u][k];
      if (out[v]) continue;  // would complete a stop
      r.alternatives.push_back({Element{Element::Kind::kChars, static_cast<uint32_t>(k + 1)},
                                Element{Element::Kind::kRule, rule_of[v]}});
    }
    g.rules.push_back(std::move(r));
  }
  g.root = 0;
  return g;
}

}  // namespace infernix::grammar
