#include "engine/scheduler.h"

#include <algorithm>

#include "base/check.h"

namespace infernix {

Scheduler::Scheduler(SchedulerOptions options) : options_(options) {
  INFX_CHECK(options_.max_slots > 0 && options_.max_batch_tokens > 0 && options_.prefill_chunk > 0);
  for (int s = options_.max_slots - 1; s >= 0; --s) free_slots_.push_back(s);
}

void Scheduler::Add(uint64_t request_id, int64_t prompt_tokens) {
  INFX_CHECK(prompt_tokens > 0 && !entries_.count(request_id));
  entries_[request_id] = Entry{-1, prompt_tokens, 0};
  waiting_.push_back(request_id);
}

void Scheduler::Remove(uint64_t request_id) {
  auto it = entries_.find(request_id);
  if (it == entries_.end()) return;
  if (it->second.slot >= 0) {
    free_slots_.push_back(it->second.slot);
    running_.erase(request_id);
  } else {
    waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), request_id), waiting_.end());
  }
  entries_.erase(it);
}

bool Scheduler::Contains(uint64_t request_id) const { return entries_.count(request_id) > 0; }

StepPlan Scheduler::Plan() const {
  StepPlan plan;
  int64_t budget = options_.max_batch_tokens;
  // 1. One decode token for every request past its prompt.
  for (const auto& [id, e] : running_) {
    if (e->cached < e->prompt_tokens || budget == 0) continue;
    plan.seqs.push_back(ScheduledSeq{id, e->slot, e->cached, 1, false, true, false});
    --budget;
  }
  // 2. Prompt chunks of running requests still prefilling.
  for (const auto& [id, e] : running_) {
    if (e->cached >= e->prompt_tokens || budget == 0) continue;
    int64_t n = std::min({e->prompt_tokens - e->cached, options_.prefill_chunk, budget});
    plan.seqs.push_back(ScheduledSeq{id, e->slot, e->cached, n, true, e->cached + n == e->prompt_tokens, false});
    budget -= n;
  }
  // 3. Admit waiting requests into free slots (taken from the back of free_slots_, as Apply does).
  size_t free = free_slots_.size();
  for (uint64_t id : waiting_) {
    if (free == 0 || budget == 0) break;
    const Entry& e = entries_.at(id);
    int64_t n = std::min({e.prompt_tokens, options_.prefill_chunk, budget});
    plan.seqs.push_back(ScheduledSeq{id, free_slots_[--free], 0, n, true, n == e.prompt_tokens, true});
    budget -= n;
  }
  plan.n_tokens = options_.max_batch_tokens - budget;
  return plan;
}

void Scheduler::Apply(const StepPlan& plan) {
  for (const ScheduledSeq& s : plan.seqs) {
    Entry& e = entries_.at(s.request_id);
    if (s.admitted) {
      INFX_CHECK(!free_slots_.empty() && free_slots_.back() == s.slot && waiting_.front() == s.request_id);
      free_slots_.pop_back();
      waiting_.pop_front();
      e.slot = s.slot;
      running_[s.request_id] = &e;
    }
    INFX_CHECK(e.slot == s.slot && e.cached == s.pos_begin);
    e.cached += s.n_tokens;
  }
}

}  // namespace infernix
