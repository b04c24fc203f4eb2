#include "chat/jinja/lexer.h"

#include <charconv>

#include "chat/jinja/utf8.h"

namespace infernix::jinja {

std::string NormalizeSource(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (c & 0x80); }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

int HexDigit(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  Lexer(const std::string& src, const SourceMap& map) : src_(src), map_(map) {}

  std::vector<Token> Run() {
    while (pos_ < src_.size()) {
      size_t open = FindTagOpen(pos_);
      if (open == std::string::npos) {
        EmitText(pos_, src_.substr(pos_));
        break;
      }
      char type = src_[open + 1];
      size_t body = open + 2;
      char sign = body < src_.size() && (src_[body] == '-' || src_[body] == '+') ? src_[body] : 0;
      if (sign != 0) ++body;
      std::string text = src_.substr(pos_, open - pos_);
      StripBeforeTag(text, sign, type == '{');
      EmitText(pos_, std::move(text));
      size_t raw_body = 0;
      if (type == '#')
        LexComment(open, body);
      else if (type == '%' && IsRawBegin(body, &raw_body))
        LexRaw(open, raw_body);
      else
        LexTag(open, body, type);
    }
    tokens_.push_back(Token{TokenKind::kEnd, static_cast<uint32_t>(src_.size()), ""});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void Fail(size_t offset, std::string_view message) const {
    map_.Throw(ErrorCode::kInvalidFormat, static_cast<uint32_t>(offset), message);
  }

  bool StartsWith(size_t at, std::string_view s) const { return at <= src_.size() && src_.compare(at, s.size(), s) == 0; }

  size_t FindTagOpen(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos && i + 1 < src_.size(); i = src_.find('{', i + 1)) {
      char next = src_[i + 1];
      if (next == '{' || next == '%' || next == '#') return i;
    }
    return std::string::npos;
  }

  // Python's \s*: skips whitespace code points.
  size_t SkipWhitespace(size_t p) const {
    size_t length = 0;
    while (p < src_.size() && IsPySpace(DecodeCodePoint(src_, p, &length))) p += length;
    return p;
  }

  void EmitText(size_t offset, std::string text) {
    if (!text.empty()) tokens_.push_back(Token{TokenKind::kText, static_cast<uint32_t>(offset), std::move(text)});
  }

  // `{%-` strips all whitespace before the tag; otherwise lstrip_blocks removes the whitespace
  // between the start of the line and a block or comment tag (not a `{{` tag, not after `{%+`).
  void StripBeforeTag(std::string& text, char sign, bool is_variable) const {
    if (sign == '-') {
      text.resize(PyStrip(text, nullptr, false, true).size());
    } else if (sign != '+' && !is_variable) {
      size_t newline = text.rfind('\n');
      size_t line_start = newline == std::string::npos ? 0 : newline + 1;
      if ((line_start > 0 || line_starting_) && line_start < text.size() &&
          PyStrip(std::string_view(text).substr(line_start), nullptr, true, false).empty())
        text.resize(line_start);
    }
  }

  // After a block or comment end: `-%}` strips all following whitespace, `+%}` nothing, and a plain
  // `%}` drops one newline (trim_blocks). Sets pos_ after what was consumed.
  void FinishBlockEnd(size_t after_marker, char sign) {
    size_t p = after_marker;
    if (sign == '-')
      p = SkipWhitespace(p);
    else if (sign == 0 && p < src_.size() && src_[p] == '\n')
      ++p;
    line_starting_ = p > 0 && src_[p - 1] == '\n';
    pos_ = p;
  }

  void LexComment(size_t open, size_t body) {
    size_t end = src_.find("#}", body);
    if (end == std::string::npos) Fail(open, "unterminated comment: missing '#}'");
    char sign = end > body && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    FinishBlockEnd(end + 2, sign);
  }

  // `{% raw %}` (any whitespace, `-`/`+` before raw, `-%}` after). Sets *body_start after the tag.
  bool IsRawBegin(size_t p, size_t* body_start) const {
    p = SkipWhitespace(p);
    if (!StartsWith(p, "raw")) return false;
    p = SkipWhitespace(p + 3);
    if (StartsWith(p, "-%}")) {
      *body_start = SkipWhitespace(p + 3);
    } else if (StartsWith(p, "%}")) {
      *body_start = p + 2;
    } else {
      return false;
    }
    return true;
  }

  void LexRaw(size_t open, size_t body) {
    line_starting_ = body > 0 && src_[body - 1] == '\n';
    for (size_t i = src_.find("{%", body); i != std::string::npos; i = src_.find("{%", i + 1)) {
      size_t p = i + 2;
      char sign = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
      if (sign != 0) ++p;
      p = SkipWhitespace(p);
      if (!StartsWith(p, "endraw")) continue;
      p = SkipWhitespace(p + 6);
      char end_sign = StartsWith(p, "+%}") || StartsWith(p, "-%}") ? src_[p] : 0;
      if (!StartsWith(p + (end_sign != 0 ? 1 : 0), "%}")) continue;
      std::string text = src_.substr(body, i - body);
      StripBeforeTag(text, sign, false);
      EmitText(body, std::move(text));
      FinishBlockEnd(p + (end_sign != 0 ? 3 : 2), end_sign);
      return;
    }
    Fail(open, "unterminated raw block: missing '{% endraw %}'");
  }

  void LexTag(size_t open, size_t body, char type) {
    bool variable = type == '{';
    tokens_.push_back(Token{variable ? TokenKind::kVariableBegin : TokenKind::kBlockBegin,
                            static_cast<uint32_t>(open), ""});
    std::string brackets;  // the closing brackets expected, innermost last
    size_t p = body;
    while (true) {
      if (p >= src_.size()) Fail(open, fmt::format("unterminated tag: missing '{}'", variable ? "}}" : "%}"));
      if (brackets.empty()) {  // as in Jinja, a tag only ends outside brackets
        char sign = src_[p] == '-' || (!variable && src_[p] == '+') ? src_[p] : 0;
        if (StartsWith(p + (sign != 0 ? 1 : 0), variable ? "}}" : "%}")) {
          tokens_.push_back(Token{variable ? TokenKind::kVariableEnd : TokenKind::kBlockEnd,
                                  static_cast<uint32_t>(p), ""});
          size_t after = p + (sign != 0 ? 3 : 2);
          if (variable) {
            pos_ = sign == '-' ? SkipWhitespace(after) : after;
            line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
          } else {
            FinishBlockEnd(after, sign);
          }
          return;
        }
      }
      char c = src_[p];
      size_t length = 0;
      if (IsPySpace(DecodeCodePoint(src_, p, &length))) {
        p += length;
      } else if (IsDigit(c)) {
        p = LexNumber(p);
      } else if (IsNameStart(c)) {
        size_t start = p;
        while (p < src_.size() && IsNameChar(src_[p])) ++p;
        tokens_.push_back(Token{TokenKind::kName, static_cast<uint32_t>(start), src_.substr(start, p - start)});
      } else if (c == '\'' || c == '"') {
        p = LexString(p);
      } else {
        p = LexOperator(p, brackets);
      }
    }
  }

  // Digits of `base` with single '_' separators between them; returns the end.
  size_t ScanDigits(size_t p, int base) const {
    auto digit = [&](size_t i) { return i < src_.size() && HexDigit(src_[i]) >= 0 && HexDigit(src_[i]) < base; };
    size_t start = p;
    while (digit(p) || (src_[p] == '_' && p > start && digit(p + 1))) ++p;
    return p;
  }

  size_t LexNumber(size_t start) {
    if (src_[start] == '0' && start + 1 < src_.size()) {
      char b = static_cast<char>(src_[start + 1] | 0x20);
      int base = b == 'b' ? 2 : b == 'o' ? 8 : b == 'x' ? 16 : 0;
      size_t end = base != 0 ? ScanDigits(start + 2, base) : 0;
      if (base != 0 && end > start + 2) return EmitInteger(start, start + 2, end, base);
    }
    size_t p = ScanDigits(start, 10);
    bool is_float = false;
    bool after_dot = start > 0 && src_[start - 1] == '.';  // `x.0.1` indexes twice, it is no float
    if (!after_dot && p + 1 < src_.size() && src_[p] == '.' && IsDigit(src_[p + 1])) {
      p = ScanDigits(p + 1, 10);
      is_float = true;
    }
    if (!after_dot && p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && IsDigit(src_[q])) {
        p = ScanDigits(q, 10);
        is_float = true;
      }
    }
    if (!is_float) {
      if (src_[start] != '0') return EmitInteger(start, start, p, 10);
      // Jinja reads "0", "00", "0_0"; a decimal with a leading zero ("012") lexes as "0" then "12".
      size_t end = start + 1;
      while (end < src_.size() && (src_[end] == '0' || (src_[end] == '_' && end + 1 < src_.size() && src_[end + 1] == '0')))
        ++end;
      return EmitInteger(start, start, end, 10);
    }
    std::string digits;
    for (size_t i = start; i < p; ++i)
      if (src_[i] != '_') digits += src_[i];
    Token token{TokenKind::kFloat, static_cast<uint32_t>(start), src_.substr(start, p - start)};
    auto result = std::from_chars(digits.data(), digits.data() + digits.size(), token.float_value);
    if (result.ec == std::errc::result_out_of_range) Fail(start, "float literal out of range");
    tokens_.push_back(std::move(token));
    return p;
  }

  size_t EmitInteger(size_t start, size_t digits_start, size_t end, int base) {
    std::string digits;
    for (size_t i = digits_start; i < end; ++i)
      if (src_[i] != '_') digits += src_[i];
    Token token{TokenKind::kInteger, static_cast<uint32_t>(start), src_.substr(start, end - start)};
    auto result = std::from_chars(digits.data(), digits.data() + digits.size(), token.int_value, base);
    if (result.ec != std::errc()) Fail(start, fmt::format("integer literal {} does not fit in 64 bits", token.text));
    tokens_.push_back(std::move(token));
    return end;
  }

  size_t LexString(size_t start) {
    char quote = src_[start];
    std::string value;
    size_t p = start + 1;
    while (true) {
      if (p >= src_.size()) Fail(start, "unterminated string literal");
      char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) Fail(start, "unterminated string literal");
      p = LexEscape(p, value);
    }
    tokens_.push_back(Token{TokenKind::kString, static_cast<uint32_t>(start), std::move(value)});
    return p + 1;
  }

  // Python string escapes; an unknown escape keeps its backslash, as Python does. Returns the end.
  size_t LexEscape(size_t backslash, std::string& value) {
    size_t p = backslash + 1;
    char c = src_[p];
    auto hex = [&](size_t count) {
      char32_t cp = 0;
      for (size_t i = 1; i <= count; ++i) {
        int d = p + i < src_.size() ? HexDigit(src_[p + i]) : -1;
        if (d < 0) Fail(backslash, fmt::format("truncated \\{} escape in string literal", c));
        cp = cp * 16 + static_cast<char32_t>(d);
      }
      if (cp > 0x10FFFF) Fail(backslash, "escape beyond U+10FFFF in string literal");
      AppendCodePoint(value, cp);
      return p + 1 + count;
    };
    static constexpr std::string_view kSimple = "\\\\''\"\"a\ab\bf\fn\nr\rt\tv\v";  // escape, value pairs
    for (size_t i = 0; i < kSimple.size(); i += 2) {
      if (c == kSimple[i]) {
        value += kSimple[i + 1];
        return p + 1;
      }
    }
    if (c == '\n') return p + 1;  // a line continuation
    if (c == 'x') return hex(2);
    if (c == 'u') return hex(4);
    if (c == 'U') return hex(8);
    if (c >= '0' && c <= '7') {
      char32_t cp = 0;
      size_t q = p;
      for (; q < p + 3 && q < src_.size() && src_[q] >= '0' && src_[q] <= '7'; ++q) cp = cp * 8 + (src_[q] - '0');
      AppendCodePoint(value, cp);
      return q;
    }
    value += '\\';
    return p;
  }

  size_t LexOperator(size_t p, std::string& brackets) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (std::string_view op : kTwo) {
      if (StartsWith(p, op)) {
        tokens_.push_back(Token{TokenKind::kOperator, static_cast<uint32_t>(p), std::string(op)});
        return p + 2;
      }
    }
    char c = src_[p];
    if (std::string_view("+-*/%~()[]{}<>=.,:|;").find(c) == std::string_view::npos) {
      size_t length = 0;
      DecodeCodePoint(src_, p, &length);
      Fail(p, fmt::format("unexpected character '{}' in a tag", src_.substr(p, length)));
    }
    if (c == '(' || c == '[' || c == '{') brackets += c == '(' ? ')' : c == '[' ? ']' : '}';
    if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) Fail(p, fmt::format("unexpected '{}'", c));
      if (brackets.back() != c) Fail(p, fmt::format("unexpected '{}', expected '{}'", c, brackets.back()));
      brackets.pop_back();
    }
    tokens_.push_back(Token{TokenKind::kOperator, static_cast<uint32_t>(p), std::string(1, c)});
    return p + 1;
  }

  const std::string& src_;
  const SourceMap& map_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> Tokenize(const std::string& source, const SourceMap& map) { return Lexer(source, map).Run(); }

}  // namespace infernix::jinja
