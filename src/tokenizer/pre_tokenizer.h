// Pre-tokenization: splitting normalized text into the pieces that BPE encodes one by one, with the
// regular expressions of Hugging Face "Split" pre-tokenizers (behavior "Isolated": each match and
// each stretch of text between matches becomes a piece). Patterns are written in Oniguruma syntax in
// tokenizer.json; they are translated to PCRE2 (UTF + UCP, JIT-compiled) so that \s, \S, \w and \W
// keep Oniguruma's Unicode meaning.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace infernix {

// The regex of Hugging Face's ByteLevel pre-tokenizer with use_regex = true (GPT-2's split).
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Rewrites an Oniguruma pattern for PCRE2. Throws Error(kUnsupported) naming `source` for escapes
// whose meaning differs and cannot be rewritten (\h, \H, and \S or \W inside a character class).
std::string TranslateOnigPattern(std::string_view pattern, std::string_view source);

// A pattern that matches `literal` exactly (for Split patterns given as {"String": ...}).
std::string EscapeRegexLiteral(std::string_view literal);

class PreTokenizer {
 public:
  // `patterns` (Oniguruma syntax) are applied in order, each to every piece the previous one made.
  // No patterns: the whole text is one piece. Throws Error(kInvalidFormat) naming `source` when a
  // pattern does not compile.
  PreTokenizer(const std::vector<std::string>& patterns, std::string_view source);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Appends the non-empty pieces of `text` (valid UTF-8) to *pieces, in order; they are views into
  // `text` and cover it exactly. Thread-safe: match state is per call.
  void Split(std::string_view text, std::vector<std::string_view>* pieces) const;

 private:
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace infernix
