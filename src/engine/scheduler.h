// Continuous-batching bookkeeping: which requests hold a state slot, how far each prompt has been
// prefilled, and what the next forward step runs. Pure bookkeeping: no tensors, no threads, no model.
//
// Every step, Plan() batches one decode token for each request that is generating with chunks of the
// prompts still being prefilled, admitting waiting requests (FIFO) into free slots while the token
// budget lasts. Plan() has no side effects; Apply() commits a plan. Not thread-safe (the engine thread
// owns it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

namespace infernix {

struct SchedulerOptions {
  int max_slots = 4;                // sequences in flight at once
  int64_t max_batch_tokens = 2048;  // tokens per forward step (decode tokens + prefill chunks)
  int64_t prefill_chunk = 512;      // largest prompt chunk of one request per step
};

struct ScheduledSeq {
  uint64_t request_id = 0;
  int slot = 0;
  int64_t pos_begin = 0;      // tokens already in the slot
  int64_t n_tokens = 0;
  bool prefill = false;       // prompt tokens [pos_begin, pos_begin + n_tokens); else one decode token
  bool wants_logits = false;  // the step samples a token for this request (decode, or last prompt chunk)
  bool admitted = false;      // first step of the request: its slot must be cleared
};

struct StepPlan {
  std::vector<ScheduledSeq> seqs;
  int64_t n_tokens = 0;
  bool empty() const { return seqs.empty(); }
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options);

  // Queues a request whose prompt has prompt_tokens tokens (> 0).
  void Add(uint64_t request_id, int64_t prompt_tokens);
  // Forgets a request (finished, cancelled or failed), freeing its slot.
  void Remove(uint64_t request_id);

  StepPlan Plan() const;
  void Apply(const StepPlan& plan);

  size_t waiting() const { return waiting_.size(); }
  size_t running() const { return running_.size(); }
  bool idle() const { return waiting_.empty() && running_.empty(); }
  bool Contains(uint64_t request_id) const;

 private:
  struct Entry {
    int slot = -1;
    int64_t prompt_tokens = 0;
    int64_t cached = 0;  // tokens in the slot
  };
  SchedulerOptions options_;
  std::deque<uint64_t> waiting_;
  std::map<uint64_t, Entry> entries_;   // every known request (node-based: pointers stay valid)
  std::map<uint64_t, Entry*> running_;  // requests holding a slot, in id (= arrival) order
  std::vector<int> free_slots_;
};

}  // namespace infernix
