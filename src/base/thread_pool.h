// A fixed pool of worker threads for data-parallel loops. Work is split into contiguous ranges, and
// each output element must be computed by exactly one task, so results do not depend on the number
// of threads (the CPU backend's determinism rests on this).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace infernix {

class ThreadPool {
 public:
  // n_threads == 0: one per hardware thread. The calling thread takes part in every loop, so
  // n_threads == 1 runs everything inline.
  explicit ThreadPool(size_t n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size() + 1; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n), at least `grain` items each (except
  // the last). Blocks until all are done. Calls from several threads run one after another (the
  // pool is shared by everything using one backend); not reentrant: fn must not call ParallelFor.
  void ParallelFor(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn);

 private:
  void WorkerLoop(size_t index);

  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one ParallelFor at a time
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0;
  size_t job_chunk_ = 0;
  size_t generation_ = 0;
  size_t pending_ = 0;
  bool stop_ = false;
};

}  // namespace infernix
