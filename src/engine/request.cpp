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

bool RequestHandle::output_ended() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return output_ended_;
}

void RequestHandle::SetOutputEnd(std::shared_ptr<OutputEnd> end) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    output_end_ = std::move(end);
    for (size_t i = 0; i < pending_.tokens.size(); ++i) {
      if (output_end_->Feed(pending_.tokens[i].text)) {
        pending_.tokens.resize(i + 1);
        EndOutput();
        break;
      }
    }
  }
  changed_.notify_all();
}

void RequestHandle::EndOutput() {
  output_ended_ = true;
  cancelled_ = true;  // the engine stops generating
  if (pending_.finished) {  // the engine finished first (say, at max_tokens with this very token)
    pending_.finish_reason = FinishReason::kStop;
    pending_.matched_stop.clear();
    pending_.stopped_by_string = false;
    pending_.error.clear();
  }
}

void RequestHandle::Publish(TokenOutput token) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (output_ended_) return;  // past the end of the output
    const bool ends = output_end_ && output_end_->Feed(token.text);
    pending_.tokens.push_back(std::move(token));
    if (ends) EndOutput();
  }
  changed_.notify_all();
}

void RequestHandle::Finish(RequestUpdate final_state) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    final_state.tokens = std::move(pending_.tokens);
    pending_ = std::move(final_state);
    pending_.finished = true;
    if (output_ended_) EndOutput();  // the output is complete: kStop, whatever ended the request
  }
  changed_.notify_all();
}

}  // namespace infernix
