#include "grammar/grammar.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "base/check.h"
#include "base/error.h"

namespace infernix::grammar {

CharClass MakeCharClass(std::vector<CharRange> ranges, bool negate) {
  std::sort(ranges.begin(), ranges.end(),
            [](const CharRange& a, const CharRange& b) { return a.lo < b.lo || (a.lo == b.lo && a.hi < b.hi); });
  CharClass merged;
  for (const CharRange& r : ranges) {
    if (r.lo > r.hi) continue;
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  if (!negate) return merged;
  CharClass complement;
  char32_t next = 0;
  for (const CharRange& r : merged) {
    if (r.lo > next) complement.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) complement.push_back({next, kMaxCodePoint});
  return complement;
}

bool ClassIntersects(const CharClass& cls, char32_t lo, char32_t hi) {
  // The first range whose end is >= lo.
  auto it = std::lower_bound(cls.begin(), cls.end(), lo, [](const CharRange& r, char32_t v) { return r.hi < v; });
  return it != cls.end() && it->lo <= hi;
}

bool ClassContains(const CharClass& cls, char32_t cp) { return ClassIntersects(cls, cp, cp); }

namespace {

std::string EscapeCodePoint(char32_t cp, bool in_class) {
  switch (cp) {
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\\': return "\\\\";
    default: break;
  }
  if (!in_class && cp == '"') return "\\\"";
  if (in_class && (cp == ']' || cp == '-' || cp == '^' || cp == '[')) return std::string("\\") + char(cp);
  if (cp < 0x20 || cp == 0x7F || cp > 0x7E) return cp <= 0xFFFF ? fmt::format("\\u{:04X}", uint32_t(cp))
                                                                  : fmt::format("\\U{:08X}", uint32_t(cp));
  return std::string(1, char(cp));
}

}  // namespace

std::string Grammar::ToString() const {
  std::string out;
  for (const Rule& rule : rules) {
    out += rule.name + " ::=";
    for (size_t a = 0; a < rule.alternatives.size(); ++a) {
      if (a > 0) out += " |";
      if (rule.alternatives[a].empty()) out += " \"\"";
      for (const Element& e : rule.alternatives[a]) {
        out += ' ';
        if (e.kind == Element::Kind::kRule) {
          out += rules[e.index].name;
          continue;
        }
        const CharClass& cls = classes[e.index];
        if (cls.size() == 1 && cls[0].lo == cls[0].hi) {
          out += '"' + EscapeCodePoint(cls[0].lo, false) + '"';
          continue;
        }
        out += '[';
        for (const CharRange& r : cls) {
          out += EscapeCodePoint(r.lo, true);
          if (r.hi != r.lo) out += '-' + EscapeCodePoint(r.hi, true);
        }
        out += ']';
      }
    }
    out += '\n';
  }
  return out;
}

uint32_t GrammarBuilder::AddClass(CharClass cls) {
  auto less = [](const std::pair<CharClass, uint32_t>& entry, const CharClass& c) {
    return std::lexicographical_compare(entry.first.begin(), entry.first.end(), c.begin(), c.end(),
                                        [](const CharRange& a, const CharRange& b) {
                                          return a.lo < b.lo || (a.lo == b.lo && a.hi < b.hi);
                                        });
  };
  auto it = std::lower_bound(class_index_.begin(), class_index_.end(), cls, less);
  if (it != class_index_.end() && it->first == cls) return it->second;
  const auto id = static_cast<uint32_t>(grammar_.classes.size());
  grammar_.classes.push_back(cls);
  class_index_.insert(it, {std::move(cls), id});
  return id;
}

void GrammarBuilder::AppendLiteral(std::string_view text, Sequence* seq) {
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const int len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    char32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < len && i + k < text.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    seq->push_back(CodePoint(cp));
    i += len;
  }
}

uint32_t GrammarBuilder::RuleId(const std::string& name) {
  const auto [it, added] = rule_index_.try_emplace(name, static_cast<uint32_t>(grammar_.rules.size()));
  if (added) grammar_.rules.push_back({name, {}});
  return it->second;
}

bool GrammarBuilder::HasRule(const std::string& name) const { return rule_index_.count(name) != 0; }

uint32_t GrammarBuilder::AddHelper(std::string_view base, std::vector<Sequence> alternatives) {
  std::string name;
  for (int n = static_cast<int>(grammar_.rules.size());; ++n) {
    name = fmt::format("{}-{}", base, n);
    if (!HasRule(name)) break;
  }
  rule_index_.emplace(name, static_cast<uint32_t>(grammar_.rules.size()));
  grammar_.rules.push_back({std::move(name), std::move(alternatives)});
  return static_cast<uint32_t>(grammar_.rules.size() - 1);
}

Sequence GrammarBuilder::Repeat(std::string_view base, const Element& item, int min, int max) {
  INFX_CHECK(min >= 0 && (max < 0 || max >= min));
  Sequence seq(static_cast<size_t>(min), item);
  if (max < 0) {
    // star ::= item star | ""   (right recursion: the matcher runs it in constant stack depth)
    const uint32_t star = AddHelper(base, {});
    grammar_.rules[star].alternatives = {{item, {Element::Kind::kRule, star}}, {}};
    seq.push_back({Element::Kind::kRule, star});
  } else if (max > min) {
    // opt_k ::= item opt_{k-1} | ""   with opt_1 ::= item | ""
    uint32_t opt = AddHelper(base, {{item}, {}});
    for (int k = 2; k <= max - min; ++k) opt = AddHelper(base, {{item, {Element::Kind::kRule, opt}}, {}});
    seq.push_back({Element::Kind::kRule, opt});
  }
  return seq;
}

Grammar GrammarBuilder::Finish(uint32_t root) {
  for (const Rule& rule : grammar_.rules) {
    if (rule.alternatives.empty()) ThrowError(ErrorCode::kInvalidArgument, "grammar: rule '{}' is not defined", rule.name);
  }
  INFX_CHECK(root < grammar_.rules.size());
  grammar_.root = root;
  CheckNoLeftRecursion(grammar_);
  return grammar_;
}

std::optional<std::pair<uint32_t, uint32_t>> FindLeftRecursion(const Grammar& grammar) {
  const size_t n = grammar.rules.size();
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const Sequence& alt : grammar.rules[r].alternatives) {
        const bool all = std::all_of(alt.begin(), alt.end(), [&](const Element& e) {
          return e.kind == Element::Kind::kRule && nullable[e.index];
        });
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  // Left-corner edges: A -> B when B can be the first thing A's alternative expands.
  std::vector<std::vector<uint32_t>> edges(n);
  for (size_t r = 0; r < n; ++r) {
    for (const Sequence& alt : grammar.rules[r].alternatives) {
      for (const Element& e : alt) {
        if (e.kind != Element::Kind::kRule) break;
        edges[r].push_back(e.index);
        if (!nullable[e.index]) break;
      }
    }
  }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the DFS path, 2 done
  std::optional<std::pair<uint32_t, uint32_t>> found;
  std::function<void(uint32_t)> visit = [&](uint32_t r) {
    color[r] = 1;
    for (uint32_t next : edges[r]) {
      if (found) return;
      if (color[next] == 1) {
        found = std::make_pair(next, r);
        return;
      }
      if (color[next] == 0) visit(next);
    }
    color[r] = 2;
  };
  for (uint32_t r = 0; r < n && !found; ++r) {
    if (color[r] == 0) visit(r);
  }
  return found;
}

void CheckNoLeftRecursion(const Grammar& grammar, std::string_view where) {
  if (auto found = FindLeftRecursion(grammar)) {
    ThrowError(ErrorCode::kInvalidArgument,
               "grammar: {}rule '{}' is left-recursive (it can reach itself through '{}' without consuming "
               "input); rewrite it with repetition, e.g. x ::= y (\"op\" y)*",
               where, grammar.rules[found->first].name, grammar.rules[found->second].name);
  }
}

}  // namespace infernix::grammar
