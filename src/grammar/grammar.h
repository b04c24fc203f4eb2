// Context-free grammars for constrained decoding (docs/grammar.md).
//
// A Grammar is a list of rules; a rule is a list of alternatives; an alternative is a sequence of
// elements, each either a character class (a set of Unicode code points, literals being classes of
// one code point) or a reference to a rule. Groups and repetition (* + ? {m,n}) are lowered to
// helper rules by the front ends, so matchers see only these two element kinds.
//
// Grammars are plain values: immutable once built, safe to share between threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace infernix::grammar {

inline constexpr char32_t kMaxCodePoint = 0x10FFFF;

struct CharRange {
  char32_t lo, hi;  // inclusive
  bool operator==(const CharRange&) const = default;
};

// Sorted, non-overlapping, non-adjacent ranges. Empty: matches nothing.
using CharClass = std::vector<CharRange>;

// Normalizes arbitrary ranges (sorts, merges); `negate` complements over [0, kMaxCodePoint].
CharClass MakeCharClass(std::vector<CharRange> ranges, bool negate);
bool ClassContains(const CharClass& cls, char32_t cp);
// Whether `cls` has a code point in [lo, hi].
bool ClassIntersects(const CharClass& cls, char32_t lo, char32_t hi);

struct Element {
  enum class Kind : uint8_t { kChars, kRule };
  Kind kind;
  uint32_t index;  // kChars: into Grammar::classes; kRule: into Grammar::rules
  bool operator==(const Element&) const = default;
};

using Sequence = std::vector<Element>;

struct Rule {
  std::string name;
  std::vector<Sequence> alternatives;  // an empty sequence matches the empty string
};

struct Grammar {
  std::vector<Rule> rules;
  std::vector<CharClass> classes;
  uint32_t root = 0;

  // The grammar back as GBNF text (helper rules included), for debugging and tests.
  std::string ToString() const;
};

// Builds grammars while deduplicating classes and naming helper rules; used by the front ends.
class GrammarBuilder {
 public:
  uint32_t AddClass(CharClass cls);
  Element Chars(CharClass cls) { return {Element::Kind::kChars, AddClass(std::move(cls))}; }
  Element CodePoint(char32_t cp) { return Chars({{cp, cp}}); }
  // Appends the code points of UTF-8 `text` (which must be valid) to `seq`.
  void AppendLiteral(std::string_view text, Sequence* seq);

  // A rule id for `name`, created (without alternatives) on first use.
  uint32_t RuleId(const std::string& name);
  bool HasRule(const std::string& name) const;
  // A fresh rule named "<base>-<n>" with the given alternatives.
  uint32_t AddHelper(std::string_view base, std::vector<Sequence> alternatives);
  Rule& rule(uint32_t id) { return grammar_.rules[id]; }

  // Repetition of `item` between min and max times (max < 0: unbounded), as helper rules.
  // Returns the sequence to splice where the repeated item stood.
  Sequence Repeat(std::string_view base, const Element& item, int min, int max);

  // Checks the grammar (every rule defined, no left recursion) and returns it. Undefined rules and
  // left recursion throw Error(kInvalidArgument) naming the rule.
  Grammar Finish(uint32_t root);

  const Grammar& grammar() const { return grammar_; }

 private:
  Grammar grammar_;
  std::vector<std::pair<CharClass, uint32_t>> class_index_;  // sorted by class for lookup
  std::unordered_map<std::string, uint32_t> rule_index_;     // rule name -> id (a large schema has thousands)
};

// A rule that can reach itself without consuming input (left recursion, which the pushdown matcher
// cannot run): {the rule, the rule through which it recurs}; nullopt when there is none.
std::optional<std::pair<uint32_t, uint32_t>> FindLeftRecursion(const Grammar& grammar);
// Throws Error(kInvalidArgument) naming the rule if FindLeftRecursion finds one; `where` (e.g.
// "line 3, column 1: ") is put before the message.
void CheckNoLeftRecursion(const Grammar& grammar, std::string_view where = "");

}  // namespace infernix::grammar
