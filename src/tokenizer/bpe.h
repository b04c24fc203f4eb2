// The byte-pair-encoding model: a vocabulary (token string -> id) and a ranked list of merges, with the
// semantics of Hugging Face tokenizers' BPE model. It knows nothing of files: tokenizer.json and GGUF
// loaders both build it from their own metadata. Immutable after construction, thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace infernix {

struct BpeOptions {
  // Emitted for a character that is not in the vocabulary (and not covered by byte_fallback); when
  // absent such characters are dropped, as Hugging Face does.
  std::optional<std::string> unk_token;
  bool fuse_unk = false;       // a run of unknown characters gives a single unk token
  bool byte_fallback = false;  // an unknown character becomes its "<0xXX>" byte tokens, if all exist
  bool ignore_merges = false;  // a word that is itself a vocabulary token is encoded as that token
};

class Bpe {
 public:
  using Vocab = std::vector<std::pair<std::string, int32_t>>;
  using Merges = std::vector<std::pair<std::string, std::string>>;  // rank = index

  // Ids must be non-negative and distinct; they need not be dense. A merge's parts and their
  // concatenation must be vocabulary tokens; when a pair is listed twice the later rank counts (as in
  // Hugging Face). Throws Error(kInvalidFormat), naming `source`, for a broken vocabulary or merge
  // list, or an unk_token missing from the vocabulary.
  Bpe(Vocab vocab, const Merges& merges, BpeOptions options, std::string_view source);
  ~Bpe();
  Bpe(const Bpe&) = delete;
  Bpe& operator=(const Bpe&) = delete;

  // Appends the ids of `word` (valid UTF-8, one pre-tokenized piece written in the vocabulary's
  // alphabet) to *ids: its characters are looked up, then the lowest-ranked adjacent pair is merged,
  // leftmost first, until no listed pair remains.
  void Encode(std::string_view word, std::vector<int32_t>* ids) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  // The token with this id; empty when there is none (a gap in the ids, or out of range).
  std::string_view IdToToken(int32_t id) const;
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }  // max id + 1
  size_t size() const { return tokens_.size(); }
  const BpeOptions& options() const { return options_; }

 private:
  class PairMap;
  int32_t CharId(char32_t cp, std::string_view spelled) const;

  std::vector<std::string> tokens_;                       // in vocabulary order; never resized after build
  std::unordered_map<std::string_view, int32_t> by_text_;  // views into tokens_
  std::vector<std::string_view> id_to_token_;
  std::vector<int32_t> small_char_ids_;  // id of the one-character token for code points < 0x800, or -1
  int32_t byte_ids_[256];                // ids of "<0x00>".."<0xFF>" for byte_fallback, or -1
  int32_t unk_id_ = -1;
  std::unique_ptr<PairMap> merges_;
  BpeOptions options_;
};

}  // namespace infernix
