#include "chat/output/text_scan.h"

#include <algorithm>

namespace infernix::output {

Match MatchLiteral(std::string_view text, std::string_view literal) {
  size_t n = std::min(text.size(), literal.size());
  if (text.substr(0, n) != literal.substr(0, n)) return Match::kNo;
  return n == literal.size() ? Match::kYes : Match::kPartial;
}

Match MatchToolCallStart(std::string_view text, bool at_end, ToolCallForm* form) {
  // More whitespace than this between the tags is not a tool call (and it bounds what is held back).
  constexpr size_t kMaxGap = 64;
  auto skip_space = [&](size_t i) {
    size_t start = i;
    while (i < text.size() && IsSpace(text[i]) && i - start <= kMaxGap) ++i;
    return i - start > kMaxGap ? std::string_view::npos : i;
  };
  Match open = MatchLiteral(text, kToolCallOpen);
  if (open != Match::kYes) return open == Match::kPartial && !at_end ? Match::kPartial : Match::kNo;
  size_t i = skip_space(kToolCallOpen.size());
  if (i == std::string_view::npos) return Match::kNo;
  if (i == text.size()) return at_end ? Match::kNo : Match::kPartial;
  if (text[i] == '{') {
    size_t j = skip_space(i + 1);
    if (j == std::string_view::npos) return Match::kNo;
    if (j == text.size()) return at_end ? Match::kNo : Match::kPartial;
    if (text[j] != '"') return Match::kNo;
    *form = ToolCallForm::kJson;
    return Match::kYes;
  }
  Match function = MatchLiteral(text.substr(i), kFunctionOpen);
  if (function == Match::kYes) {
    *form = ToolCallForm::kXml;
    return Match::kYes;
  }
  return function == Match::kPartial && !at_end ? Match::kPartial : Match::kNo;
}

void FenceTracker::Feed(std::string_view text) {
  for (char c : text) Feed(c);
}

void FenceTracker::Feed(char c) {
  if (c == '\n') {
    EndMarker();
    StartLine();
    return;
  }
  if (line_decided_) return;
  if (run_len_ == 0 && c == ' ' && indent_ < 3) {
    ++indent_;
  } else if ((c == '`' || c == '~') && (run_len_ == 0 || c == run_char_)) {
    run_char_ = c;
    ++run_len_;
  } else {
    EndMarker();
  }
}

void FenceTracker::EndMarker() {
  if (!line_decided_ && run_len_ >= 3) {
    if (!in_fence_) {
      in_fence_ = true;
      fence_char_ = run_char_;
      fence_len_ = run_len_;
    } else if (run_char_ == fence_char_ && run_len_ >= fence_len_) {
      in_fence_ = false;
    }
  }
  line_decided_ = true;
  run_len_ = 0;
}

bool FenceTracker::InFenceBeforeMarkup() {
  EndMarker();
  return in_fence_;
}

void FenceTracker::StartLine() {
  line_decided_ = false;
  indent_ = 0;
  run_len_ = 0;
}

std::string NewlineTrimmer::Add(std::string_view text) {
  std::string out;
  if (segment_start_) {
    size_t first = text.find_first_not_of('\n');
    if (first == std::string_view::npos) return out;
    text.remove_prefix(first);
    segment_start_ = false;
  }
  size_t last = text.find_last_not_of('\n');
  if (last == std::string_view::npos) {
    held_newlines_ += text.size();
    return out;
  }
  out.reserve(held_newlines_ + last + 1);
  out.append(held_newlines_, '\n');
  out.append(text.substr(0, last + 1));
  held_newlines_ = text.size() - last - 1;
  return out;
}

void AppendJsonEscaped(std::string_view text, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char c : text) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default: {
        auto u = static_cast<unsigned char>(c);
        if (u < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[u >> 4]);
          out->push_back(kHex[u & 0xF]);
        } else {
          out->push_back(c);
        }
      }
    }
  }
}

}  // namespace infernix::output
