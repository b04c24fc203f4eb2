// UTF-8 helpers for the template engine: Python's str works on code points, our strings are UTF-8
// bytes. Invalid bytes are never rejected: each one counts as a single code point (U+FFFD when a
// value is needed) and is copied through unchanged, so no input can make these functions fail.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace infernix::jinja {

// Decodes the code point starting at s[pos]; sets *length to its byte length (>= 1).
char32_t DecodeCodePoint(std::string_view s, size_t pos, size_t* length);
void AppendCodePoint(std::string& out, char32_t cp);

size_t CountCodePoints(std::string_view s);
// Byte offset of every code point of s, followed by s.size() (so the result has n + 1 entries).
std::vector<size_t> CodePointOffsets(std::string_view s);
// The code points of s, each as its own string.
std::vector<std::string> SplitCodePoints(std::string_view s);

// Python's str.isspace() for one code point.
bool IsPySpace(char32_t cp);
// Python's str.splitlines() line boundaries (\n, \r, \r\n, \v, \f, \x1c-\x1e, \x85, \u2028, \u2029).
std::vector<std::string> SplitLines(std::string_view s, bool keep_ends);

// Simple case mapping: ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic; other code points are
// returned unchanged.
char32_t ToUpperCodePoint(char32_t cp);
char32_t ToLowerCodePoint(char32_t cp);
bool IsCased(char32_t cp);
// Letters, digits and '_' as Python's regex \w sees them (any non-ASCII code point that is not
// whitespace counts as a letter).
bool IsWordCodePoint(char32_t cp);

std::string ToUpper(std::string_view s);
std::string ToLower(std::string_view s);
std::string Capitalize(std::string_view s);  // Python str.capitalize()
std::string PyTitle(std::string_view s);     // Python str.title()

// Python str.strip / lstrip / rstrip. chars == nullptr strips whitespace (IsPySpace).
std::string_view PyStrip(std::string_view s, const std::string_view* chars, bool left, bool right);

}  // namespace infernix::jinja
