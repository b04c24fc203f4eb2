// Added tokens: strings matched in the input before the BPE model sees it, with Hugging Face's flags.
// Matching follows tokenizers' AddedVocabulary: leftmost-longest, non-overlapping matches found in
// one left-to-right scan; a `single_word` match is dropped when a word character (Unicode \w) touches
// it; `lstrip` / `rstrip` widen a match over the white space on its left / right, which thereby
// disappears from the text. Immutable after construction, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace infernix {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;      // dropped by Decode(skip_special = true)
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;    // matched in the normalized text rather than the raw input
  bool single_word = false;
};

class AddedTokenMatcher {
 public:
  // A piece of text: an added token (id >= 0) or ordinary text (id == -1).
  struct Segment {
    std::string_view text;
    int32_t id;
  };

  // Looks for `pattern` (the token's content, or its normalized form) standing for `token`. Empty
  // patterns are ignored; for a repeated pattern the first token added wins.
  void Add(std::string_view pattern, const AddedToken& token);
  bool empty() const { return entries_.empty(); }

  // Appends the segments of `text` (valid UTF-8) to *out, in order; every byte of `text` is in
  // exactly one segment, and ordinary segments are never empty.
  void Split(std::string_view text, std::vector<Segment>* out) const;

 private:
  struct Entry {
    int32_t id;
    bool lstrip, rstrip, single_word;
  };
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;
    int32_t entry = -1;
  };
  int32_t Child(int32_t node, unsigned char byte) const;
  // The first position at or after `pos` where a pattern may start, or text.size().
  size_t NextCandidate(std::string_view text, size_t pos) const;
  // Length of the longest pattern that starts at text[pos] (0 if none), and its entry.
  size_t LongestMatch(std::string_view text, size_t pos, int32_t* entry) const;

  std::vector<Entry> entries_;
  std::vector<Node> nodes_{Node{}};  // a byte trie of the patterns; node 0 is the root
  bool first_byte_[256] = {};
  std::string first_bytes_;  // the distinct first bytes of the patterns
};

}  // namespace infernix
