// UTF-8 helpers of the tokenizer: validation, code point access, the lossy repair that Hugging Face
// decoders apply, and the two Unicode classes (White_Space, \w) that added-token matching needs.
// All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace infernix::utf8 {

inline constexpr size_t kValid = std::string_view::npos;

// Byte offset of the first byte that does not begin a well-formed UTF-8 sequence (overlong forms,
// surrogates and code points above U+10FFFF are ill-formed, as in Rust and Python), or kValid.
size_t FindInvalid(std::string_view text);

// The code point starting at text[*pos]; advances *pos past it. Precondition: text is valid UTF-8
// and *pos < text.size() is on a character boundary.
char32_t DecodeAt(std::string_view text, size_t* pos);

// The last code point of a non-empty valid UTF-8 string.
char32_t DecodeLast(std::string_view text);

// Appends the UTF-8 encoding of `cp` (which must be a Unicode scalar value).
void Append(char32_t cp, std::string* out);

// Appends `bytes` to `out`, replacing each maximal ill-formed subsequence by one U+FFFD (the
// Unicode "maximal subpart" practice, which Rust's String::from_utf8_lossy and Python's
// errors="replace" follow). When `final` is false, stops before a trailing incomplete sequence that
// more bytes could still complete, so that repairing a stream piecewise gives the same result as
// repairing it whole. Returns the number of bytes of `bytes` consumed.
size_t AppendLossy(std::string_view bytes, bool final, std::string* out);

// Unicode White_Space (what Rust's regex \s and Oniguruma's \s match).
bool IsWhiteSpace(char32_t cp);

// Unicode word character as Rust's regex \w sees it: Alphabetic, Mark, Decimal_Number,
// Connector_Punctuation, Join_Control.
bool IsWordChar(char32_t cp);

}  // namespace infernix::utf8
