#include "grammar/gbnf.h"

#include <map>

#include "base/error.h"
#include "grammar/text_cursor.h"

namespace infernix::grammar {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class Parser final : public TextCursor {
 public:
  explicit Parser(std::string_view text) : TextCursor(text) {}

  Grammar Parse(std::string_view root_name) {
    SkipSpace();
    if (AtEnd()) Fail(pos_, "the grammar is empty (expected a rule `name ::= ...`)");
    while (!AtEnd()) ParseRule();
    for (const auto& [name, where] : first_use_) {
      if (defined_.count(name) == 0) Fail(where, "undefined rule '" + name + "'");
    }
    if (defined_.count(std::string(root_name)) == 0) {
      Fail(text_.size(), "no '" + std::string(root_name) + "' rule (the start symbol)");
    }
    if (auto found = FindLeftRecursion(builder_.grammar())) {
      // Helper rules are named "<rule>-<n>" after the rule they came from.
      std::string name = builder_.grammar().rules[found->first].name;
      while (defined_.count(name) == 0 && name.find('-') != std::string::npos) name.resize(name.rfind('-'));
      const auto it = defined_.find(name);
      CheckNoLeftRecursion(builder_.grammar(), it == defined_.end() ? std::string() : Where(it->second) + ": ");
    }
    return builder_.Finish(builder_.RuleId(std::string(root_name)));
  }

 private:
  [[noreturn]] void Fail(size_t pos, const std::string& what) const override {
    ThrowError(ErrorCode::kInvalidArgument, "grammar error at {}: {}", Where(pos), what);
  }

  std::string Where(size_t pos) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
  }


  void SkipSpace() {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string ParseName() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    if (pos_ == start) Fail(start, "expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  // Whether a rule definition `name ::=` starts at the current position.
  bool AtRuleStart() const {
    size_t p = pos_;
    while (p < text_.size() && IsNameChar(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\n' || text_[p] == '\r')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  void ParseRule() {
    const size_t start = pos_;
    const std::string name = ParseName();
    SkipSpace();
    if (text_.substr(pos_, 3) != "::=") Fail(pos_, "expected '::=' after rule name '" + name + "'");
    pos_ += 3;
    if (!defined_.emplace(name, start).second) Fail(start, "rule '" + name + "' is defined twice");
    const uint32_t id = builder_.RuleId(name);
    std::vector<Sequence> alternatives = ParseAlternatives(name, /*nested=*/false);
    builder_.rule(id).alternatives = std::move(alternatives);
  }

  std::vector<Sequence> ParseAlternatives(const std::string& rule_name, bool nested) {
    std::vector<Sequence> alternatives;
    alternatives.push_back(ParseSequence(rule_name, nested));
    while (Peek() == '|') {
      ++pos_;
      alternatives.push_back(ParseSequence(rule_name, nested));
    }
    return alternatives;
  }

  Sequence ParseSequence(const std::string& rule_name, bool nested) {
    Sequence seq;
    for (;;) {
      SkipSpace();
      if (AtEnd()) break;
      const char c = Peek();
      if (c == '|') break;
      if (c == ')') {
        if (!nested) Fail(pos_, "unexpected ')'");
        break;
      }
      if (!nested && AtRuleStart()) break;
      Sequence item = ParsePrimary(rule_name);
      ParsePostfix(rule_name, &item);
      seq.insert(seq.end(), item.begin(), item.end());
    }
    return seq;
  }

  // One primary: a literal (possibly several elements), a class, a reference or a group.
  Sequence ParsePrimary(const std::string& rule_name) {
    const char c = Peek();
    Sequence seq;
    if (c == '"') {
      const size_t start = pos_++;
      for (;;) {
        if (AtEnd()) Fail(start, "unterminated string literal");
        if (Peek() == '"') break;
        if (Peek() == '\n') Fail(start, "unterminated string literal (newline before the closing '\"')");
        seq.push_back(builder_.CodePoint(ParseChar()));
      }
      ++pos_;
    } else if (c == '[') {
      seq.push_back(ParseClass());
    } else if (c == '.') {
      ++pos_;
      seq.push_back(builder_.Chars({{0, kMaxCodePoint}}));
    } else if (c == '(') {
      const size_t start = pos_++;
      std::vector<Sequence> alternatives = ParseAlternatives(rule_name, /*nested=*/true);
      SkipSpace();
      if (Peek() != ')') Fail(start, "unclosed '(' (expected ')')");
      ++pos_;
      seq.push_back({Element::Kind::kRule, builder_.AddHelper(rule_name, std::move(alternatives))});
    } else if (IsNameChar(c)) {
      const size_t start = pos_;
      const std::string name = ParseName();
      first_use_.emplace(name, start);
      seq.push_back({Element::Kind::kRule, builder_.RuleId(name)});
    } else {
      Fail(pos_, std::string("unexpected character '") + c + "'");
    }
    return seq;
  }

  Element ParseClass() {
    const size_t start = pos_++;
    bool negate = false;
    if (Peek() == '^') {
      negate = true;
      ++pos_;
    }
    std::vector<CharRange> ranges;
    for (;;) {
      if (AtEnd()) Fail(start, "unterminated character class (expected ']')");
      if (Peek() == ']') break;
      const char32_t lo = ParseChar();
      char32_t hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        const size_t hi_pos = pos_;
        hi = ParseChar();
        if (hi < lo) Fail(hi_pos, "character range is reversed (end below start)");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    return builder_.Chars(MakeCharClass(std::move(ranges), negate));
  }

  // One character of a literal or class, escapes decoded; multi-byte UTF-8 read whole.
  char32_t ParseChar() {
    if (Peek() != '\\') return ParseUtf8Char();
    const size_t start = pos_++;
    if (AtEnd()) Fail(start, "unterminated escape sequence");
    const char e = text_[pos_++];
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '0': return 0;
      case '\\': case '"': case '\'': case '[': case ']': case '-': case '/': case '^': return static_cast<char32_t>(e);
      case 'x': return ParseScalarHex(start, 2);
      case 'u': return ParseScalarHex(start, 4);
      case 'U': return ParseScalarHex(start, 8);
      default: Fail(start, std::string("unknown escape '\\") + e + "'");
    }
  }

  // A \x / \u / \U escape's digits, which must name a Unicode scalar value.
  char32_t ParseScalarHex(size_t start, int digits) {
    const char32_t cp = ParseHex(start, digits);
    if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) Fail(start, "bad escape: not a Unicode scalar value");
    return cp;
  }

  // Applies postfix operators to `item` (which may be several elements: a literal).
  void ParsePostfix(const std::string& rule_name, Sequence* item) {
    for (;;) {
      const char c = Peek();
      if (c != '*' && c != '+' && c != '?' && c != '{') return;
      const size_t op = pos_++;
      int min = 0, max = -1;
      if (c == '+') min = 1;
      if (c == '?') max = 1;
      if (c == '{') {
        SkipSpace();
        min = ParseInt();
        SkipSpace();
        max = min;
        if (Peek() == ',') {
          ++pos_;
          SkipSpace();
          max = Peek() == '}' ? -1 : ParseInt();
          SkipSpace();
        }
        if (Peek() != '}') Fail(op, "unterminated repetition (expected '}')");
        ++pos_;
        if (max >= 0 && max < min) Fail(op, "repetition {m,n} with n < m");
      }
      Element unit = item->size() == 1 ? (*item)[0]
                                       : Element{Element::Kind::kRule, builder_.AddHelper(rule_name, {*item})};
      *item = builder_.Repeat(rule_name, unit, min, max);
    }
  }

  GrammarBuilder builder_;
  std::map<std::string, size_t> defined_;
  std::map<std::string, size_t> first_use_;
};

}  // namespace

Grammar ParseGbnf(std::string_view text, std::string_view root) { return Parser(text).Parse(root); }

std::string_view JsonGbnf() {
  return R"gbnf(root   ::= value
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array  ::= "[" ws ( element ( "," ws element )* )? "]"
element ::= value ws
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n\r]*
)gbnf";
}

}  // namespace infernix::grammar
