#include "grammar/matcher.h"

#include <algorithm>

#include "base/check.h"
#include "base/error.h"
#include "tokenizer/utf8.h"

namespace infernix::grammar {

CompiledGrammar::CompiledGrammar(const Grammar& grammar) : classes_(grammar.classes), root_(grammar.root) {
  INFX_CHECK(grammar.root < grammar.rules.size());
  alt_starts_.resize(grammar.rules.size());
  for (size_t r = 0; r < grammar.rules.size(); ++r) {
    for (const Sequence& alt : grammar.rules[r].alternatives) {
      alt_starts_[r].push_back(static_cast<uint32_t>(items_.size()));
      for (const Element& e : alt) {
        items_.push_back({e.kind == Element::Kind::kChars ? Kind::kChars : Kind::kRule, e.index});
      }
      items_.push_back({Kind::kEnd, 0});
    }
  }
  ascii_.resize(classes_.size());
  for (size_t c = 0; c < classes_.size(); ++c) {
    ascii_[c] = {0, 0};
    for (char32_t cp = 0; cp < 128; ++cp) {
      if (ClassContains(classes_[c], cp)) ascii_[c][cp >> 6] |= uint64_t{1} << (cp & 63);
    }
  }
}

bool CompiledGrammar::Covers(uint32_t cls, char32_t lo, char32_t hi) const {
  const CharClass& c = classes_[cls];
  auto it = std::lower_bound(c.begin(), c.end(), lo, [](const CharRange& r, char32_t v) { return r.hi < v; });
  return it != c.end() && it->lo <= lo && it->hi >= hi;
}

std::string MatchState::Key() const {
  std::string key(reinterpret_cast<const char*>(stacks.data()), stacks.size() * sizeof(uint32_t));
  key.append(reinterpret_cast<const char*>(&partial), sizeof(partial));
  key.push_back(static_cast<char>(need));
  key.push_back(static_cast<char>(total));
  return key;
}

StackEngine::StackEngine(std::shared_ptr<const CompiledGrammar> grammar) : grammar_(std::move(grammar)) {
  nodes_.push_back({UINT32_MAX, 0});  // id 0: the empty stack
  nodes_.push_back({UINT32_MAX - 1, 0});  // id 1: the frontier
  after_match_.assign(2, {UINT32_MAX, 0});
}

uint32_t StackEngine::Truncate(uint32_t stack, int depth) {
  std::vector<uint32_t> frames;
  for (uint32_t n = stack; n > kFrontier; n = nodes_[n].parent) {
    if (static_cast<int>(frames.size()) == depth) {
      uint32_t cut = kFrontier;
      for (auto it = frames.rbegin(); it != frames.rend(); ++it) cut = Intern(nodes_[*it].pos, cut);
      return cut;
    }
    frames.push_back(n);
  }
  return stack;
}

uint32_t StackEngine::Intern(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  auto [it, inserted] = intern_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (inserted) {
    nodes_.push_back({pos, parent});
    after_match_.push_back({UINT32_MAX, 0});
  }
  return it->second;
}

std::string StackEngine::StackKey(uint32_t stack) const {
  std::string key;
  uint32_t n = stack;
  for (; n > kFrontier; n = nodes_[n].parent) key.append(reinterpret_cast<const char*>(&nodes_[n].pos), sizeof(uint32_t));
  if (n == kFrontier) key.append(4, '\xFF');
  return key;
}

void StackEngine::Expand(uint32_t node, std::vector<uint32_t>* out) {
  const auto& items = grammar_->items();
  work_.assign(1, node);
  if (++stamp_ == 0) {  // wrapped: forget every old stamp
    std::fill(seen_at_.begin(), seen_at_.end(), 0);
    stamp_ = 1;
  }
  while (!work_.empty()) {
    const uint32_t n = work_.back();
    work_.pop_back();
    if (n >= seen_at_.size()) seen_at_.resize(std::max<size_t>(nodes_.size(), n + 1), 0);
    if (seen_at_[n] == stamp_) continue;
    seen_at_[n] = stamp_;
    if (n == 0 || n == kFrontier) {
      out->push_back(n);
      continue;
    }
    const Node nd = nodes_[n];
    const CompiledGrammar::Item& item = items[nd.pos];
    switch (item.kind) {
      case CompiledGrammar::Kind::kChars:
        out->push_back(n);
        break;
      case CompiledGrammar::Kind::kEnd:
        work_.push_back(nd.parent);
        break;
      case CompiledGrammar::Kind::kRule: {
        // A reference in tail position returns straight to the caller's caller.
        const uint32_t base =
            items[nd.pos + 1].kind == CompiledGrammar::Kind::kEnd ? nd.parent : Intern(nd.pos + 1, nd.parent);
        for (uint32_t start : grammar_->alternatives(item.index)) work_.push_back(Intern(start, base));
        break;
      }
    }
  }
}

std::pair<uint32_t, uint32_t> StackEngine::AfterMatch(uint32_t node) {
  if (after_match_[node].first != UINT32_MAX) return after_match_[node];
  std::vector<uint32_t> expanded;
  const Node nd = nodes_[node];
  Expand(Intern(nd.pos + 1, nd.parent), &expanded);
  std::sort(expanded.begin(), expanded.end());
  expanded.erase(std::unique(expanded.begin(), expanded.end()), expanded.end());
  const auto begin = static_cast<uint32_t>(results_.size());
  results_.insert(results_.end(), expanded.begin(), expanded.end());
  after_match_[node] = {begin, static_cast<uint32_t>(results_.size())};
  return after_match_[node];
}

MatchState StackEngine::Initial() {
  MatchState state;
  for (uint32_t start : grammar_->alternatives(grammar_->root())) Expand(Intern(start, 0), &state.stacks);
  std::sort(state.stacks.begin(), state.stacks.end());
  state.stacks.erase(std::unique(state.stacks.begin(), state.stacks.end()), state.stacks.end());
  return state;
}

bool StackEngine::StepCodePoint(const std::vector<uint32_t>& stacks, char32_t cp, std::vector<uint32_t>* out) {
  out->clear();
  int sources = 0;
  for (uint32_t s : stacks) {
    if (s <= kFrontier) continue;
    if (!grammar_->Matches(grammar_->items()[nodes_[s].pos].index, cp)) continue;
    auto [begin, end] = AfterMatch(s);
    out->insert(out->end(), results_.begin() + begin, results_.begin() + end);
    ++sources;
  }
  if (sources > 1) {
    std::sort(out->begin(), out->end());
    out->erase(std::unique(out->begin(), out->end()), out->end());
  }
  return !out->empty();
}

bool StackEngine::StepByte(const MatchState& in, uint8_t byte, MatchState* out) {
  if (in.need == 0) {
    out->partial = 0;
    out->need = out->total = 0;
    if (byte < 0x80) return StepCodePoint(in.stacks, byte, &out->stacks);
    uint8_t total;
    if (byte >= 0xC2 && byte <= 0xDF) {
      total = 2;
    } else if (byte >= 0xE0 && byte <= 0xEF) {
      total = 3;
    } else if (byte >= 0xF0 && byte <= 0xF4) {
      total = 4;
    } else {
      return false;
    }
    out->partial = byte & (total == 2 ? 0x1F : total == 3 ? 0x0F : 0x07);
    out->need = total - 1;
    out->total = total;
  } else {
    if ((byte & 0xC0) != 0x80) return false;
    if (in.need == in.total - 1) {  // the first continuation byte: rule out overlongs and surrogates
      if (in.total == 3 && in.partial == 0 && byte < 0xA0) return false;
      if (in.total == 3 && in.partial == 0xD && byte > 0x9F) return false;
      if (in.total == 4 && in.partial == 0 && byte < 0x90) return false;
      if (in.total == 4 && in.partial == 4 && byte > 0x8F) return false;
    }
    out->partial = (in.partial << 6) | (byte & 0x3F);
    out->need = in.need - 1;
    out->total = in.total;
    if (out->need == 0) {
      const char32_t cp = out->partial;
      out->partial = 0;
      out->total = 0;
      return StepCodePoint(in.stacks, cp, &out->stacks);
    }
  }
  // Mid-character: keep the stacks whose class holds some completion of the bytes so far.
  // Completions of a partial sequence span [lo, hi], clamped to what a sequence of this length can
  // encode (no overlong forms: a 4-byte lead 0xF0 alone means at least U+10000, not U+0000).
  const int shift = 6 * out->need;
  static constexpr char32_t kMinOfLength[5] = {0, 0, 0x80, 0x800, 0x10000};
  const char32_t lo = std::max<char32_t>(out->partial << shift, kMinOfLength[out->total]);
  const char32_t hi = std::min<char32_t>((out->partial << shift) | ((char32_t{1} << shift) - 1), 0x10FFFF);
  out->stacks.clear();
  for (uint32_t s : in.stacks) {
    if (s > kFrontier && grammar_->Intersects(grammar_->items()[nodes_[s].pos].index, lo, hi)) out->stacks.push_back(s);
  }
  return !out->stacks.empty();
}

bool StackEngine::PartialIsIrrelevant(const MatchState& s) const {
  if (s.need == 0) return false;
  if (s.need + 1 == s.total) {  // the first continuation byte is next: its checks depend on these leads
    if (s.total == 3 && (s.partial == 0 || s.partial == 0xD)) return false;
    if (s.total == 4 && (s.partial == 0 || s.partial == 4)) return false;
  }
  const int shift = 6 * s.need;
  const char32_t lo = s.partial << shift;
  const char32_t hi = std::min<char32_t>(lo | ((char32_t{1} << shift) - 1), 0x10FFFF);
  for (uint32_t id : s.stacks) {
    if (id <= kFrontier || !grammar_->Covers(grammar_->items()[nodes_[id].pos].index, lo, hi)) return false;
  }
  return true;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar) : engine_(std::move(grammar)) {
  history_.push_back(engine_.Initial());
}

bool GrammarMatcher::Accept(std::string_view bytes) {
  MatchState current = history_.back(), next;
  for (char c : bytes) {
    if (!engine_.StepByte(current, static_cast<uint8_t>(c), &next)) return false;
    std::swap(current, next);
  }
  history_.push_back(std::move(current));
  return true;
}

bool GrammarMatcher::AcceptCodePoint(char32_t cp) {
  INFX_CHECK(cp <= kMaxCodePoint);
  std::string bytes;
  utf8::Append(cp, &bytes);
  return Accept(bytes);
}

bool GrammarMatcher::CanContinue() const {
  const MatchState& s = history_.back();
  return s.need > 0 || std::any_of(s.stacks.begin(), s.stacks.end(), [](uint32_t id) { return id != 0; });
}

void GrammarMatcher::Rollback(size_t n) {
  if (n > num_steps()) {
    ThrowError(ErrorCode::kInvalidArgument, "grammar matcher: cannot roll back {} steps, only {} taken", n, num_steps());
  }
  history_.resize(history_.size() - n);
}

}  // namespace infernix::grammar
