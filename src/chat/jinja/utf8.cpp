#include "chat/jinja/utf8.h"

#include <algorithm>

namespace infernix::jinja {

char32_t DecodeCodePoint(std::string_view s, size_t pos, size_t* length) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char b0 = byte(pos);
  *length = 1;
  if (b0 < 0x80) return b0;
  size_t n = b0 >= 0xF0 && b0 < 0xF8 ? 4 : b0 >= 0xE0 && b0 < 0xF0 ? 3 : b0 >= 0xC2 && b0 < 0xE0 ? 2 : 0;
  if (n == 0 || pos + n > s.size()) return 0xFFFD;
  char32_t cp = b0 & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return 0xFFFD;
    cp = (cp << 6) | (byte(pos + i) & 0x3F);
  }
  *length = n;
  return cp;
}

void AppendCodePoint(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t CountCodePoints(std::string_view s) {
  size_t count = 0, length = 0;
  for (size_t pos = 0; pos < s.size(); pos += length) {
    DecodeCodePoint(s, pos, &length);
    ++count;
  }
  return count;
}

std::vector<size_t> CodePointOffsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  size_t length = 0;
  for (size_t pos = 0; pos < s.size(); pos += length) {
    offsets.push_back(pos);
    DecodeCodePoint(s, pos, &length);
  }
  offsets.push_back(s.size());
  return offsets;
}

std::vector<std::string> SplitCodePoints(std::string_view s) {
  std::vector<std::string> out;
  size_t length = 0;
  for (size_t pos = 0; pos < s.size(); pos += length) {
    DecodeCodePoint(s, pos, &length);
    out.emplace_back(s.substr(pos, length));
  }
  return out;
}

bool IsPySpace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

namespace {

bool IsLineBreak(char32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 ||
         cp == 0x2028 || cp == 0x2029;
}

// Latin Extended-A (U+0100-U+017F) pairs upper and lower case as neighbours: the upper case is the
// even code point, except in U+0139-U+0148 and U+0179-U+017E where it is the odd one.
bool IsPairedLatinA(char32_t cp, bool* upper_is_odd) {
  *upper_is_odd = (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E);
  return (cp >= 0x100 && cp <= 0x137 && cp != 0x130 && cp != 0x131) || *upper_is_odd || (cp >= 0x14A && cp <= 0x177);
}

}  // namespace

std::vector<std::string> SplitLines(std::string_view s, bool keep_ends) {
  std::vector<std::string> lines;
  size_t start = 0, pos = 0, length = 0;
  while (pos < s.size()) {
    char32_t cp = DecodeCodePoint(s, pos, &length);
    if (!IsLineBreak(cp)) {
      pos += length;
      continue;
    }
    size_t end = pos;
    pos += length;
    if (cp == '\r' && pos < s.size() && s[pos] == '\n') ++pos;
    lines.emplace_back(s.substr(start, (keep_ends ? pos : end) - start));
    start = pos;
  }
  if (start < s.size()) lines.emplace_back(s.substr(start));
  return lines;
}

char32_t ToUpperCodePoint(char32_t cp) {
  if (cp >= 'a' && cp <= 'z') return cp - 32;
  if (cp < 0x80) return cp;
  if (cp >= 0xE0 && cp <= 0xFE && cp != 0xF7) return cp - 32;
  if (cp == 0xFF) return 0x178;
  if (cp == 0xB5) return 0x39C;
  if (cp == 0x131) return 'I';
  if (cp == 0x17F) return 'S';
  bool upper_is_odd = false;
  if (IsPairedLatinA(cp, &upper_is_odd)) return (cp % 2 == 1) != upper_is_odd ? cp - 1 : cp;
  if (cp >= 0x3B1 && cp <= 0x3C9 && cp != 0x3C2) return cp - 32;
  if (cp == 0x3C2) return 0x3A3;
  if (cp >= 0x430 && cp <= 0x44F) return cp - 32;
  if (cp >= 0x450 && cp <= 0x45F) return cp - 80;
  return cp;
}

char32_t ToLowerCodePoint(char32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp < 0x80) return cp;
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 32;
  if (cp == 0x178) return 0xFF;
  if (cp == 0x130) return 'i';
  bool upper_is_odd = false;
  if (IsPairedLatinA(cp, &upper_is_odd)) return (cp % 2 == 1) == upper_is_odd ? cp + 1 : cp;
  if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 32;
  if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
  return cp;
}

bool IsCased(char32_t cp) { return ToUpperCodePoint(cp) != cp || ToLowerCodePoint(cp) != cp; }

bool IsWordCodePoint(char32_t cp) {
  if (cp >= 0x80) return !IsPySpace(cp);
  return ((cp | 32) >= 'a' && (cp | 32) <= 'z') || (cp >= '0' && cp <= '9') || cp == '_';
}

namespace {

template <typename Fn>
std::string MapCodePoints(std::string_view s, Fn&& fn) {
  std::string out;
  out.reserve(s.size());
  size_t length = 0;
  for (size_t pos = 0, index = 0; pos < s.size(); pos += length, ++index) {
    char32_t cp = DecodeCodePoint(s, pos, &length);
    char32_t mapped = fn(cp, index);
    if (mapped == cp)
      out.append(s.substr(pos, length));  // keeps invalid bytes as they are
    else
      AppendCodePoint(out, mapped);
  }
  return out;
}

}  // namespace

std::string ToUpper(std::string_view s) {
  return MapCodePoints(s, [](char32_t cp, size_t) { return ToUpperCodePoint(cp); });
}

std::string ToLower(std::string_view s) {
  return MapCodePoints(s, [](char32_t cp, size_t) { return ToLowerCodePoint(cp); });
}

std::string Capitalize(std::string_view s) {
  return MapCodePoints(s, [](char32_t cp, size_t i) { return i == 0 ? ToUpperCodePoint(cp) : ToLowerCodePoint(cp); });
}

std::string PyTitle(std::string_view s) {
  bool previous_cased = false;
  return MapCodePoints(s, [&](char32_t cp, size_t) {
    char32_t mapped = previous_cased ? ToLowerCodePoint(cp) : ToUpperCodePoint(cp);
    previous_cased = IsCased(cp);
    return mapped;
  });
}

std::string_view PyStrip(std::string_view s, const std::string_view* chars, bool left, bool right) {
  std::vector<char32_t> set;
  size_t length = 0;
  if (chars != nullptr)
    for (size_t pos = 0; pos < chars->size(); pos += length) set.push_back(DecodeCodePoint(*chars, pos, &length));
  auto strip = [&](char32_t cp) {
    return chars == nullptr ? IsPySpace(cp) : std::find(set.begin(), set.end(), cp) != set.end();
  };
  std::vector<size_t> offsets = CodePointOffsets(s);
  size_t begin = 0, end = offsets.size() - 1;  // code point indexes
  while (left && begin < end && strip(DecodeCodePoint(s, offsets[begin], &length))) ++begin;
  while (right && end > begin && strip(DecodeCodePoint(s, offsets[end - 1], &length))) --end;
  return s.substr(offsets[begin], offsets[end] - offsets[begin]);
}

}  // namespace infernix::jinja
