// The reading position under the GBNF and regex parsers, with what both read the same way: decimal
// repetition counts, fixed-length hex escapes and UTF-8 characters. Errors go through the parser's
// Fail, which words the position its own way (GBNF: line and column; regex: column).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace infernix::grammar {

// The largest repetition count ({m,n}) a grammar or pattern may ask for.
inline constexpr int kMaxRepeat = 10000;

class TextCursor {
 public:
  virtual ~TextCursor() = default;

 protected:
  explicit TextCursor(std::string_view text) : text_(text) {}

  [[noreturn]] virtual void Fail(size_t pos, const std::string& what) const = 0;

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }

  // `digits` hex digits at pos_, as a number (not range-checked); failures are reported at `start`.
  char32_t ParseHex(size_t start, int digits);
  // A decimal repetition count at pos_, at most kMaxRepeat.
  int ParseInt();
  // The UTF-8 character at pos_ (which must not be at the end); ill-formed UTF-8 fails at pos_.
  char32_t ParseUtf8Char();

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace infernix::grammar
