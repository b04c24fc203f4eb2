// The CUDA backend's command recorder. Ops do not launch kernels themselves: they queue launcher
// calls here, and the queue runs as one unit at the next synchronisation point (a copy to the host,
// ResetScratch, a state change). A unit is keyed by the exact bytes of every call (launcher, pointers,
// sizes, scalars); the second time a key is seen the unit is captured into a CUDA graph, and from then
// on it replays with one cudaGraphLaunch. A replay is exact because every value that changes between
// decode steps (token ids, positions, lengths, gathered rows) reaches the kernels through device
// memory, written by copies that are part of the unit, never through launch arguments.
//
// Commands live in a reused buffer (no allocation per call once warm). Not thread-safe: one thread
// owns the backend and its recorder.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <new>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace infernix::cuda {

struct RecorderStats {
  int64_t units_eager = 0;      // units run launch by launch
  int64_t units_captured = 0;   // units captured into a new graph (then launched)
  int64_t units_replayed = 0;   // units run by launching a cached graph
  int64_t prefix_replays = 0;   // of them, launched by ReplayWithPrefix
  int64_t commands = 0;         // launcher calls queued
  double gpu_ms = 0;            // device time of the units timed so far (events around each unit)
  int64_t units_timed = 0;
  double host_flush_ms = 0;  // host time in Flush: the key's hash and comparison, the launch or capture
};

class Recorder {
 public:
  // use_graphs: false runs every unit eagerly. max_graphs: cached graphs kept (least recently used go).
  Recorder(cudaStream_t stream, bool use_graphs, size_t max_graphs = 32);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Queues fn(stream, args...). Every argument is converted to fn's parameter type and must be
  // trivially copyable (pointers, integers, floats, plain structs without padding); its bytes become
  // part of the unit's key.
  template <typename... P, typename... A>
  void Launch(void (*fn)(cudaStream_t, P...), A... args) {
    static_assert(sizeof...(P) == sizeof...(A), "launcher argument count");
    static_assert((std::is_trivially_copyable_v<P> && ...), "launcher arguments must be trivially copyable");
    struct Payload {
      void (*fn)(cudaStream_t, P...);
      std::tuple<P...> values;
    };
    static_assert(sizeof(Payload) <= Command::kStorage && alignof(Payload) <= 16, "launcher arguments too large");
    Command& c = NewCommand();
    auto* payload = new (c.storage) Payload{fn, std::tuple<P...>(static_cast<P>(args)...)};
    c.run = [](const void* storage, cudaStream_t s) {
      const auto* pl = static_cast<const Payload*>(storage);
      std::apply([&](const auto&... v) { pl->fn(s, v...); }, pl->values);
    };
    AppendKey(&fn, sizeof(fn));
    std::apply([this](const auto&... v) { (AppendKey(&v, sizeof(v)), ...); }, payload->values);
  }

  // Runs the queued unit on the stream (eagerly, captured, or replayed); does not wait for it.
  void Flush();
  // What the last Flush (or ReplayWithPrefix) ran: its key's hash, and whether as a CUDA graph (captured or
  // replayed). flushes() counts the units run.
  struct LastUnit {
    uint64_t hash = 0;
    bool graph = false;
  };
  const LastUnit& last_unit() const { return last_; }
  int64_t flushes() const { return flushes_; }
  // Bytes of key queued so far in this unit.
  size_t queued_key_bytes() const { return key_.size(); }
  // Changes whenever cached graphs are dropped (ClearGraphs).
  uint64_t generation() const { return generation_; }
  // Whether the unit queued so far is the beginning of the cached unit `hash` (its first
  // queued_key_bytes() bytes of key, and more after them).
  bool CachedWithPrefix(uint64_t hash) const;
  // Needs CachedWithPrefix(hash): drops the queued commands and launches that unit's graph instead, as
  // Flush would have launched it had the rest of its commands been queued too; the caller vouches that
  // they would have been the same (the decode-step replay, Backend::ReplayForward).
  void ReplayWithPrefix(uint64_t hash);
  bool empty() const { return size_ == 0; }
  // Stats, with the device time of units that have completed.
  const RecorderStats& stats();
  // Drops every cached graph (e.g. when memory they point into is freed).
  void ClearGraphs();

 private:
  struct Command {
    static constexpr size_t kStorage = 448;  // the largest launcher arguments: a GEMV batch and its tail
    void (*run)(const void*, cudaStream_t) = nullptr;
    alignas(16) unsigned char storage[kStorage];
  };
  struct Graph {
    std::vector<unsigned char> key;
    cudaGraphExec_t exec = nullptr;
    uint64_t last_use = 0;
  };
  Command& NewCommand();
  void AppendKey(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    key_.insert(key_.end(), b, b + n);
  }
  uint64_t KeyHash() const;
  void RunEagerly();
  cudaGraphExec_t Capture();
  void Evict();
  void CollectTiming();
  // Runs the queued unit as run() says (eagerly, captured, a cached graph), timed with the events when
  // none is pending, then clears the queue.
  template <typename Run>
  void RunUnit(Run&& run);
  // RunUnit with a cached graph for the queued unit.
  void LaunchCached(Graph& g, uint64_t hash);
  // Host time since `since`, to stats_.host_flush_ms.
  void AddHostTime(std::chrono::steady_clock::time_point since);

  cudaStream_t stream_;
  bool use_graphs_;
  size_t max_graphs_;
  std::vector<Command> commands_;  // [0, size_) queued; kept allocated across units
  size_t size_ = 0;
  std::vector<unsigned char> key_;
  std::unordered_map<uint64_t, Graph> graphs_;
  std::deque<uint64_t> seen_;  // hashes of recent units run eagerly
  uint64_t clock_ = 0;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  bool timing_pending_ = false;
  RecorderStats stats_;
  LastUnit last_;
  int64_t flushes_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace infernix::cuda
