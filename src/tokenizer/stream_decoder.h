// Incremental detokenization for streaming output: feed generated ids one at a time, get text as soon
// as it is complete UTF-8. A token may end in the middle of a character (byte-level BPE splits rare
// characters and emoji into byte tokens); those bytes are held back until the character completes.
//
// Contract: the concatenation of every Push() result and the final Flush() equals
// tokenizer.Decode(all ids, skip_special), always (bytes that can never form a character are replaced
// by U+FFFD as soon as that is certain, exactly as Decode replaces them). Each result is valid UTF-8.
// Not thread-safe (one decoder per stream); the Tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace infernix {

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}

  // The text that `id` completes (possibly empty). Throws Error(kOutOfRange) for an id outside
  // [0, vocab_size()), leaving the decoder as it was.
  std::string Push(int32_t id);

  // At the end of the stream: the held-back bytes, an incomplete character becoming U+FFFD. The
  // decoder is then empty and can start a new stream.
  std::string Flush();

  // Bytes held back, waiting for the rest of a character (at most 3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace infernix
