#include "grammar/token_matcher.h"

#include <algorithm>
#include <numeric>

#include "base/check.h"
#include "base/error.h"
#include "tokenizer/tokenizer.h"

namespace infernix::grammar {

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes, std::vector<bool> special)
    : bytes_(std::move(token_bytes)), special_(std::move(special)) {
  INFX_CHECK(bytes_.size() == special_.size());
  std::vector<int32_t> order;
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if (!special_[id] && !bytes_[id].empty()) order.push_back(static_cast<int32_t>(id));
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)] || (bytes_[static_cast<size_t>(a)] == bytes_[static_cast<size_t>(b)] && a < b);
  });
  // Preorder construction from the sorted strings: `path` holds the trie nodes of the previous string.
  trie_.push_back({0, 0, 0, 0, 0});
  std::vector<uint32_t> path = {0};
  std::string_view previous;
  for (int32_t id : order) {
    const std::string_view s = bytes_[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < s.size() && common < previous.size() && s[common] == previous[common]) ++common;
    while (path.size() > common + 1) {  // close the nodes below the common prefix
      trie_[path.back()].subtree_end = static_cast<uint32_t>(trie_.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      INFX_CHECK(d + 1 < 65536);
      const auto index = static_cast<uint32_t>(trie_.size());
      trie_.push_back({static_cast<uint8_t>(s[d]), static_cast<uint16_t>(d + 1), 0,
                       static_cast<uint32_t>(trie_tokens_.size()), static_cast<uint32_t>(trie_tokens_.size())});
      path.push_back(index);
    }
    TrieNode& node = trie_[path.back()];
    if (node.token_begin == node.token_end) node.token_begin = node.token_end = static_cast<uint32_t>(trie_tokens_.size());
    trie_tokens_.push_back(id);
    node.token_end = static_cast<uint32_t>(trie_tokens_.size());
    max_depth_ = std::max(max_depth_, s.size());
    previous = s;
  }
  while (!path.empty()) {
    trie_[path.back()].subtree_end = static_cast<uint32_t>(trie_.size());
    path.pop_back();
  }
  trie_offsets_.reserve(trie_tokens_.size() + 1);
  for (int32_t id : trie_tokens_) {
    trie_offsets_.push_back(static_cast<uint32_t>(trie_bytes_.size()));
    trie_bytes_ += bytes_[static_cast<size_t>(id)];
  }
  trie_offsets_.push_back(static_cast<uint32_t>(trie_bytes_.size()));
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::FromTokenizer(const Tokenizer& tokenizer) {
  const int32_t n = tokenizer.vocab_size();
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<bool> special(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    bytes[static_cast<size_t>(id)] = std::string(tokenizer.TokenBytes(id));
    special[static_cast<size_t>(id)] = tokenizer.IsSpecial(id);
  }
  return std::make_shared<const TokenVocabulary>(std::move(bytes), std::move(special));
}

void StackMask::OrAcceptedInto(std::vector<uint32_t>* mask) const {
  if (accepted.empty()) {
    for (int32_t id : accepted_ids) (*mask)[static_cast<size_t>(id) >> 5] |= uint32_t{1} << (id & 31);
  } else {
    for (size_t w = 0; w < mask->size(); ++w) (*mask)[w] |= accepted[w];
  }
}

namespace {

// The accepted tokens of a StackMask as a walk finds them: ids while they are few, the bitmask from the
// point where the ids would take more than a quarter of its size (so a mask that accepts a handful of
// tokens never clears or scans the 19 KB bitmask of Qwen's vocabulary).
class AcceptedSet {
 public:
  explicit AcceptedSet(size_t words) : words_(words) {}
  void Add(uint32_t id) {
    ++count_;
    if (!bits_.empty()) {
      bits_[id >> 5] |= uint32_t{1} << (id & 31);
      return;
    }
    ids_.push_back(static_cast<int32_t>(id));
    if (ids_.size() > words_ / 4) ToBits();
  }
  // Every token `mask` accepts (none of which was added before).
  void AddAll(const StackMask& mask) {
    if (mask.accepted.empty()) {
      for (int32_t id : mask.accepted_ids) Add(static_cast<uint32_t>(id));
      return;
    }
    if (bits_.empty()) ToBits();
    mask.OrAcceptedInto(&bits_);
    count_ += mask.num_accepted;
  }
  void MoveInto(StackMask* mask) {
    mask->num_accepted = count_;
    if (bits_.empty()) {
      std::sort(ids_.begin(), ids_.end());
      mask->accepted_ids = std::move(ids_);
    } else {
      mask->accepted = std::move(bits_);
    }
  }

 private:
  void ToBits() {
    bits_.assign(words_, 0);
    for (int32_t id : ids_) bits_[static_cast<size_t>(id) >> 5] |= uint32_t{1} << (id & 31);
    ids_ = {};
  }
  size_t words_, count_ = 0;
  std::vector<int32_t> ids_;
  std::vector<uint32_t> bits_;
};

}  // namespace

std::shared_ptr<const StackMask> TokenGrammar::Find(const std::string& stack_key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = masks_.find(stack_key);
  return it == masks_.end() ? nullptr : it->second;
}

std::shared_ptr<const StackMask> TokenGrammar::Insert(const std::string& stack_key, StackMask mask) {
  auto stored = std::make_shared<const StackMask>(std::move(mask));
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = masks_.try_emplace(stack_key, std::move(stored));
  if (inserted)
    memory_bytes_ += stack_key.size() + sizeof(StackMask) + it->second->accepted.size() * sizeof(uint32_t) +
                     it->second->accepted_ids.size() * sizeof(int32_t) +
                     it->second->uncertain.size() * sizeof(uint32_t);
  return it->second;
}

size_t TokenGrammar::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return memory_bytes_;
}

size_t TokenGrammar::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return masks_.size();
}

TokenMatcher::TokenMatcher(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const TokenVocabulary> vocab,
                           std::vector<int32_t> eos_ids)
    : TokenMatcher(std::make_shared<TokenGrammar>(std::move(grammar), std::move(vocab)), std::move(eos_ids)) {}

TokenMatcher::TokenMatcher(std::shared_ptr<TokenGrammar> compiled, std::vector<int32_t> eos_ids)
    : compiled_(std::move(compiled)),
      vocab_(compiled_->vocab()),
      eos_ids_(std::move(eos_ids)),
      matcher_(compiled_->grammar()) {
  for (int32_t id : eos_ids_) {
    if (id < 0 || id >= vocab_->size()) {
      ThrowError(ErrorCode::kInvalidArgument, "grammar: EOS token id {} is outside the vocabulary [0, {})", id,
                 vocab_->size());
    }
  }
  terminated_.push_back(false);
  scratch_.resize(vocab_->max_depth() + 1);
}

bool TokenMatcher::IsEos(int32_t id) const { return std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end(); }

void TokenMatcher::WalkTrie(const MatchState& state, std::vector<uint32_t>* mask) {
  mask->assign(mask_words(), 0);
  const auto& trie = vocab_->trie();
  const auto& tokens = vocab_->trie_tokens();
  StackEngine& engine = matcher_.engine();
  scratch_[0] = state;
  for (uint32_t i = 1; i < trie.size();) {
    const TokenVocabulary::TrieNode& node = trie[i];
    if (!engine.StepByte(scratch_[node.depth - 1u], node.byte, &scratch_[node.depth])) {
      i = node.subtree_end;
      continue;
    }
    for (uint32_t t = node.token_begin; t < node.token_end; ++t) {
      const auto id = static_cast<uint32_t>(tokens[t]);
      (*mask)[id >> 5] |= uint32_t{1} << (id & 31);
    }
    ++i;
  }
}

std::shared_ptr<const StackMask> TokenMatcher::LookupStackMask(uint32_t cut_stack, std::string* key) {
  auto found = stack_masks_.find(cut_stack);
  if (found != stack_masks_.end()) return found->second;
  *key = matcher_.engine().StackKey(cut_stack);
  if (auto shared = compiled_->Find(*key)) return stack_masks_.emplace(cut_stack, std::move(shared)).first->second;
  return nullptr;
}

StackMask TokenMatcher::WalkCutStack(uint32_t cut_stack) {
  // The walk meets few distinct states (inside a string, every character leads back to the same
  // stacks), so states are numbered as they appear and each (state, byte) step is computed once;
  // a trie node then costs a table lookup.
  constexpr int32_t kUnknown = -1, kRefused = -2;
  std::vector<WalkState>& info = walk_info_;
  std::vector<MatchState>& states = walk_states_;
  std::unordered_map<std::string, int32_t>& ids = walk_ids_;
  std::vector<int32_t>& step = walk_step_;
  info.clear();
  states.clear();
  ids.clear();
  step.clear();
  StackEngine& engine = matcher_.engine();
  auto intern = [&](MatchState state) {
    // States mid-character whose partial bits cannot matter share one number (the first one met
    // stands for all of them).
    std::string key = state.Key();
    if (engine.PartialIsIrrelevant(state)) std::fill_n(key.end() - 6, 4, '\xFF');
    auto [it, inserted] = ids.try_emplace(std::move(key), static_cast<int32_t>(states.size()));
    if (inserted) {
      const bool frontier = std::binary_search(state.stacks.begin(), state.stacks.end(), StackEngine::kFrontier);
      info.push_back({frontier, state.stacks.size() > (frontier ? 1u : 0u)});
      states.push_back(std::move(state));
      step.resize(step.size() + 256, kUnknown);
    }
    return it->second;
  };
  StackMask result;
  AcceptedSet accepted(mask_words());
  const auto& trie = vocab_->trie();
  const auto& tokens = vocab_->trie_tokens();
  std::vector<int32_t> at(scratch_.size());  // per depth: the state after the path's bytes
  at[0] = intern(MatchState{{cut_stack}});
  tainted_.assign(scratch_.size(), 0);
  MatchState next;
  for (uint32_t i = 1; i < trie.size();) {
    const TokenVocabulary::TrieNode& node = trie[i];
    const bool tainted_above = tainted_[node.depth - 1u] != 0;
    const auto from = static_cast<size_t>(at[node.depth - 1u]);
    int32_t to = step[from * 256 + node.byte];
    if (to == kUnknown) {
      to = engine.StepByte(states[from], node.byte, &next) ? intern(next) : kRefused;
      step[from * 256 + node.byte] = to;
    }
    if (to == kRefused) {
      if (tainted_above) {  // a run left the cut frames earlier: the parent decides the whole subtree
        for (uint32_t t = trie[i].token_begin; t < trie[node.subtree_end - 1].token_end; ++t) {
          result.uncertain.push_back(t);
        }
      }
      i = node.subtree_end;
      continue;
    }
    at[node.depth] = to;
    const WalkState w = info[static_cast<size_t>(to)];
    tainted_[node.depth] = tainted_above || w.has_frontier;
    for (uint32_t t = node.token_begin; t < node.token_end; ++t) {
      const auto id = static_cast<uint32_t>(tokens[t]);
      if (w.has_real) {
        accepted.Add(id);
      } else {
        result.uncertain.push_back(t);
      }
    }
    ++i;
  }
  accepted.MoveInto(&result);
  return result;
}

StackMask TokenMatcher::RefineCutStack(uint32_t cut_stack, const StackMask& shallower) {
  // Tokens the shallower cut accepted stay accepted (their runs never left the frames both cuts
  // share); tokens it refused without reaching its frontier stay refused. Only its uncertain tokens
  // are walked, in trie order, each resuming from the prefix it shares with the previous one.
  StackMask result;
  AcceptedSet accepted(mask_words());
  accepted.AddAll(shallower);
  StackEngine& engine = matcher_.engine();
  scratch_[0] = MatchState{{cut_stack}};
  tainted_.assign(scratch_.size(), 0);
  const std::vector<uint32_t>& list = shallower.uncertain;
  const auto& tokens = vocab_->trie_tokens();
  std::string_view previous;
  size_t valid = 0;  // scratch_[0..valid] hold the states after previous[0..valid)
  for (size_t k = 0; k < list.size(); ++k) {
    const uint32_t t = list[k];
    const std::string_view bytes = vocab_->trie_token_bytes(t);
    size_t d = 0;
    while (d < valid && d < bytes.size() && bytes[d] == previous[d]) ++d;
    while (d < bytes.size()) {
      MatchState& next = scratch_[d + 1];
      if (!engine.StepByte(scratch_[d], static_cast<uint8_t>(bytes[d]), &next)) break;
      tainted_[d + 1] = tainted_[d] || std::binary_search(next.stacks.begin(), next.stacks.end(), StackEngine::kFrontier);
      ++d;
    }
    previous = bytes;
    valid = d;
    if (d < bytes.size()) {
      // Refused at byte d: so is every following token with the same first d + 1 bytes.
      const std::string_view prefix = bytes.substr(0, d + 1);
      size_t end = k + 1;
      while (end < list.size() && vocab_->trie_token_bytes(list[end]).starts_with(prefix)) ++end;
      if (tainted_[d]) result.uncertain.insert(result.uncertain.end(), list.begin() + static_cast<ptrdiff_t>(k),
                                               list.begin() + static_cast<ptrdiff_t>(end));
      k = end - 1;
      continue;
    }
    const MatchState& last = scratch_[d];
    const bool has_frontier = std::binary_search(last.stacks.begin(), last.stacks.end(), StackEngine::kFrontier);
    if (last.stacks.size() > (has_frontier ? 1u : 0u)) {
      accepted.Add(static_cast<uint32_t>(tokens[t]));
    } else {
      result.uncertain.push_back(t);
    }
  }
  accepted.MoveInto(&result);
  return result;
}

// Above this many uncertain tokens a level is walked over the whole trie rather than refined from
// the shallower one (the walk skips refused subtrees; the refinement visits each token).
constexpr size_t kRefineLimit = 20000;

std::shared_ptr<const StackMask> TokenMatcher::StackMaskOf(uint32_t stack) {
  StackEngine& engine = matcher_.engine();
  std::string key;
  const uint32_t cut = engine.Truncate(stack, cut_depth_);
  if (auto mask = LookupStackMask(cut, &key)) return mask;
  // Build the levels from the top frame down: level 1 (the top grammar position alone) is a trie
  // walk, each deeper level refines the one above it (or is walked when that one is too vague).
  std::shared_ptr<const StackMask> mask;
  uint32_t previous_cut = UINT32_MAX;
  for (int depth = 1; depth <= cut_depth_; ++depth) {
    // A top class that ends its alternative pops after one character, so nearly every token it
    // takes would be uncertain at level 1: start at level 2.
    if (depth == 1 && depth < cut_depth_ && engine.TopEndsAlternative(stack)) continue;
    const uint32_t level_cut = depth == cut_depth_ ? cut : engine.Truncate(stack, depth);
    if (level_cut == previous_cut) break;  // the stack is no deeper than the previous level
    previous_cut = level_cut;
    if (auto found = LookupStackMask(level_cut, &key)) {
      mask = std::move(found);
      continue;
    }
    StackMask computed = mask == nullptr || mask->uncertain.size() > kRefineLimit ? WalkCutStack(level_cut)
                                                                                  : RefineCutStack(level_cut, *mask);
    mask = stack_masks_.emplace(level_cut, compiled_->Insert(key, std::move(computed))).first->second;
  }
  return mask;
}

void TokenMatcher::ComputeMask(const MatchState& state, std::vector<uint32_t>* mask) {
  if (state.need != 0 || cut_depth_ <= 0) {
    WalkTrie(state, mask);
    return;
  }
  mask->assign(mask_words(), 0);
  StackEngine& engine = matcher_.engine();
  for (uint32_t s : state.stacks) {
    if (s == 0) continue;
    const std::shared_ptr<const StackMask> part = StackMaskOf(s);
    part->OrAcceptedInto(mask);
    // Recheck the uncertain tokens from the real state. They are in trie order, so each walk
    // resumes from the states of the longest prefix it shares with the previous one, and a refused
    // prefix skips the tokens that share it.
    scratch_[0] = state;
    const std::vector<uint32_t>& list = part->uncertain;
    const auto& tokens = vocab_->trie_tokens();
    std::string_view previous;
    size_t valid = 0;  // scratch_[0..valid] hold the states after previous[0..valid)
    for (size_t k = 0; k < list.size(); ++k) {
      const auto u = static_cast<uint32_t>(tokens[list[k]]);
      if (((*mask)[u >> 5] >> (u & 31)) & 1) continue;
      const std::string_view bytes = vocab_->trie_token_bytes(list[k]);
      size_t d = 0;
      while (d < valid && d < bytes.size() && bytes[d] == previous[d]) ++d;
      while (d < bytes.size() && engine.StepByte(scratch_[d], static_cast<uint8_t>(bytes[d]), &scratch_[d + 1])) ++d;
      previous = bytes;
      valid = d;
      if (d == bytes.size()) {
        (*mask)[u >> 5] |= uint32_t{1} << (u & 31);
      } else {
        const std::string_view prefix = bytes.substr(0, d + 1);
        while (k + 1 < list.size() && vocab_->trie_token_bytes(list[k + 1]).starts_with(prefix)) ++k;
      }
    }
  }
}

void TokenMatcher::FillNextTokenBitmask(std::span<uint32_t> mask) {
  const size_t words = mask_words();
  if (mask.size() < words) {
    ThrowError(ErrorCode::kInvalidArgument, "grammar: token mask has {} words, the vocabulary needs {}", mask.size(),
               words);
  }
  std::fill(mask.begin(), mask.end(), 0u);
  if (IsTerminated()) return;
  const MatchState& state = matcher_.state();
  std::string key = state.Key();
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    ++cache_hits_;
  } else {
    ++cache_misses_;
    if (cache_.size() >= cache_capacity_) cache_.clear();
    std::vector<uint32_t> computed;
    ComputeMask(state, &computed);
    it = cache_.emplace(std::move(key), std::move(computed)).first;
  }
  std::copy(it->second.begin(), it->second.end(), mask.begin());
  if (matcher_.IsComplete()) {
    for (int32_t id : eos_ids_) mask[static_cast<size_t>(id) >> 5] |= uint32_t{1} << (id & 31);
  }
}

bool TokenMatcher::AcceptToken(int32_t id) {
  if (IsTerminated() || id < 0 || id >= vocab_->size()) return false;
  if (IsEos(id)) {
    if (!matcher_.IsComplete()) return false;
    matcher_.Push(matcher_.state());
    terminated_.push_back(true);
    return true;
  }
  const std::string_view bytes = vocab_->bytes(id);
  if (vocab_->special(id) || bytes.empty() || !matcher_.Accept(bytes)) return false;
  terminated_.push_back(false);
  return true;
}

bool TokenMatcher::AcceptBytes(std::string_view bytes) {
  if (IsTerminated() || !matcher_.Accept(bytes)) return false;
  terminated_.push_back(false);
  return true;
}

void TokenMatcher::Rollback(size_t n) {
  matcher_.Rollback(n);  // throws if n is too large
  terminated_.resize(terminated_.size() - n);
}

}  // namespace infernix::grammar
