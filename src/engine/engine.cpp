#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/check.h"
#include "base/error.h"
#include "engine/output_constraint.h"
#include "engine/stop_matcher.h"
#include "tokenizer/stream_decoder.h"

namespace infernix {

struct Engine::Active {
  // vocab: the model's (the logits' length); ids at or past the tokenizer's are padding, never sampled.
  Active(uint64_t id, GenerationRequest r, const Tokenizer& tok, int64_t vocab)
      : request(std::move(r)),
        handle(std::make_shared<RequestHandle>(id)),
        sampler(request.sampling, vocab, request.prompt, std::min<int64_t>(vocab, tok.vocab_size())),
        decoder(tok, request.skip_special_tokens),
        stop(request.stop),
        submitted(Clock::now()) {
    if (request.grammar)
      constraint.emplace(request.grammar, request.stop_token_ids, request.grammar_trigger, vocab, request.trigger_gate);
  }
  GenerationRequest request;
  std::shared_ptr<RequestHandle> handle;
  Sampler sampler;
  StreamDecoder decoder;
  StopMatcher stop;
  Clock::time_point submitted;
  std::optional<OutputConstraint> constraint;  // constrained decoding
  int32_t last_token = -1;
  int64_t generated = 0;
};

Engine::Engine(Model& model, const Tokenizer& tokenizer, EngineOptions options)
    : model_(model),
      tokenizer_(tokenizer),
      options_(options),
      scheduler_(SchedulerOptions{options.max_slots, options.max_batch_tokens, options.prefill_chunk}) {
  state_ = model_.backend().CreateState(
      model_.MakeStateSpec(options_.max_slots, options_.max_context, options_.kv_cache_type));
  const size_t hardware = std::max<size_t>(1, std::thread::hardware_concurrency());
  const size_t sampling = options_.sampling_threads > 0
                              ? static_cast<size_t>(options_.sampling_threads)
                              : std::min(hardware, static_cast<size_t>(std::max(1, options_.max_slots)));
  sampling_pool_ = std::make_unique<ThreadPool>(sampling);
  thread_ = std::thread([this] { Loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  if (in_flight_) {  // its pass is still queued on the model, which may serve another engine later
    try {
      model_.TakePick();
    } catch (const std::exception&) {  // its requests end as cancelled below either way
    }
  }
  RequestUpdate bye;
  bye.finish_reason = FinishReason::kCancelled;
  for (auto& a : inbox_) a->handle->Finish(bye);
  for (auto& [id, a] : active_) a->handle->Finish(bye);
}

Submission Engine::Submit(GenerationRequest request) {
  Submission s;
  int64_t prompt = static_cast<int64_t>(request.prompt.size());
  const int64_t vocab = model_.config().vocab_size;
  auto reject = [&](SubmitStatus status, std::string message) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.requests_rejected;
    s.status = status;
    s.message = std::move(message);
    return s;
  };
  if (prompt == 0) return reject(SubmitStatus::kInvalid, "the prompt is empty");
  if (request.max_new_tokens < 1) return reject(SubmitStatus::kInvalid, "max_tokens must be at least 1");
  if (prompt + request.max_new_tokens > options_.max_context)
    return reject(SubmitStatus::kContextOverflow,
                  fmt::format("this model's context is {} tokens; the request has {} prompt tokens and asks for up "
                              "to {} more ({} in all)",
                              options_.max_context, prompt, request.max_new_tokens, prompt + request.max_new_tokens));
  for (int32_t id : request.prompt)
    if (id < 0 || id >= vocab)
      return reject(SubmitStatus::kInvalid, fmt::format("prompt token {} is outside the vocabulary [0, {})", id, vocab));
  try {
    request.sampling.Validate(vocab);
    std::unique_lock<std::mutex> lock(mutex_);
    if (inbox_.size() + stats_.waiting >= options_.max_queue) {
      ++stats_.requests_rejected;
      s.status = SubmitStatus::kQueueFull;
      s.message = fmt::format("the server is at capacity ({} running, {} waiting, queue limit {}); retry later",
                              stats_.running, stats_.waiting + inbox_.size(), options_.max_queue);
      return s;
    }
    auto active = std::make_unique<Active>(next_id_++, std::move(request), tokenizer_, vocab);
    s.handle = active->handle;
    ++stats_.requests_accepted;
    inbox_.push_back(std::move(active));
  } catch (const Error& e) {
    return reject(SubmitStatus::kInvalid, e.what());
  }
  wake_.notify_all();
  return s;
}

EngineStats Engine::Stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  EngineStats s = stats_;
  s.waiting += inbox_.size();
  return s;
}

void Engine::Loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, std::chrono::milliseconds(50),
                     [&] { return stop_ || !inbox_.empty() || !scheduler_.idle() || in_flight_.has_value(); });
      if (stop_) return;
      while (!inbox_.empty()) {
        std::unique_ptr<Active> a = std::move(inbox_.front());
        inbox_.pop_front();
        uint64_t id = a->handle->id();
        scheduler_.Add(id, static_cast<int64_t>(a->request.prompt.size()));
        stats_.prompt_tokens += a->request.prompt.size();
        active_[id] = std::move(a);
      }
      stats_.waiting = scheduler_.waiting();
    }
    Step();
  }
}

void Engine::Finish(Active& a, FinishReason reason, std::string matched, bool by_string, std::string error) {
  scheduler_.Remove(a.handle->id());
  {
    // The counters first: a client that has seen its request end must find it counted (/metrics).
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.requests_finished;
    if (reason == FinishReason::kCancelled) ++stats_.requests_cancelled;
    if (reason == FinishReason::kError) ++stats_.requests_failed;
    stats_.waiting = scheduler_.waiting();
    stats_.running = scheduler_.running();
  }
  RequestUpdate u;
  u.finish_reason = reason;
  u.matched_stop = std::move(matched);
  u.stopped_by_string = by_string;
  u.error = std::move(error);
  u.prompt_tokens = static_cast<int64_t>(a.request.prompt.size());
  u.completion_tokens = a.generated;
  a.handle->Finish(std::move(u));
}

namespace {

// The end of a request's text: the decoder's held-back bytes through the stop matcher, and then
// (unless a stop string turned up in them) whatever the matcher still held back.
StopMatcher::Result FlushText(StreamDecoder& decoder, StopMatcher& stop) {
  StopMatcher::Result tail = stop.Push(decoder.Flush());
  if (!tail.stopped) tail.emit += stop.Flush();
  return tail;
}

}  // namespace

void Engine::HandleToken(Active& a, const SampleResult& sample) {
  const int32_t token = sample.token;
  a.sampler.Accept(token);
  a.last_token = token;
  ++a.generated;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.generated_tokens;
    if (a.generated == 1) {
      stats_.time_to_first_token_seconds_sum += std::chrono::duration<double>(Clock::now() - a.submitted).count();
      ++stats_.time_to_first_token_count;
    }
  }
  TokenOutput out{token, "", sample.logprob, sample.top};
  const auto& stops = a.request.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
    StopMatcher::Result tail = FlushText(a.decoder, a.stop);
    out.text = std::move(tail.emit);
    a.handle->Publish(std::move(out));
    if (tail.stopped) {
      Finish(a, FinishReason::kStop, tail.matched, true, "");
    } else {
      Finish(a, FinishReason::kStop, std::string(tokenizer_.TokenBytes(token)), false, "");
    }
    return;
  }
  StopMatcher::Result r = a.stop.Push(a.decoder.Push(token));
  out.text = std::move(r.emit);
  if (r.stopped) {
    a.handle->Publish(std::move(out));
    Finish(a, FinishReason::kStop, r.matched, true, "");
    return;
  }
  if (a.generated >= a.request.max_new_tokens) {
    StopMatcher::Result tail = FlushText(a.decoder, a.stop);
    out.text += tail.emit;
    a.handle->Publish(std::move(out));
    Finish(a, tail.stopped ? FinishReason::kStop : FinishReason::kLength, tail.matched, tail.stopped, "");
    return;
  }
  a.handle->Publish(std::move(out));
}

void Engine::PickToken(Active& a, std::span<float> logits, Pick& pick) {
  pick = Pick{};
  try {
    OutputConstraint::Next next;
    if (a.constraint) {
      next = a.constraint->NextMask();
      if (next.exhausted) {
        pick.exhausted = true;
        return;
      }
    }
    pick.sample = a.sampler.Sample(logits, next.mask);  // the mask applies after penalties and logit_bias
    if (a.constraint) a.constraint->Accept(pick.sample.token);
  } catch (...) {
    pick.error = std::current_exception();
  }
}

void Engine::TakePick(Active& a, Pick& pick) {
  if (pick.error) std::rethrow_exception(pick.error);
  if (pick.exhausted) {
    std::string text = FlushText(a.decoder, a.stop).emit;
    if (!text.empty()) a.handle->Publish(TokenOutput{a.last_token, text, 0, {}});
    Finish(a, FinishReason::kStop, "", false, "");
    return;
  }
  HandleToken(a, pick.sample);
}

bool Engine::PicksOnBackend(const Active& a) { return !a.constraint && a.sampler.PlainDraw(); }

ForwardBatch Engine::BuildBatch(const StepPlan& plan) {
  ForwardBatch batch;
  for (const ScheduledSeq& s : plan.seqs) {
    const Active& a = *active_.at(s.request_id);
    if (s.admitted) state_->ClearSlot(s.slot);
    int64_t begin = static_cast<int64_t>(batch.tokens.size());
    if (s.prefill) {
      batch.tokens.insert(batch.tokens.end(), a.request.prompt.begin() + s.pos_begin,
                          a.request.prompt.begin() + s.pos_begin + s.n_tokens);
    } else {
      batch.tokens.push_back(a.last_token);
    }
    batch.seqs.push_back(BatchSeq{s.slot, begin, s.n_tokens, s.pos_begin});
    if (s.wants_logits) batch.logit_rows.push_back(static_cast<int32_t>(begin + s.n_tokens - 1));
  }
  return batch;
}

void Engine::DropCancelled() {
  // Requests whose client went away leave before the step, freeing their slots; so do those whose
  // output the API layer found complete (RequestHandle::SetOutputEnd), which end normally.
  for (auto it = active_.begin(); it != active_.end();) {
    if (const RequestHandle& h = *it->second->handle; h.cancelled()) {
      Finish(*it->second, h.output_ended() ? FinishReason::kStop : FinishReason::kCancelled, "", false, "");
      it = active_.erase(it);
    } else {
      ++it;
    }
  }
}

void Engine::FailPlan(const StepPlan& plan, const std::exception& e) {
  for (const ScheduledSeq& s : plan.seqs) {
    auto it = active_.find(s.request_id);
    if (it == active_.end()) continue;
    Finish(*it->second, FinishReason::kError, "", false, std::string("the forward pass failed: ") + e.what());
    active_.erase(it);
  }
}

void Engine::ApplyPlan(const StepPlan& plan) {
  scheduler_.Apply(plan);
  // Admissions take effect now, before any token is published: Submit's queue check must see them.
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.waiting = scheduler_.waiting();
  stats_.running = scheduler_.running();
}

void Engine::PublishPicks(const StepPlan& plan, Clock::time_point started) {
  size_t row = 0;
  for (const ScheduledSeq& s : plan.seqs) {
    if (!s.wants_logits) continue;
    Pick& pick = picks_[row++];
    auto it = active_.find(s.request_id);
    if (it == active_.end()) continue;  // it ended while its step ran (pipelined steps)
    Active& a = *it->second;
    try {
      TakePick(a, pick);
    } catch (const std::exception& e) {
      // This request's own processing failed (sampler, grammar, decoder, stop strings, the API layer's
      // hooks): it alone ends, with the error; the others go on.
      if (scheduler_.Contains(s.request_id))
        Finish(a, FinishReason::kError, "", false, std::string("processing the model's output failed: ") + e.what());
    }
    if (!scheduler_.Contains(s.request_id)) active_.erase(s.request_id);
  }
  // Pipelined steps overlap (one is queued before the one before it is published): each counts from the end
  // of the one before it, so that the sum is the engine's time in steps.
  const Clock::time_point now = Clock::now(), from = std::max(started, last_step_end_);
  last_step_end_ = now;
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.steps;
  stats_.step_seconds_sum += std::chrono::duration<double>(now - from).count();
  stats_.waiting = scheduler_.waiting();
  stats_.running = scheduler_.running();
}

bool Engine::QueueContinuation(const PickStep& step) {
  StepPlan next = scheduler_.Plan();
  if (next.empty()) return false;
  std::unordered_map<uint64_t, int32_t> row_of;  // request id -> its row of `step`'s picks
  for (size_t r = 0; r < step.picking.size(); ++r) row_of.emplace(step.picking[r], static_cast<int32_t>(r));
  std::vector<int32_t> feed;
  std::vector<uint64_t> picking;
  for (const ScheduledSeq& s : next.seqs) {
    // Only decode tokens of requests whose token is one of `step`'s picks, all still picking on the backend,
    // none of which ends with that pick for certain (max_new_tokens): any other step waits for the picks.
    if (s.prefill || s.admitted || !s.wants_logits) return false;
    const auto row = row_of.find(s.request_id);
    if (row == row_of.end()) return false;
    const Active& a = *active_.at(s.request_id);
    if (!PicksOnBackend(a) || a.generated + 1 >= a.request.max_new_tokens) return false;
    feed.push_back(row->second);
    picking.push_back(s.request_id);
  }
  in_flight_ = QueuePickStep(std::move(next), std::move(picking), feed, Clock::now());
  return true;
}

std::optional<Engine::PickStep> Engine::QueuePickStep(StepPlan plan, std::vector<uint64_t> picking,
                                                      std::span<const int32_t> feed, Clock::time_point started) {
  const ForwardBatch batch = BuildBatch(plan);  // with a feed, its decode tokens are fed from the picks before
  std::vector<TokenDraw> draws;  // each request's next draw (a sampled one's uniform is taken from its RNG now)
  for (uint64_t id : picking) draws.push_back(active_.at(id)->sampler.NextDraw());
  try {
    model_.QueuePick(batch, *state_, active_.at(picking.front())->sampler.sampleable(), draws, feed);
  } catch (const std::exception& e) {
    FailPlan(plan, e);
    return std::nullopt;
  }
  ApplyPlan(plan);
  return PickStep{std::move(plan), std::move(picking), started};
}

void Engine::FinishPickStep(const PickStep& step, bool logits_valid) {
  std::vector<int32_t> ids;
  try {
    ids = model_.TakePick();
  } catch (const std::exception& e) {
    FailPlan(step.plan, e);
    return;
  }
  INFX_CHECK_MSG(ids.size() == step.picking.size(), "{} backend picks for {} sequences", ids.size(),
                 step.picking.size());
  picks_.assign(step.picking.size(), Pick{});
  std::span<float> logits;
  const auto vocab = static_cast<size_t>(model_.config().vocab_size);
  for (size_t i = 0; i < step.picking.size(); ++i) {
    if (ids[i] >= 0) {
      picks_[i].sample.token = ids[i];
      continue;
    }
    auto it = active_.find(step.picking[i]);
    if (it == active_.end()) continue;
    if (!logits_valid) {
      // The next step has been queued over these logits: the sampler cannot name the fault.
      picks_[i].error = std::make_exception_ptr(
          Error(ErrorCode::kInternal, "logits: no pick on the backend (a non-finite value among them, or only -inf)"));
      continue;
    }
    // A row the backend could not pick (NaN or +inf among its ids, or only -inf) is read back and sampled
    // as usual: the sampler names the fault (before it would draw: its RNG is where the backend's draw left it).
    if (logits.empty()) {
      try {
        logits = model_.LastLogits();
      } catch (...) {
        picks_[i].error = std::current_exception();
        continue;
      }
    }
    PickToken(*it->second, logits.subspan(i * vocab, vocab), picks_[i]);
  }
  PublishPicks(step.plan, step.started);
}

void Engine::Step() {
  DropCancelled();
  if (in_flight_) {
    // The step after it, when it continues the same requests, is queued before its picks are read: the
    // device goes on while they are published (EngineOptions::pipeline_picks).
    PickStep step = std::move(*in_flight_);
    in_flight_.reset();
    const bool queued = options_.pipeline_picks && QueueContinuation(step);
    FinishPickStep(step, /*logits_valid=*/!queued);
    return;
  }
  StepPlan plan = scheduler_.Plan();
  if (plan.empty()) return;
  auto started = Clock::now();
  std::vector<Active*> picking;
  std::vector<uint64_t> picking_ids;
  for (const ScheduledSeq& s : plan.seqs) {
    if (!s.wants_logits) continue;
    picking.push_back(active_.at(s.request_id).get());
    picking_ids.push_back(s.request_id);
  }
  const bool on_backend =
      options_.backend_picks && !picking.empty() &&
      std::all_of(picking.begin(), picking.end(), [](const Active* a) { return PicksOnBackend(*a); });
  if (on_backend) {
    std::optional<PickStep> step = QueuePickStep(std::move(plan), std::move(picking_ids), {}, started);
    if (step && options_.pipeline_picks) {
      in_flight_ = std::move(step);  // taken by the next step, after it queues the one that continues it
    } else if (step) {
      FinishPickStep(*step, /*logits_valid=*/true);
    }
    return;
  }
  const ForwardBatch batch = BuildBatch(plan);
  std::span<float> logits;  // the backend's, valid until the next forward pass
  try {
    logits = model_.Forward(batch, *state_);
  } catch (const std::exception& e) {
    FailPlan(plan, e);
    return;
  }
  ApplyPlan(plan);
  const auto vocab = static_cast<size_t>(model_.config().vocab_size);
  picks_.resize(picking.size());
  sampling_pool_->ParallelFor(picking.size(), 1, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) PickToken(*picking[i], logits.subspan(i * vocab, vocab), picks_[i]);
  });
  PublishPicks(plan, started);
}

}  // namespace infernix
