#include "backend/cuda/recorder.h"

#include <algorithm>
#include <chrono>

#include "backend/cuda/check.h"
#include "base/check.h"

namespace infernix::cuda {

Recorder::Recorder(cudaStream_t stream, bool use_graphs, size_t max_graphs)
    : stream_(stream), use_graphs_(use_graphs), max_graphs_(std::max<size_t>(1, max_graphs)) {
  commands_.resize(512);
  key_.reserve(64 << 10);
  INFX_CUDA_CHECK(cudaEventCreate(&start_));
  INFX_CUDA_CHECK(cudaEventCreate(&stop_));
}

Recorder::~Recorder() {
  ClearGraphs();
  INFX_CUDA_CHECK(cudaEventDestroy(start_));
  INFX_CUDA_CHECK(cudaEventDestroy(stop_));
}

void Recorder::ClearGraphs() {
  for (auto& [hash, g] : graphs_) INFX_CUDA_CHECK(cudaGraphExecDestroy(g.exec));
  graphs_.clear();
  seen_.clear();
  ++generation_;
}

Recorder::Command& Recorder::NewCommand() {
  if (size_ == commands_.size()) commands_.resize(commands_.size() * 2);
  ++stats_.commands;
  return commands_[size_++];
}

uint64_t Recorder::KeyHash() const {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ key_.size();
  size_t i = 0;
  for (; i + 8 <= key_.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, key_.data() + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  for (; i < key_.size(); ++i) h = (h ^ key_[i]) * 1099511628211ull;
  return h;
}

void Recorder::RunEagerly() {
  for (size_t i = 0; i < size_; ++i) commands_[i].run(commands_[i].storage, stream_);
}

cudaGraphExec_t Recorder::Capture() {
  INFX_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  RunEagerly();
  cudaGraph_t graph = nullptr;
  INFX_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  INFX_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  INFX_CUDA_CHECK(cudaGraphDestroy(graph));
  return exec;
}

void Recorder::Evict() {
  while (graphs_.size() >= max_graphs_) {
    auto oldest = std::min_element(graphs_.begin(), graphs_.end(),
                                   [](const auto& a, const auto& b) { return a.second.last_use < b.second.last_use; });
    INFX_CUDA_CHECK(cudaGraphExecDestroy(oldest->second.exec));
    graphs_.erase(oldest);
  }
}

void Recorder::CollectTiming() {
  if (!timing_pending_ || cudaEventQuery(stop_) != cudaSuccess) {
    (void)cudaGetLastError();  // cudaErrorNotReady is not sticky; clear it anyway
    return;
  }
  float ms = 0;
  INFX_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  stats_.gpu_ms += ms;
  ++stats_.units_timed;
  timing_pending_ = false;
}

const RecorderStats& Recorder::stats() {
  CollectTiming();
  return stats_;
}

template <typename Run>
void Recorder::RunUnit(Run&& run) {
  ++clock_;
  CollectTiming();
  const bool time_it = !timing_pending_;
  if (time_it) INFX_CUDA_CHECK(cudaEventRecord(start_, stream_));
  run();
  if (time_it) {
    INFX_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    timing_pending_ = true;
  }
  size_ = 0;
  key_.clear();
  ++flushes_;
}

void Recorder::AddHostTime(std::chrono::steady_clock::time_point since) {
  stats_.host_flush_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

void Recorder::Flush() {
  if (size_ == 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t hash = KeyHash();
  if (auto it = graphs_.find(hash); use_graphs_ && it != graphs_.end() && it->second.key == key_) {
    LaunchCached(it->second, hash);
  } else {
    RunUnit([&] {
      last_ = LastUnit{hash, false};
      if (!use_graphs_) {
        RunEagerly();
        ++stats_.units_eager;
      } else if (std::find(seen_.begin(), seen_.end(), hash) != seen_.end() && it == graphs_.end()) {
        Evict();
        Graph g{key_, Capture(), clock_};
        INFX_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
        graphs_.emplace(hash, std::move(g));
        ++stats_.units_captured;
        last_.graph = true;
      } else {
        RunEagerly();
        seen_.push_back(hash);
        if (seen_.size() > 4 * max_graphs_) seen_.pop_front();
        ++stats_.units_eager;
      }
    });
  }
  AddHostTime(t0);
}

void Recorder::LaunchCached(Graph& g, uint64_t hash) {
  RunUnit([&] {
    g.last_use = clock_;
    INFX_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
    ++stats_.units_replayed;
    last_ = LastUnit{hash, true};
  });
}

bool Recorder::CachedWithPrefix(uint64_t hash) const {
  auto it = graphs_.find(hash);
  return use_graphs_ && it != graphs_.end() && it->second.key.size() > key_.size() &&
         std::memcmp(it->second.key.data(), key_.data(), key_.size()) == 0;
}

void Recorder::ReplayWithPrefix(uint64_t hash) {
  INFX_CHECK(CachedWithPrefix(hash));
  const auto t0 = std::chrono::steady_clock::now();
  LaunchCached(graphs_.at(hash), hash);
  ++stats_.prefix_replays;
  AddHostTime(t0);
}

}  // namespace infernix::cuda
