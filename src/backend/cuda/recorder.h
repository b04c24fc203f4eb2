// The CUDA backend's command recorder. Ops do not launch kernels themselves: they queue launcher
// calls here, and the queue runs as one unit at the next synchronisation point (a copy to the host,
// ResetScratch, a state change). A unit is keyed by the exact bytes of every call (launcher, pointers,
// sizes, scalars); the second time a key is seen the unit is captured into a CUDA graph, and from then
// on it replays with one cudaGraphLaunch. A replay is exact because every value that changes between
// decode steps (token ids, positions, lengths, gathered rows) reaches the kernels through device
// memory, written by copies that are part of the unit, never through launch arguments.
//
// Not thread-safe: one thread owns the backend and its recorder.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
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
  int64_t commands = 0;         // launcher calls queued
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
    std::tuple<P...> values(static_cast<P>(args)...);
    AppendKey(&fn, sizeof(fn));
    std::apply([this](const auto&... v) { (AppendKey(&v, sizeof(v)), ...); }, values);
    commands_.push_back([fn, values](cudaStream_t s) {
      std::apply([&](const auto&... v) { fn(s, v...); }, values);
    });
    ++stats_.commands;
  }

  // Runs the queued unit on the stream (eagerly, captured, or replayed); does not wait for it.
  void Flush();
  bool empty() const { return commands_.empty(); }
  const RecorderStats& stats() const { return stats_; }
  // Drops every cached graph (e.g. when memory they point into is freed).
  void ClearGraphs();

 private:
  struct Graph {
    std::string key;
    cudaGraphExec_t exec = nullptr;
    uint64_t last_use = 0;
  };
  void AppendKey(const void* p, size_t n);
  void RunEagerly();
  cudaGraphExec_t Capture();
  void Evict();

  cudaStream_t stream_;
  bool use_graphs_;
  size_t max_graphs_;
  std::vector<std::function<void(cudaStream_t)>> commands_;
  std::string key_;
  uint64_t hash_ = 1469598103934665603ull;
  std::unordered_map<uint64_t, Graph> graphs_;
  std::deque<uint64_t> seen_;  // hashes of recent units run eagerly
  uint64_t clock_ = 0;
  RecorderStats stats_;
};

}  // namespace infernix::cuda
