// Text normalization applied before pre-tokenization (Hugging Face "normalizer"). Only Unicode NFC is
// implemented (what Qwen uses); it is computed with utf8proc. Immutable and thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace infernix {

enum class NormalizerKind { kNone, kNfc };

class Normalizer {
 public:
  explicit Normalizer(NormalizerKind kind = NormalizerKind::kNone) : kind_(kind) {}

  NormalizerKind kind() const { return kind_; }

  // The normalized form of `text` (valid UTF-8). Returns `text` itself when there is nothing to
  // change (always for kNone; for NFC when no character needs a look, e.g. all below U+0300);
  // otherwise writes the result into *buffer and returns a view of it, valid until *buffer changes.
  // NFC runs utf8proc only on the stretches around characters that may change.
  std::string_view Apply(std::string_view text, std::string* buffer) const;

 private:
  NormalizerKind kind_;
};

}  // namespace infernix
