#include "tokenizer/normalizer.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "base/check.h"
#include "tokenizer/utf8.h"

namespace infernix {

namespace {

// True when the text can be cut just before `cp` without changing its NFC form: `cp` is a starter
// that is NFC-stable and never the second half of a canonical composition. Code points below U+0300
// are (every combining mark, Hangul vowel and other composing second is above), and so are the CJK
// Unified Ideographs.
bool IsNfcBoundary(char32_t cp) { return cp < 0x300 || (cp >= 0x4E00 && cp <= 0x9FFF); }

// Appends the NFC form of `text` (valid UTF-8) to *out.
void AppendNfc(std::string_view text, std::string* out) {
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &result, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  // The input is valid UTF-8, so utf8proc can only fail on memory exhaustion.
  INFX_CHECK_MSG(n >= 0, "utf8proc_map failed: {}", utf8proc_errmsg(n));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(result, &std::free);
  out->append(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
}

}  // namespace

std::string_view Normalizer::Apply(std::string_view text, std::string* buffer) const {
  if (kind_ == NormalizerKind::kNone) return text;
  // Only the stretches between NFC boundaries that contain a non-boundary character can change; each
  // goes through utf8proc on its own, the rest is copied. Lead bytes below 0xCC encode code points
  // below U+0300, so the scan for candidates is bytewise.
  size_t copied = 0;  // text before `copied` is in *buffer
  size_t pos = 0;     // the character being looked at
  size_t last_boundary = 0;  // start of the last boundary character before `pos`
  bool changed = false;
  while (pos < text.size()) {
    const auto lead = static_cast<unsigned char>(text[pos]);
    if (lead < 0xCC) {
      if (lead < 0x80 || lead >= 0xC0) last_boundary = pos;
      ++pos;
      continue;
    }
    size_t next = pos;
    if (IsNfcBoundary(utf8::DecodeAt(text, &next))) {
      last_boundary = pos;
      pos = next;
      continue;
    }
    // A stretch to normalize: from the boundary before `pos` to the next boundary after it.
    const size_t begin = std::max(last_boundary, copied);
    size_t end = next;
    while (end < text.size()) {
      size_t after = end;
      if (IsNfcBoundary(utf8::DecodeAt(text, &after))) break;
      end = after;
    }
    if (!changed) buffer->clear();
    changed = true;
    buffer->append(text.substr(copied, begin - copied));
    AppendNfc(text.substr(begin, end - begin), buffer);
    copied = pos = last_boundary = end;
  }
  if (!changed) return text;
  buffer->append(text.substr(copied));
  return *buffer;
}

}  // namespace infernix
