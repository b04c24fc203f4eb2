// Character-level grammar matching: a pushdown recognizer over UTF-8 bytes (docs/grammar.md).
//
// A state is a set of parse stacks. A stack is a persistent linked list of grammar positions
// (hash-consed in a StackEngine, so a stack is one uint32_t id and equal stacks have equal ids);
// its top is always a character class to match next, or the stack is empty (id 0: the input so far
// is a complete sentence). Rule references are expanded when a stack is created; a reference in
// tail position replaces the caller's frame (so right recursion, which repetition lowers to, runs
// in constant depth). Left recursion is refused when the grammar is built.
//
// Bytes are consumed one at a time: a partial UTF-8 character is kept in the state and stacks whose
// class cannot contain any completion of it are dropped early (that prunes the vocabulary trie).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace infernix::grammar {

// A grammar flattened for matching. Immutable; share one between matchers (and threads).
class CompiledGrammar {
 public:
  explicit CompiledGrammar(const Grammar& grammar);

  enum class Kind : uint8_t { kChars, kRule, kEnd };
  struct Item {
    Kind kind;
    uint32_t index;  // kChars: class; kRule: rule
  };
  const std::vector<Item>& items() const { return items_; }
  const std::vector<uint32_t>& alternatives(uint32_t rule) const { return alt_starts_[rule]; }
  uint32_t root() const { return root_; }
  bool Matches(uint32_t cls, char32_t cp) const {
    if (cp < 128) return (ascii_[cls][cp >> 6] >> (cp & 63)) & 1;
    return ClassContains(classes_[cls], cp);
  }
  bool Intersects(uint32_t cls, char32_t lo, char32_t hi) const { return ClassIntersects(classes_[cls], lo, hi); }
  // Whether the class holds every code point of [lo, hi] (false negatives allowed).
  bool Covers(uint32_t cls, char32_t lo, char32_t hi) const;

 private:
  std::vector<Item> items_;                       // every alternative, each closed by kEnd
  std::vector<std::vector<uint32_t>> alt_starts_;  // per rule: item index of each alternative
  std::vector<CharClass> classes_;
  std::vector<std::array<uint64_t, 2>> ascii_;  // per class: membership of code points < 128
  uint32_t root_;
};

struct MatchState {
  std::vector<uint32_t> stacks;  // sorted stack ids; 0 = the empty (accepting) stack
  uint32_t partial = 0;          // bits of a partially read UTF-8 character
  uint8_t need = 0;              // continuation bytes still expected (0: on a character boundary)
  uint8_t total = 0;             // length of the partial character's encoding
  bool operator==(const MatchState&) const = default;
  // A byte key identifying the state within one StackEngine (for mask caches).
  std::string Key() const;
};

// The stack store of one matcher: interns stacks and memoizes their expansion. Not thread-safe.
class StackEngine {
 public:
  explicit StackEngine(std::shared_ptr<const CompiledGrammar> grammar);

  MatchState Initial();
  // The state after one more byte; false (with *out unspecified) if no stack can take it.
  bool StepByte(const MatchState& in, uint8_t byte, MatchState* out);
  static bool IsComplete(const MatchState& s) { return s.need == 0 && !s.stacks.empty() && s.stacks[0] == 0; }
  // Whether `s` is mid-character, every stack's class holds every completion of the bytes so far,
  // and the next byte's validity checks do not depend on them (not after the leads E0, ED, F0, F4):
  // then what follows does not depend on s.partial (every valid completion is matched by every
  // stack), so states differing only in it step alike.
  bool PartialIsIrrelevant(const MatchState& s) const;
  size_t num_stacks() const { return nodes_.size(); }

  // The frontier: a stand-in for "the rest of the stack, unknown". A stack cut below its top
  // `depth` frames ends in it instead of its real bottom; a run that pops down to it yields the
  // frontier (id 1) as a stack, which matches nothing. Masks are computed per cut stack (context-
  // independent) and only the tokens that reach the frontier are rechecked in context.
  static constexpr uint32_t kFrontier = 1;
  // `stack` with everything below its top `depth` frames replaced by the frontier (itself when it
  // is no deeper than that).
  uint32_t Truncate(uint32_t stack, int depth);
  // The grammar positions of `stack`, top first (then a frontier mark if it ends in one): a key
  // that means the same stack in every StackEngine of the grammar.
  std::string StackKey(uint32_t stack) const;
  // Whether the top of `stack` (a class) is the last item of its alternative: after one character
  // a run pops to the frame below.
  bool TopEndsAlternative(uint32_t stack) const {
    return stack > kFrontier && grammar_->items()[nodes_[stack].pos + 1].kind == CompiledGrammar::Kind::kEnd;
  }

 private:
  struct Node {
    uint32_t pos;     // item index of the stack top
    uint32_t parent;  // stack below; 0 = none
  };
  uint32_t Intern(uint32_t pos, uint32_t parent);
  // The stacks with a class on top (or 0) that `node` expands to, appended to *out.
  void Expand(uint32_t node, std::vector<uint32_t>* out);
  // The expansion of `node` after its top class matched (memoized): [begin, end) into results_.
  std::pair<uint32_t, uint32_t> AfterMatch(uint32_t node);
  bool StepCodePoint(const std::vector<uint32_t>& stacks, char32_t cp, std::vector<uint32_t>* out);

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> intern_;
  std::vector<std::pair<uint32_t, uint32_t>> after_match_;  // per node; begin == UINT32_MAX: not yet
  std::vector<uint32_t> results_;
  // Scratch of Expand: its work list, and per node the last Expand call (stamp) that reached it.
  std::vector<uint32_t> work_, seen_at_;
  uint32_t stamp_ = 0;
};

// Matches text against a grammar incrementally, with undo.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Consumes `bytes` (any UTF-8 fragment) as one step; false and no change if the grammar cannot
  // continue with them. An empty string is a step that changes nothing.
  bool Accept(std::string_view bytes);
  bool AcceptCodePoint(char32_t cp);
  // Whether the input so far is a complete sentence of the grammar.
  bool IsComplete() const { return StackEngine::IsComplete(history_.back()); }
  // Whether some continuation is possible (false only when the grammar itself is empty-ended).
  bool CanContinue() const;
  // Undoes the last n steps. Throws Error(kInvalidArgument) if fewer were taken.
  void Rollback(size_t n);
  size_t num_steps() const { return history_.size() - 1; }

  const MatchState& state() const { return history_.back(); }
  StackEngine& engine() { return engine_; }
  void Push(MatchState state) { history_.push_back(std::move(state)); }

 private:
  StackEngine engine_;
  std::vector<MatchState> history_;  // history_[0]: the initial state
};

}  // namespace infernix::grammar
