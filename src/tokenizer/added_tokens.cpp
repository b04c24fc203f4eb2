#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace infernix {

int32_t AddedTokenMatcher::Child(int32_t node, unsigned char byte) const {
  for (const auto& [b, child] : nodes_[node].children) {
    if (b == byte) return child;
  }
  return -1;
}

void AddedTokenMatcher::Add(std::string_view pattern, const AddedToken& token) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (char c : pattern) {
    const auto byte = static_cast<unsigned char>(c);
    int32_t child = Child(node, byte);
    if (child < 0) {
      child = static_cast<int32_t>(nodes_.size());
      nodes_[node].children.emplace_back(byte, child);
      nodes_.emplace_back();
    }
    node = child;
  }
  if (nodes_[node].entry >= 0) return;
  nodes_[node].entry = static_cast<int32_t>(entries_.size());
  entries_.push_back({token.id, token.lstrip, token.rstrip, token.single_word});
  const auto first = static_cast<unsigned char>(pattern[0]);
  if (!first_byte_[first]) first_bytes_ += pattern[0];
  first_byte_[first] = true;
}

size_t AddedTokenMatcher::NextCandidate(std::string_view text, size_t pos) const {
  if (first_bytes_.size() == 1) {  // the usual case ('<'): memchr is much faster than a byte loop
    const size_t found = text.find(first_bytes_[0], pos);
    return found == std::string_view::npos ? text.size() : found;
  }
  while (pos < text.size() && !first_byte_[static_cast<unsigned char>(text[pos])]) ++pos;
  return pos;
}

size_t AddedTokenMatcher::LongestMatch(std::string_view text, size_t pos, int32_t* entry) const {
  size_t best = 0;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = Child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    if (nodes_[node].entry >= 0) {
      best = i + 1 - pos;
      *entry = nodes_[node].entry;
    }
  }
  return best;
}

void AddedTokenMatcher::Split(std::string_view text, std::vector<Segment>* out) const {
  if (entries_.empty()) {
    if (!text.empty()) out->push_back({text, -1});
    return;
  }
  size_t done = 0;  // text before `done` is in *out
  size_t pos = 0;   // where the scan for the next match resumes
  while ((pos = NextCandidate(text, pos)) < text.size()) {
    int32_t entry_index = -1;
    const size_t length = LongestMatch(text, pos, &entry_index);
    if (length == 0) {
      ++pos;
      continue;
    }
    const Entry& entry = entries_[entry_index];
    size_t start = pos, stop = pos + length;
    // The scan resumes after the match as found, whether it is kept, dropped or widened.
    pos = stop;
    if (entry.single_word) {
      const bool word_before = start > 0 && utf8::IsWordChar(utf8::DecodeLast(text.substr(0, start)));
      size_t next = stop;
      const bool word_after = stop < text.size() && utf8::IsWordChar(utf8::DecodeAt(text, &next));
      if (word_before || word_after) continue;
    }
    if (entry.lstrip) {
      while (start > done) {
        const std::string_view before = text.substr(0, start);
        const char32_t cp = utf8::DecodeLast(before);
        if (!utf8::IsWhiteSpace(cp)) break;
        start -= (cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4);
      }
    }
    if (entry.rstrip) {
      while (stop < text.size()) {
        size_t next = stop;
        if (!utf8::IsWhiteSpace(utf8::DecodeAt(text, &next))) break;
        stop = next;
      }
    }
    // Hugging Face lets a match that starts inside the white space an rstrip token took overlap it
    // (duplicating that text); here the later match starts where the earlier one ended.
    start = std::max(start, done);
    if (stop <= start) continue;
    if (start > done) out->push_back({text.substr(done, start - done), -1});
    out->push_back({text.substr(start, stop - start), entry.id});
    done = stop;
  }
  if (done < text.size()) out->push_back({text.substr(done), -1});
}

}  // namespace infernix
