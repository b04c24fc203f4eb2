#include "server/tool_call_gate.h"

namespace infernix {

void ToolCallGate::Feed(std::string_view text) {
  constexpr std::string_view kClose = output::kThinkClose;
  const std::string seen = tail_ + std::string(text);
  const size_t at = seen.rfind(kClose);
  if (at != std::string::npos && at + kClose.size() > tail_.size()) {
    // The reasoning ended in this text: the content starts outside any fence.
    fence_ = output::FenceTracker{};
    fence_.Feed(std::string_view(seen).substr(at + kClose.size()));
  } else {
    fence_.Feed(text);
  }
  tail_ = seen.size() < kClose.size() ? seen : seen.substr(seen.size() - (kClose.size() - 1));
}

}  // namespace infernix
