#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/check.h"
#include "base/error.h"

namespace infernix {
namespace {

// Unicode White_Space, Oniguruma's \s, as the body of a PCRE2 character class. (PCRE2's own \s
// under UCP also matches U+180E.)
constexpr std::string_view kSpaceClass =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
// Oniguruma's Unicode \w: Alphabetic, Mark, Decimal_Number, Connector_Punctuation (PCRE2 10.42's \w
// under UCP lacks marks and connector punctuation other than '_').
constexpr std::string_view kWordClass = R"(\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D})";

// The most a JIT match may use for backtracking when the default 32 KiB machine stack is too small.
constexpr size_t kMaxJitStack = size_t{8} << 20;

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

std::string TranslateOnigPattern(std::string_view pattern, std::string_view source) {
  std::string out;
  out.reserve(pattern.size() * 2);
  int class_depth = 0;
  size_t class_body = std::string_view::npos;  // where the body of the innermost open class starts
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      const bool in_class = class_depth > 0;
      std::string_view body;
      if (e == 's' || e == 'S') body = kSpaceClass;
      if (e == 'w' || e == 'W') body = kWordClass;
      if (e == 'h' || e == 'H' || ((e == 'S' || e == 'W') && in_class)) {
        ThrowError(ErrorCode::kUnsupported, "{}: pre_tokenizer pattern '{}': the escape \\{} is not supported", source,
                   pattern, e);
      }
      if (body.empty()) {
        out += '\\';
        out += e;
      } else if (in_class) {
        out += body;
      } else {
        out += (e == 's' || e == 'w') ? "[" : "[^";
        out += body;
        out += ']';
      }
      continue;
    }
    if (c == '[') {
      ++class_depth;
      class_body = i + 1 < pattern.size() && pattern[i + 1] == '^' ? i + 2 : i + 1;
    } else if (c == ']' && class_depth > 0 && i != class_body) {  // "[]" and "[^]" start with a literal ']'
      --class_depth;
    }
    out += c;
  }
  return out;
}

std::string EscapeRegexLiteral(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    const bool plain = u >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!plain) out += '\\';
    out += c;
  }
  return out;
}

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns, std::string_view source) {
  for (const std::string& pattern : patterns) {
    const std::string translated = TranslateOnigPattern(pattern, source);
    int error = 0;
    PCRE2_SIZE offset = 0;
    auto regex = std::make_unique<Regex>();
    regex->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (regex->code == nullptr) {
      ThrowError(ErrorCode::kInvalidFormat, "{}: pre_tokenizer pattern '{}' does not compile: {} (at offset {})", source,
                 pattern, Pcre2Message(error), offset);
    }
    // Without JIT support (some platforms) pcre2_match falls back to the interpreter.
    pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);
    regexes_.push_back(std::move(regex));
  }
}

PreTokenizer::~PreTokenizer() = default;

namespace {

// Per-call PCRE2 state: match data, and a larger JIT stack made only when a match needs one.
class MatchState {
 public:
  explicit MatchState(const pcre2_code* code) : data_(pcre2_match_data_create_from_pattern(code, nullptr)) {}
  ~MatchState() {
    pcre2_match_data_free(data_);
    pcre2_match_context_free(context_);
    pcre2_jit_stack_free(stack_);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;

  // Finds the first match at or after `start`; false when there is none.
  bool Find(const pcre2_code* code, std::string_view text, size_t start, size_t* match_start, size_t* match_end) {
    for (;;) {
      const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start,
                                 PCRE2_NO_UTF_CHECK, data_, context_);
      if (rc == PCRE2_ERROR_NOMATCH) return false;
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT && stack_ == nullptr) {
        stack_ = pcre2_jit_stack_create(32 * 1024, kMaxJitStack, nullptr);
        context_ = pcre2_match_context_create(nullptr);
        INFX_CHECK(stack_ != nullptr && context_ != nullptr);
        pcre2_jit_stack_assign(context_, nullptr, stack_);
        continue;
      }
      if (rc < 0) {
        ThrowError(ErrorCode::kInternal, "pre-tokenizer regex failed at byte {} of a {}-byte piece: {}", start,
                   text.size(), Pcre2Message(rc));
      }
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data_);
      *match_start = ovector[0];
      *match_end = ovector[1];
      return true;
    }
  }

 private:
  pcre2_match_data* data_;
  pcre2_match_context* context_ = nullptr;
  pcre2_jit_stack* stack_ = nullptr;
};

void SplitWith(const pcre2_code* code, MatchState& state, std::string_view text, std::vector<std::string_view>* out) {
  size_t pos = 0, done = 0;  // search from `pos`; text before `done` is already in *out
  size_t start = 0, end = 0;
  while (pos <= text.size() && state.Find(code, text, pos, &start, &end)) {
    if (start > done) out->push_back(text.substr(done, start - done));
    if (end > start) out->push_back(text.substr(start, end - start));
    done = end;
    pos = end;
    if (end == start) {  // an empty match: step over one character
      if (pos == text.size()) break;
      ++pos;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
  if (done < text.size()) out->push_back(text.substr(done));
}

}  // namespace

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* pieces) const {
  if (text.empty()) return;
  if (regexes_.empty()) {
    pieces->push_back(text);
    return;
  }
  std::vector<std::string_view> current{text}, next;
  for (size_t r = 0; r < regexes_.size(); ++r) {
    const pcre2_code* code = regexes_[r]->code;
    MatchState state(code);
    const bool last = r + 1 == regexes_.size();
    std::vector<std::string_view>* out = last ? pieces : &next;
    for (std::string_view piece : current) SplitWith(code, state, piece, out);
    if (!last) {
      current.swap(next);
      next.clear();
    }
  }
}

}  // namespace infernix
