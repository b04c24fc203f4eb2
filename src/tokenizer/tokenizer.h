// The text <-> token id mapping of a model: byte-level BPE as Qwen (and GPT-2-style models) use it,
// byte-exact with Hugging Face tokenizers (add_special_tokens = False). See docs/tokenizer.md.
//
// Encoding: added tokens are matched first (their `special`, `lstrip`, `rstrip`, `normalized` and
// `single_word` flags as in Hugging Face), the remaining text is NFC-normalized when the tokenizer
// says so, split by the pre-tokenizer regexes, mapped to the byte-level alphabet and BPE-encoded.
// Decoding: Hugging Face's ByteLevel decoder; bytes that do not form valid UTF-8 become U+FFFD.
//
// Thread-safety: a Tokenizer is immutable after Load/Create except for its internal piece cache,
// which is mutex-protected; every const method may be called from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/file_set.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/normalizer.h"

namespace infernix {

// The named special tokens of tokenizer_config.json (absent there, or null: nullopt), and their ids
// when the tokenizer has such a token.
struct SpecialTokens {
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  std::optional<int32_t> bos_id, eos_id, pad_id, unk_id;
};

// Everything a byte-level BPE tokenizer is made of, independent of the file format it came from.
struct TokenizerSpec {
  std::string source;  // names the origin in error messages (a file path)
  NormalizerKind normalizer = NormalizerKind::kNone;
  std::vector<std::string> split_patterns;  // Oniguruma syntax, applied in order ("Isolated")
  Bpe::Vocab vocab;
  Bpe::Merges merges;
  BpeOptions bpe;
  std::vector<AddedToken> added_tokens;
  SpecialTokens special_tokens;  // only the strings; Create resolves the ids
  bool split_special_tokens = false;  // when true, special added tokens are not matched in text
};

class Tokenizer {
 public:
  // Reads "tokenizer.json" and, when present, "tokenizer_config.json" from `files`. Errors
  // (kNotFound / kInvalidFormat / kUnsupported) name the file and the field.
  static std::unique_ptr<Tokenizer> Load(const FileSet& files);
  // Builds a tokenizer from its parts. Throws Error(kInvalidFormat / kUnsupported) naming spec.source.
  static std::unique_ptr<Tokenizer> Create(TokenizerSpec spec);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // The ids of `text`, with no BOS/EOS added. Throws Error(kInvalidArgument) naming the byte offset
  // when `text` is not valid UTF-8.
  std::vector<int32_t> Encode(std::string_view text) const;

  // The text of `ids` (always valid UTF-8). Added tokens give their content; skip_special drops
  // special ones. Ids in [0, vocab_size()) that no token has give nothing (as in Hugging Face).
  // Throws Error(kOutOfRange) for an id outside [0, vocab_size()).
  std::string Decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The raw bytes token `id` contributes to decoded text, before UTF-8 repair (a token can be part
  // of a character). Throws Error(kOutOfRange) for an id outside [0, vocab_size()).
  std::string_view TokenBytes(int32_t id) const;

  int32_t vocab_size() const;  // max id + 1 over the vocabulary and the added tokens
  std::optional<int32_t> TokenToId(std::string_view token) const;  // added tokens first
  std::string_view IdToToken(int32_t id) const;  // the raw vocabulary string; empty if none
  bool IsSpecial(int32_t id) const;              // false for out-of-range ids
  const SpecialTokens& special_tokens() const;

  // Empties the piece cache (for cold-cache benchmarks); safe to call concurrently with Encode.
  void ClearCache() const;

 private:
  struct State;
  explicit Tokenizer(std::unique_ptr<State> state);
  void EncodeText(std::string_view text, std::vector<int32_t>* ids) const;
  void EncodePiece(std::string_view piece, std::vector<int32_t>* ids) const;

  std::unique_ptr<State> state_;
};

}  // namespace infernix
