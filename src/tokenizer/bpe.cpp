#include "tokenizer/bpe.h"

#include <queue>

#include <fmt/format.h>

#include "base/error.h"
#include "tokenizer/utf8.h"

namespace infernix {

// Open-addressing hash map from a pair of token ids to the merge's (rank, resulting id); the hot
// lookup of the merge loop.
class Bpe::PairMap {
 public:
  struct Merge {
    int32_t rank;
    int32_t id;
  };

  explicit PairMap(size_t n) {
    size_t capacity = 16;
    while (capacity < 2 * n) capacity *= 2;  // load factor at most 1/2
    slots_.assign(capacity, Slot{kEmpty, {}});
    mask_ = capacity - 1;
  }

  // Sets the merge of (left, right), replacing an earlier one.
  void Set(int32_t left, int32_t right, Merge merge) {
    const uint64_t key = Key(left, right);
    size_t i = Hash(key);
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
    slots_[i] = {key, merge};
  }

  const Merge* Find(int32_t left, int32_t right) const {
    const uint64_t key = Key(left, right);
    for (size_t i = Hash(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].merge;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

 private:
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are non-negative, so no key is all ones
  static uint64_t Key(int32_t left, int32_t right) {
    return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
  }
  size_t Hash(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask_; }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

Bpe::Bpe(Vocab vocab, const Merges& merges, BpeOptions options, std::string_view source)
    : options_(std::move(options)) {
  int32_t max_id = -1;
  tokens_.reserve(vocab.size());
  for (auto& [text, id] : vocab) {
    if (id < 0) ThrowError(ErrorCode::kInvalidFormat, "{}: model.vocab: token '{}' has negative id {}", source, text, id);
    max_id = std::max(max_id, id);
    tokens_.push_back(std::move(text));
  }
  by_text_.reserve(tokens_.size());
  id_to_token_.resize(static_cast<size_t>(max_id + 1));
  std::vector<bool> has_id(id_to_token_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const int32_t id = vocab[i].second;
    if (has_id[id]) {
      ThrowError(ErrorCode::kInvalidFormat, "{}: model.vocab: tokens '{}' and '{}' both have id {}", source,
                 id_to_token_[id], tokens_[i], id);
    }
    has_id[id] = true;
    id_to_token_[id] = tokens_[i];
    by_text_.emplace(tokens_[i], id);
  }

  small_char_ids_.assign(0x800, -1);
  for (const auto& [text, id] : by_text_) {
    if (text.empty() || utf8::FindInvalid(text) != utf8::kValid) continue;
    size_t pos = 0;
    const char32_t cp = utf8::DecodeAt(text, &pos);
    if (pos == text.size() && cp < small_char_ids_.size()) small_char_ids_[cp] = id;
  }
  for (int b = 0; b < 256; ++b) {
    const std::optional<int32_t> id = TokenToId(fmt::format("<0x{:02X}>", b));
    byte_ids_[b] = id.value_or(-1);
  }
  if (options_.unk_token) {
    const std::optional<int32_t> id = TokenToId(*options_.unk_token);
    if (!id) {
      ThrowError(ErrorCode::kInvalidFormat, "{}: model.unk_token '{}' is not in model.vocab", source,
                 *options_.unk_token);
    }
    unk_id_ = *id;
  }

  merges_ = std::make_unique<PairMap>(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    joined = left + right;
    int32_t ids[3];
    const std::string_view parts[3] = {left, right, joined};
    for (int k = 0; k < 3; ++k) {
      const std::optional<int32_t> id = TokenToId(parts[k]);
      if (!id) {
        ThrowError(ErrorCode::kInvalidFormat, "{}: model.merges[{}] ('{} {}'): '{}' is not in model.vocab", source,
                   rank, left, right, parts[k]);
      }
      ids[k] = *id;
    }
    merges_->Set(ids[0], ids[1], {static_cast<int32_t>(rank), ids[2]});
  }
}

Bpe::~Bpe() = default;

std::optional<int32_t> Bpe::TokenToId(std::string_view token) const {
  const auto it = by_text_.find(token);
  if (it == by_text_.end()) return std::nullopt;
  return it->second;
}

std::string_view Bpe::IdToToken(int32_t id) const {
  if (id < 0 || id >= id_limit()) return {};
  return id_to_token_[id];
}

int32_t Bpe::CharId(char32_t cp, std::string_view spelled) const {
  if (cp < small_char_ids_.size()) return small_char_ids_[cp];
  return TokenToId(spelled).value_or(-1);
}

namespace {

// A symbol of the word being merged: a doubly linked list over a vector, as in Hugging Face's Word.
struct Symbol {
  int32_t id;
  int32_t prev;  // index of the previous live symbol, or -1
  int32_t next;  // index of the next live symbol, or -1
  bool live;     // false once merged into the symbol on its left
};

// A candidate merge of symbols[pos] with the live symbol after it. The queue pops the lowest rank
// first, then the lowest position.
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t id;
  bool operator<(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : pos > other.pos;
  }
};

}  // namespace

void Bpe::Encode(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const std::optional<int32_t> id = TokenToId(word)) {
      ids->push_back(*id);
      return;
    }
  }
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&symbols](int32_t id) {
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, true});
  };
  // Like Hugging Face, a pending unk is written out only before the next known character (or at the
  // end), after any byte-fallback tokens that come between.
  bool unk_pending = false;
  for (size_t pos = 0; pos < word.size();) {
    const size_t start = pos;
    const char32_t cp = utf8::DecodeAt(word, &pos);
    const std::string_view spelled = word.substr(start, pos - start);
    const int32_t id = CharId(cp, spelled);
    if (id >= 0) {
      if (unk_pending) add(unk_id_);
      unk_pending = false;
      add(id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (char c : spelled) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (char c : spelled) add(byte_ids_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (unk_pending && !options_.fuse_unk) add(unk_id_);
      unk_pending = true;
    }
  }
  if (unk_pending) add(unk_id_);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Candidate> queue;
  auto propose = [&](int32_t pos) {  // queues the merge of symbols[pos] with its successor, if listed
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    if (const PairMap::Merge* merge = merges_->Find(symbols[pos].id, symbols[next].id)) {
      queue.push({merge->rank, pos, merge->id});
    }
  };
  for (int32_t pos = 0; pos + 1 < static_cast<int32_t>(symbols.size()); ++pos) propose(pos);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (!left.live || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    // Skip a stale candidate: the pair at this position changed since it was queued.
    const PairMap::Merge* merge = merges_->Find(left.id, right.id);
    if (merge == nullptr || merge->id != top.id) continue;
    left.id = top.id;
    left.next = right.next;
    right.live = false;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) propose(left.prev);
    propose(top.pos);
  }
  for (int32_t pos = 0; pos >= 0; pos = symbols[pos].next) ids->push_back(symbols[pos].id);
}

}  // namespace infernix
