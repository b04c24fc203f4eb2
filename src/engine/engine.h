// The engine: one thread owns the model and its state and runs continuous batching. Requests are
// submitted from any thread; each step the engine batches the decode tokens of all running requests
// with chunks of waiting prompts (scheduler.h), runs one forward pass, samples (the step's sequences at
// once, on a small pool: EngineOptions::sampling_threads), detokenizes, applies stop strings and
// publishes the new text to each request's handle. Requests join and leave between
// steps; a cancelled request frees its slot at the next step. Ids past the tokenizer's vocabulary (the
// model's may be padded past it) are never sampled. A failed forward pass fails the requests of its
// batch; an exception in one request's own processing (sampler, grammar, decoder, stop strings, the
// handle's hooks) fails that request alone: both end with FinishReason::kError, and the engine goes
// on. Stats() counts a request before its final update is published. Steps whose requests all pick
// greedily or draw with top-k from the raw logits take the backend's picks, and the next step of the same
// requests is queued before they are read (EngineOptions::pipeline_picks): the device runs it while this
// one's tokens are published.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>

#include "base/thread_pool.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace infernix {

struct EngineOptions {
  int max_slots = 4;                // concurrent sequences (--max-concurrency)
  size_t max_queue = 64;            // requests waiting for a slot before Submit answers kQueueFull
  int64_t max_context = 0;          // tokens per sequence, prompt + output (--ctx-size)
  int64_t max_batch_tokens = 2048;  // tokens per forward step
  int64_t prefill_chunk = 512;      // prompt tokens of one request per step
  KvCacheType kv_cache_type = KvCacheType::kActivation;  // how the KV cache holds keys and values (--kv-cache-dtype)
  // Threads that sample the sequences of a step at once (each touches only its own request's sampler
  // and grammar): 0, one per sequence slot up to the hardware's threads; 1, on the engine thread alone.
  int sampling_threads = 0;
  // Steps whose every picking sequence picks from the raw logits greedily or by a top-k draw (no penalties,
  // logit_bias, logprobs or grammar: Sampler::PlainDraw) take the backend's picks (Model::QueuePick: greedy,
  // or the sampler's draw with the uniform it takes from the request's RNG) instead of reading the logits
  // back and sampling them here; the tokens are the same (tests compare both ways).
  bool backend_picks = true;
  // Such a step that decodes the same requests as the one before it is queued before that one's picks are
  // read, its token ids taken from them on the backend (Model::QueuePick's feed): the device goes on
  // while the host publishes. A request that ends at a step (a stop token or string, cancellation) has had
  // one more step computed for it, which is dropped; one that ends by max_new_tokens is not continued.
  bool pipeline_picks = true;
};

enum class SubmitStatus { kAccepted, kQueueFull, kContextOverflow, kInvalid };

struct Submission {
  SubmitStatus status = SubmitStatus::kAccepted;
  std::shared_ptr<RequestHandle> handle;  // when accepted
  std::string message;                    // why not, naming the limits
};

// Counters for /metrics (monotonic totals and current gauges).
struct EngineStats {
  uint64_t requests_accepted = 0, requests_rejected = 0, requests_finished = 0, requests_cancelled = 0,
           requests_failed = 0;
  uint64_t prompt_tokens = 0, generated_tokens = 0, steps = 0;
  double time_to_first_token_seconds_sum = 0;
  uint64_t time_to_first_token_count = 0;
  double step_seconds_sum = 0;
  size_t waiting = 0, running = 0;
};

class Engine {
 public:
  // `model` and `tokenizer` must outlive the engine. Starts the engine thread.
  Engine(Model& model, const Tokenizer& tokenizer, EngineOptions options);
  ~Engine();  // stops the thread; unfinished requests end with kCancelled
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. Expected refusals (queue full, context overflow, invalid input) are return values.
  Submission Submit(GenerationRequest request);
  EngineStats Stats() const;
  const EngineOptions& options() const { return options_; }

 private:
  struct Active;
  using Clock = std::chrono::steady_clock;
  void Loop();
  void Step();
  // Step's parts: the requests whose clients went away end; a failed forward pass fails its plan's
  // requests (those still running); a plan is committed; the step's picks (picks_, in the plan's order of
  // picking sequences) are published.
  void DropCancelled();
  // Whether a's picks may be the backend's (Sampler::PlainDraw, no grammar).
  static bool PicksOnBackend(const Active& a);
  // The step's forward batch (prompt chunks, decode tokens: each request's last token), clearing the slots
  // of the requests it admits.
  ForwardBatch BuildBatch(const StepPlan& plan);
  void FailPlan(const StepPlan& plan, const std::exception& e);
  void ApplyPlan(const StepPlan& plan);
  void PublishPicks(const StepPlan& plan, Clock::time_point started);
  // A step queued on the model with its picks (Model::QueuePick) whose picks have not been taken: its plan and
  // the ids of its picking requests, in row order.
  struct PickStep {
    StepPlan plan;
    std::vector<uint64_t> picking;
    Clock::time_point started;
  };
  // Queues the next step fed from `step`'s picks if it only continues requests of `step`; whether it
  // queued (or tried to: a failed pass fails its requests) a forward pass.
  bool QueueContinuation(const PickStep& step);
  // Queues `plan`'s pass with the picks of its picking requests (`picking`, in row order; each one's next
  // draw taken now: Sampler::NextDraw), its tokens fed from the picks before where `feed` is given, and
  // commits the plan; nullopt when the pass failed (its requests failed with it).
  std::optional<PickStep> QueuePickStep(StepPlan plan, std::vector<uint64_t> picking, std::span<const int32_t> feed,
                                        Clock::time_point started);
  // Takes `step`'s picks and publishes them. logits_valid: no pass was queued after it, so a row the
  // backend could not pick can still be read back and sampled.
  void FinishPickStep(const PickStep& step, bool logits_valid);
  void Finish(Active& a, FinishReason reason, std::string matched, bool by_string, std::string error);
  // A sequence's next token, picked from its logits row [vocab] under its grammar's mask; touches only
  // a's sampler and grammar, so the sequences of a step pick at once (sampling_threads). What it throws
  // is kept for TakePick.
  struct Pick {
    SampleResult sample;
    bool exhausted = false;  // the grammar is complete and allows nothing more (not even a stop token)
    std::exception_ptr error;
  };
  void PickToken(Active& a, std::span<float> logits, Pick& pick);
  // Then, on the engine thread in the step's order: detokenizes and publishes the pick, or ends a (its
  // grammar allows nothing more, a stop condition, max tokens). Throws what the pick threw and what the
  // decoder, stop matcher or the handle's hooks throw; Step fails that request alone.
  void TakePick(Active& a, Pick& pick);
  void HandleToken(Active& a, const SampleResult& sample);

  Model& model_;
  const Tokenizer& tokenizer_;
  EngineOptions options_;
  std::unique_ptr<SequenceState> state_;
  Scheduler scheduler_;  // engine thread only

  mutable std::mutex mutex_;  // guards inbox_, stop_, stats_, next_id_
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Active>> inbox_;
  bool stop_ = false;
  EngineStats stats_;
  uint64_t next_id_ = 1;

  std::map<uint64_t, std::unique_ptr<Active>> active_;  // engine thread only
  std::vector<Pick> picks_;    // engine thread only: a step's picks
  std::optional<PickStep> in_flight_;    // engine thread only: pipeline_picks's step in flight
  Clock::time_point last_step_end_;      // engine thread only: when the last step's picks were published
  std::unique_ptr<ThreadPool> sampling_pool_;
  std::thread thread_;
};

}  // namespace infernix
