#include "engine/request.h"

namespace infernix {

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "?";
}

bool RequestHandle::Wait(RequestUpdate* update, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (delivered_final_) return false;
  changed_.wait_for(lock, timeout, [&] { return !pending_.tokens.empty() || pending_.finished; });
  if (pending_.tokens.empty() && !pending_.finished) return false;
  *update = std::move(pending_);
  pending_ = RequestUpdate{};
  if (update->finished) delivered_final_ = true;
  return true;
}

void RequestHandle::Cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_ = true;
}

bool RequestHandle::cancelled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancelled_;
}

void RequestHandle::Publish(TokenOutput token) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.tokens.push_back(std::move(token));
  }
  changed_.notify_all();
}

void RequestHandle::Finish(RequestUpdate final_state) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    final_state.tokens = std::move(pending_.tokens);
    pending_ = std::move(final_state);
    pending_.finished = true;
  }
  changed_.notify_all();
}

}  // namespace infernix
