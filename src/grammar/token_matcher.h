// Token-level grammar matching over a tokenizer's vocabulary (docs/grammar.md).
//
// TokenVocabulary lays every non-special token's bytes out as a trie in preorder. A trie walk
// advances a match state one byte per trie edge and skips a whole subtree as soon as its prefix is
// refused, so the bytes shared by many tokens are checked once.
//
// The mask of a state is the union over its stacks. For each stack, the walk runs once from the
// stack cut to its top frames (StackEngine::Truncate) and is cached: tokens a cut run accepts are
// accepted in any context; tokens rejected before any run reached the frontier are rejected in any
// context; the rest ("uncertain": they pop below the cut) are rechecked one by one from the real
// state. A cut stack's mask is built from the same stack cut one frame shallower (only that one's
// uncertain tokens are re-walked), down to the top grammar position alone, which is a trie walk.
// On top of that, whole masks are cached by match state.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"

namespace infernix {
class Tokenizer;
}

namespace infernix::grammar {

// Immutable after construction; share one per tokenizer between matchers and threads.
class TokenVocabulary {
 public:
  // token_bytes[id]: the raw bytes of token id; special[id]: never allowed by a grammar (only the
  // EOS ids a matcher is given, when the grammar is complete). Tokens with no bytes are never allowed.
  TokenVocabulary(std::vector<std::string> token_bytes, std::vector<bool> special);
  static std::shared_ptr<const TokenVocabulary> FromTokenizer(const Tokenizer& tokenizer);

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  std::string_view bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  bool special(int32_t id) const { return special_[static_cast<size_t>(id)]; }

  struct TrieNode {
    uint8_t byte;           // the edge from the parent
    uint16_t depth;         // the root has depth 0
    uint32_t subtree_end;   // preorder index just past this node's subtree
    uint32_t token_begin;   // tokens whose bytes end here: trie_tokens()[token_begin, token_end)
    uint32_t token_end;
  };
  const std::vector<TrieNode>& trie() const { return trie_; }
  const std::vector<int32_t>& trie_tokens() const { return trie_tokens_; }
  size_t max_depth() const { return max_depth_; }
  // The bytes of trie_tokens()[t], from a buffer laid out in trie order (walks over trie-ordered
  // token lists read it sequentially).
  std::string_view trie_token_bytes(uint32_t t) const {
    return std::string_view(trie_bytes_).substr(trie_offsets_[t], trie_offsets_[t + 1] - trie_offsets_[t]);
  }

 private:
  std::vector<std::string> bytes_;
  std::vector<bool> special_;
  std::vector<TrieNode> trie_;  // preorder; trie_[0] is the root
  std::vector<int32_t> trie_tokens_;
  size_t max_depth_ = 0;
  std::string trie_bytes_;              // the bytes of trie_tokens_, concatenated
  std::vector<uint32_t> trie_offsets_;  // per trie token: where its bytes start; one more at the end
};

// The context-independent part of the mask of one cut stack.
struct StackMask {
  // Accepted whatever lies below the cut: a bitmask, or (when few, to save memory; then the
  // bitmask is empty) the token ids.
  std::vector<uint32_t> accepted;
  std::vector<int32_t> accepted_ids;
  size_t num_accepted = 0;
  // ORs the accepted tokens into `mask` (mask_words() words).
  void OrAcceptedInto(std::vector<uint32_t>* mask) const;
  // Tokens that pop below the cut (recheck in context), as increasing indices into
  // TokenVocabulary::trie_tokens() (trie order).
  std::vector<uint32_t> uncertain;
};

// The compiled form of one (grammar, vocabulary) pair: the per-cut-stack masks, computed on first
// use by whichever matcher needs them and shared by every matcher made from it. Thread-safe; keep
// one per grammar (e.g. in a cache keyed by the grammar text) so requests reuse the work.
class TokenGrammar {
 public:
  TokenGrammar(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const TokenVocabulary> vocab)
      : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {}
  const std::shared_ptr<const CompiledGrammar>& grammar() const { return grammar_; }
  const std::shared_ptr<const TokenVocabulary>& vocab() const { return vocab_; }

  std::shared_ptr<const StackMask> Find(const std::string& stack_key) const;
  // Stores `mask` unless another thread stored one first; returns the stored one.
  std::shared_ptr<const StackMask> Insert(const std::string& stack_key, StackMask mask);
  size_t size() const;
  // Approximate bytes held by the stored masks (for bounding caches of TokenGrammars).
  size_t memory_bytes() const;

 private:
  std::shared_ptr<const CompiledGrammar> grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  mutable std::mutex mutex_;
  size_t memory_bytes_ = 0;
  std::unordered_map<std::string, std::shared_ptr<const StackMask>> masks_;
};

class TokenMatcher {
 public:
  TokenMatcher(std::shared_ptr<TokenGrammar> compiled, std::vector<int32_t> eos_ids);
  // With a TokenGrammar of its own (nothing shared with other matchers).
  TokenMatcher(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const TokenVocabulary> vocab,
               std::vector<int32_t> eos_ids);

  // Words a mask needs: one bit per token id (bit id % 32 of word id / 32).
  size_t mask_words() const { return (static_cast<size_t>(vocab_->size()) + 31) / 32; }
  // Writes the allowed next tokens (1 = allowed) into mask; words past mask_words() are zeroed.
  // After EOS was accepted nothing is allowed. Throws Error(kInvalidArgument) if mask is too short.
  void FillNextTokenBitmask(std::span<uint32_t> mask);
  // Consumes one token; false and no change if the grammar does not allow it.
  bool AcceptToken(int32_t id);
  // Consumes raw bytes as one step, as if a token spelled them (text that reached the output without a
  // mask, e.g. what followed a lazy grammar's trigger in the same token). False and no change if the
  // grammar refuses them or EOS was accepted; empty bytes are a step that changes nothing.
  bool AcceptBytes(std::string_view bytes);
  // Undoes the last n accepted tokens (EOS included). Throws Error(kInvalidArgument) if fewer.
  void Rollback(size_t n);
  bool IsComplete() const { return !terminated_.back() && matcher_.IsComplete(); }
  bool IsTerminated() const { return terminated_.back(); }
  size_t num_accepted() const { return matcher_.num_steps(); }

  // Statistics of the mask cache.
  size_t cache_hits() const { return cache_hits_; }
  size_t cache_misses() const { return cache_misses_; }
  void set_cache_capacity(size_t entries) { cache_capacity_ = entries; }
  const TokenGrammar& compiled() const { return *compiled_; }
  // Frames kept when cutting stacks (0: no per-stack masks, every mask is a full trie walk).
  void set_cut_depth(int depth) { cut_depth_ = depth; }

 private:
  void ComputeMask(const MatchState& state, std::vector<uint32_t>* mask);
  // The plain trie walk from `state` (used mid-character).
  void WalkTrie(const MatchState& state, std::vector<uint32_t>* mask);
  // The mask of `stack` cut to cut_depth_ frames, built level by level (see StackMaskOf in the .cpp).
  std::shared_ptr<const StackMask> StackMaskOf(uint32_t stack);
  // The stored mask of a cut stack (this matcher's, else the TokenGrammar's); else null, *key set.
  std::shared_ptr<const StackMask> LookupStackMask(uint32_t cut_stack, std::string* key);
  // The full trie walk from a cut stack.
  StackMask WalkCutStack(uint32_t cut_stack);
  // The mask of a cut stack from that of the same stack cut one frame shallower.
  StackMask RefineCutStack(uint32_t cut_stack, const StackMask& shallower);
  bool IsEos(int32_t id) const;

  std::shared_ptr<TokenGrammar> compiled_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<int32_t> eos_ids_;
  GrammarMatcher matcher_;
  std::vector<bool> terminated_;     // per step (index 0: initial); true once EOS was accepted
  std::vector<MatchState> scratch_;  // per trie depth
  std::vector<uint8_t> tainted_;     // per trie depth: a run reached the frontier on the path
  // WalkCutStack's tables, kept between calls (a first mask can walk thousands of cut stacks, each
  // meeting a handful of states): the states met, numbered, and their (state, byte) steps.
  struct WalkState {
    bool has_frontier, has_real;
  };
  std::vector<WalkState> walk_info_;
  std::vector<MatchState> walk_states_;
  std::unordered_map<std::string, int32_t> walk_ids_;
  std::vector<int32_t> walk_step_;                                              // per state, 256 entries
  std::unordered_map<uint32_t, std::shared_ptr<const StackMask>> stack_masks_;  // by cut stack id
  int cut_depth_ = 4;
  std::unordered_map<std::string, std::vector<uint32_t>> cache_;
  size_t cache_capacity_ = 256;
  size_t cache_hits_ = 0, cache_misses_ = 0;
};

}  // namespace infernix::grammar
