// Splits a template into tokens, with the whitespace rules of the environment transformers renders
// chat templates in: trim_blocks and lstrip_blocks on, keep_trailing_newline off, plus the
// `-` / `+` whitespace-control markers on tags. Comments are dropped, `{% raw %}` bodies become
// text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja/eval_error.h"

namespace infernix::jinja {

enum class TokenKind : uint8_t {
  kText,           // template text between tags (already whitespace-processed)
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,           // identifier or keyword
  kString,         // text holds the unescaped value
  kInteger,        // int_value
  kFloat,          // float_value
  kOperator,       // text holds the operator: + - * / // % ** ~ == != < <= > >= = . , : | ( ) [ ] { } ;
  kEnd,            // end of the template
};

struct Token {
  TokenKind kind;
  uint32_t offset;  // byte offset in the normalised source
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
};

// Jinja's source normalisation: "\r\n" and "\r" become "\n", and one trailing newline is dropped.
std::string NormalizeSource(std::string_view source);

// Tokenizes a normalised source. Throws infernix::Error (kInvalidFormat) with line and column for
// unterminated tags, comments and strings, unbalanced brackets and unexpected characters.
std::vector<Token> Tokenize(const std::string& source, const SourceMap& map);

}  // namespace infernix::jinja
