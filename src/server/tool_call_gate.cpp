#include "server/tool_call_gate.h"

namespace infernix {

void ToolCallGate::Feed(std::string_view text) {
  constexpr std::string_view kClose = output::kThinkClose;
  // The last `</think>` that ends in this text: inside it, or across the end of the previous text (looked
  // for in a short window, so no copy of the whole text is made per token).
  size_t after = std::string_view::npos;  // offset in `text` right after that `</think>`
  if (const size_t at = text.rfind(kClose); at != std::string_view::npos) {
    after = at + kClose.size();
  } else {
    const std::string edge = tail_ + std::string(text.substr(0, kClose.size() - 1));
    const size_t at_edge = edge.rfind(kClose);
    if (at_edge != std::string::npos && at_edge + kClose.size() > tail_.size())
      after = at_edge + kClose.size() - tail_.size();
  }
  if (after != std::string_view::npos) {
    // The reasoning ended in this text: the content starts outside any fence.
    fence_ = output::FenceTracker{};
    fence_.Feed(text.substr(after));
  } else {
    fence_.Feed(text);
  }
  const size_t keep = kClose.size() - 1;
  if (text.size() >= keep) {
    tail_.assign(text.substr(text.size() - keep));
  } else {
    tail_ += text;
    if (tail_.size() > keep) tail_.erase(0, tail_.size() - keep);
  }
}

}  // namespace infernix
