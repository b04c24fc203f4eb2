#include "grammar/text_cursor.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace infernix::grammar {

char32_t TextCursor::ParseHex(size_t start, int digits) {
  char32_t cp = 0;
  for (int i = 0; i < digits; ++i) {
    const char c = Peek();
    const int v = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (v < 0) Fail(start, "bad escape: expected " + std::to_string(digits) + " hex digits");
    cp = cp * 16 + static_cast<char32_t>(v);
    ++pos_;
  }
  return cp;
}

int TextCursor::ParseInt() {
  const size_t start = pos_;
  int value = 0;
  while (Peek() >= '0' && Peek() <= '9') {
    value = value * 10 + (Peek() - '0');
    if (value > kMaxRepeat) Fail(start, "repetition count above " + std::to_string(kMaxRepeat));
    ++pos_;
  }
  if (pos_ == start) Fail(start, "expected a number");
  return value;
}

char32_t TextCursor::ParseUtf8Char() {
  // A character is at most 4 bytes: it is well-formed iff the first ill-formed byte of the next 4 is not
  // its own first byte (overlong forms, surrogates and code points above U+10FFFF are ill-formed).
  if (utf8::FindInvalid(text_.substr(pos_, std::min<size_t>(4, text_.size() - pos_))) == 0)
    Fail(pos_, "invalid UTF-8");
  return utf8::DecodeAt(text_, &pos_);
}

}  // namespace infernix::grammar
