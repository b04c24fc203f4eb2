// A generation request as the engine sees it (protocol-neutral: the API layers translate OpenAI and
// Anthropic requests into this), and the updates it streams back.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling.h"
#include "grammar/token_matcher.h"

namespace infernix {

// Whether a lazy grammar's trigger counts where the output reaches it: the API layer's reading of the
// output (e.g. not inside a markdown code fence, where its parser reads a tool call as text). The
// constraint feeds it the unconstrained output in order.
class TriggerGate {
 public:
  virtual ~TriggerGate() = default;
  virtual void Feed(std::string_view text) = 0;
  // Whether a trigger that starts right after the text fed so far counts.
  virtual bool Open() = 0;
  // The constrained part that a trigger started is complete; unconstrained output follows.
  virtual void AfterConstrained() = 0;
};

// Decides, from the output text as the engine publishes it, that the output is complete before any stop
// condition of the engine's own: the API layer's reading of the output (a turn that allows one tool
// call ends with the first complete call). Fed on the engine thread, in order. See
// RequestHandle::SetOutputEnd.
class OutputEnd {
 public:
  virtual ~OutputEnd() = default;
  // The next piece of output text (a token's; may be empty). True: the output is complete with it.
  virtual bool Feed(std::string_view text) = 0;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int max_new_tokens = 256;
  SamplingParams sampling;
  std::vector<std::string> stop;        // stop strings: output ends before the first occurrence
  std::vector<int32_t> stop_token_ids;  // e.g. EOS: output ends after one of these (not emitted as text)
  bool skip_special_tokens = true;      // drop special tokens from the output text
  // Constrained decoding: when set, every token is sampled under this grammar's mask (stop_token_ids
  // are allowed exactly when the grammar is complete), and the request stops when nothing more is.
  std::shared_ptr<grammar::TokenGrammar> grammar;
  // Non-empty: `grammar` is lazy (engine/output_constraint.h): the output is free until it contains
  // this text, the grammar then constrains what follows, and once complete the output is free again.
  std::string grammar_trigger;
  // Lazy grammars: decides whether a trigger counts (null: every one does). One per request (stateful).
  std::shared_ptr<TriggerGate> trigger_gate;
};

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
std::string_view FinishReasonName(FinishReason reason);  // "stop", "length", "cancelled", "error"

struct TokenOutput {
  int32_t token = 0;
  std::string text;  // the text this token releases (complete UTF-8, stop strings withheld); may be empty
  float logprob = 0;
  std::vector<TokenLogprob> top_logprobs;
};

// What happened since the consumer last looked.
struct RequestUpdate {
  std::vector<TokenOutput> tokens;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string matched_stop;  // the stop string, or the stop token's text, that ended the request
  bool stopped_by_string = false;
  std::string error;         // with kError
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// Shared between the engine thread (producer) and the request's consumer (an HTTP handler).
// Thread-safe.
class RequestHandle {
 public:
  explicit RequestHandle(uint64_t id) : id_(id) {}
  uint64_t id() const { return id_; }

  // Consumer: waits up to `timeout` for news; moves it into *update and returns true, or returns
  // false on timeout. After the update with finished == true, returns false forever.
  bool Wait(RequestUpdate* update, std::chrono::milliseconds timeout);
  // Consumer: stop generating (client gone or cancelled); the engine frees the slot at its next step.
  void Cancel();
  bool cancelled() const;
  // Consumer, before its first Wait: the output ends where `end` says it is complete. `end` is fed the
  // text of the tokens published so far, then of each token as the engine publishes it (on the engine
  // thread, under this handle's lock). From the token that completes the output on, nothing more is
  // generated (the engine drops the request at its next step, as for Cancel, so no token is wasted)
  // nor delivered, and the final update reports FinishReason::kStop with the engine's token count.
  void SetOutputEnd(std::shared_ptr<OutputEnd> end);
  // Whether the OutputEnd found the output complete: cancelled() is then true too, but the request
  // ends normally (the engine counts it as finished, not cancelled).
  bool output_ended() const;

  // Engine side.
  void Publish(TokenOutput token);
  void Finish(RequestUpdate final_state);  // tokens of final_state are ignored

 private:
  void EndOutput();  // mutex_ held

  uint64_t id_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  RequestUpdate pending_;
  bool delivered_final_ = false;
  bool cancelled_ = false;
  std::shared_ptr<OutputEnd> output_end_;
  bool output_ended_ = false;  // output_end_ found the output complete
};

}  // namespace infernix
