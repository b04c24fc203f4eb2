#include "grammar/regex.h"

#include "base/error.h"
#include "grammar/text_cursor.h"
#include "tokenizer/utf8.h"

namespace infernix::grammar {
namespace {

CharClass Digits() { return {{'0', '9'}}; }
CharClass Word() { return MakeCharClass({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}, false); }
CharClass Space() { return MakeCharClass({{'\t', '\r'}, {' ', ' '}}, false); }

class RegexParser final : public TextCursor {
 public:
  explicit RegexParser(std::string_view pattern) : TextCursor(pattern) {}

  Grammar Parse() {
    const uint32_t root = builder_.RuleId("root");
    if (Peek() == '^') ++pos_;
    std::vector<Sequence> alternatives = ParseAlternatives(/*depth=*/0);
    if (!AtEnd()) Fail(pos_, "unexpected ')'");
    builder_.rule(root).alternatives = std::move(alternatives);
    return builder_.Finish(root);
  }

 private:
  [[noreturn]] void Fail(size_t pos, const std::string& what) const override {
    ThrowError(ErrorCode::kInvalidArgument, "regex error at column {}: {}", pos + 1, what);
  }

  std::vector<Sequence> ParseAlternatives(int depth) {
    std::vector<Sequence> alternatives = {ParseSequence(depth)};
    while (Peek() == '|') {
      ++pos_;
      alternatives.push_back(ParseSequence(depth));
    }
    return alternatives;
  }

  Sequence ParseSequence(int depth) {
    Sequence seq;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '$' && pos_ + 1 == text_.size() && depth == 0) {
        ++pos_;
        break;
      }
      const Element atom = ParseAtom(depth);
      const Sequence repeated = ParseQuantifier(atom);
      seq.insert(seq.end(), repeated.begin(), repeated.end());
    }
    return seq;
  }

  Element ParseAtom(int depth) {
    const size_t start = pos_;
    const char c = text_[pos_];
    switch (c) {
      case '(': {
        ++pos_;
        if (Peek() == '?') {
          if (Peek(1) != ':') Fail(start, "lookaround and named groups are not supported (only (?:...))");
          pos_ += 2;
        }
        std::vector<Sequence> alternatives = ParseAlternatives(depth + 1);
        if (Peek() != ')') Fail(start, "unclosed '('");
        ++pos_;
        return {Element::Kind::kRule, builder_.AddHelper("group", std::move(alternatives))};
      }
      case '[':
        return builder_.Chars(ParseClass());
      case '.':
        ++pos_;
        return builder_.Chars(MakeCharClass({{'\n', '\n'}, {'\r', '\r'}}, true));
      case '*': case '+': case '?': case '{':
        Fail(start, std::string("nothing to repeat before '") + c + "'");
      case '^': case '$':
        Fail(start, std::string("anchor '") + c + "' is only supported at the start / end of the pattern");
      case '\\': {
        CharClass cls;
        ParseEscape(&cls, /*in_class=*/false);
        return builder_.Chars(std::move(cls));
      }
      default:
        return builder_.CodePoint(ParseUtf8Char());
    }
  }

  // An escape at pos_ ('\\'): sets *cls to its class. Returns true for a class escape (\d ...),
  // false for a single character.
  bool ParseEscape(CharClass* cls, bool in_class) {
    const size_t start = pos_++;
    if (AtEnd()) Fail(start, "pattern ends in '\\'");
    const char e = text_[pos_++];
    char32_t cp = 0;
    switch (e) {
      case 'd': *cls = Digits(); return true;
      case 'D': *cls = MakeCharClass(Digits(), true); return true;
      case 'w': *cls = Word(); return true;
      case 'W': *cls = MakeCharClass(Word(), true); return true;
      case 's': *cls = Space(); return true;
      case 'S': *cls = MakeCharClass(Space(), true); return true;
      case 'n': cp = '\n'; break;
      case 'r': cp = '\r'; break;
      case 't': cp = '\t'; break;
      case 'f': cp = '\f'; break;
      case 'v': cp = '\v'; break;
      case '0': cp = 0; break;
      case 'x': cp = ParseHex(start, 2); break;
      case 'u':
        if (Peek() == '{') {
          ++pos_;
          const size_t digits = pos_;
          while (!AtEnd() && Peek() != '}') ++pos_;
          if (AtEnd() || pos_ == digits || pos_ - digits > 6) Fail(start, "bad escape: expected \\u{1-6 hex digits}");
          pos_ = digits;
          cp = ParseHex(start, static_cast<int>(text_.find('}', digits) - digits));
          ++pos_;
        } else {
          cp = ParseHex(start, 4);
        }
        break;
      default:
        if (e == 'b' && in_class) {
          cp = '\b';
          break;
        }
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
          Fail(start, std::string("unsupported escape '\\") + e + "'");
        }
        cp = static_cast<unsigned char>(e);
        if (cp >= 0x80) Fail(start, "escape of a non-ASCII byte");
    }
    if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) Fail(start, "bad escape: not a Unicode scalar value");
    *cls = {{cp, cp}};
    return false;
  }

  CharClass ParseClass() {
    const size_t start = pos_++;
    bool negate = false;
    if (Peek() == '^') {
      negate = true;
      ++pos_;
    }
    std::vector<CharRange> ranges;
    for (bool first = true;; first = false) {
      if (AtEnd()) Fail(start, "unterminated character class (expected ']')");
      if (Peek() == ']' && !first) break;
      const size_t lo_pos = pos_;
      CharClass lo;
      if (!ParseClassItem(&lo) && Peek() == '-' && Peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        CharClass hi;
        if (ParseClassItem(&hi)) Fail(lo_pos, "a class escape cannot end a range");
        if (hi[0].lo < lo[0].lo) Fail(lo_pos, "character range is reversed (end below start)");
        ranges.push_back({lo[0].lo, hi[0].lo});
        continue;
      }
      ranges.insert(ranges.end(), lo.begin(), lo.end());
    }
    ++pos_;
    return MakeCharClass(std::move(ranges), negate);
  }

  // One item of a class: a character (returns false, *cls its single code point) or a class escape.
  bool ParseClassItem(CharClass* cls) {
    if (Peek() == '\\') return ParseEscape(cls, /*in_class=*/true);
    const char32_t cp = ParseUtf8Char();
    *cls = {{cp, cp}};
    return false;
  }

  Sequence ParseQuantifier(Element atom) {
    Sequence seq = {atom};
    for (;;) {
      const char c = Peek();
      if (c != '*' && c != '+' && c != '?' && c != '{') return seq;
      const size_t op = pos_++;
      int min = 0, max = -1;
      if (c == '+') min = 1;
      if (c == '?') max = 1;
      if (c == '{') {
        min = ParseInt();
        max = min;
        if (Peek() == ',') {
          ++pos_;
          max = Peek() == '}' ? -1 : ParseInt();
        }
        if (Peek() != '}') Fail(op, "unterminated repetition (expected '}')");
        ++pos_;
        if (max >= 0 && max < min) Fail(op, "repetition {m,n} with n < m");
      }
      if (Peek() == '?') ++pos_;  // lazy: the same language
      if (Peek() == '*' || Peek() == '+' || Peek() == '{') Fail(pos_, "nested quantifier (use a group)");
      const Element unit = seq.size() == 1 ? seq[0] : Element{Element::Kind::kRule, builder_.AddHelper("repeat", {seq})};
      seq = builder_.Repeat("repeat", unit, min, max);
      return seq;
    }
  }

  GrammarBuilder builder_;
};

}  // namespace

Grammar ChoicesGrammar(const std::vector<std::string>& choices) {
  if (choices.empty()) ThrowError(ErrorCode::kInvalidArgument, "choices: the list of choices is empty");
  GrammarBuilder builder;
  const uint32_t root = builder.RuleId("root");
  std::vector<Sequence> alternatives;
  for (size_t i = 0; i < choices.size(); ++i) {
    const std::string& choice = choices[i];
    if (const size_t bad = utf8::FindInvalid(choice); bad != utf8::kValid) {
      ThrowError(ErrorCode::kInvalidArgument, "choices: choice {} is not valid UTF-8 (byte {})", i, bad);
    }
    Sequence seq;
    builder.AppendLiteral(choice, &seq);
    alternatives.push_back(std::move(seq));
  }
  builder.rule(root).alternatives = std::move(alternatives);
  return builder.Finish(root);
}

Grammar ParseRegex(std::string_view pattern) { return RegexParser(pattern).Parse(); }

}  // namespace infernix::grammar
