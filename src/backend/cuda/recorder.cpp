#include "backend/cuda/recorder.h"

#include <algorithm>

#include "backend/cuda/check.h"

namespace infernix::cuda {

Recorder::Recorder(cudaStream_t stream, bool use_graphs, size_t max_graphs)
    : stream_(stream), use_graphs_(use_graphs), max_graphs_(std::max<size_t>(1, max_graphs)) {}

Recorder::~Recorder() { ClearGraphs(); }

void Recorder::ClearGraphs() {
  for (auto& [hash, g] : graphs_) INFX_CUDA_CHECK(cudaGraphExecDestroy(g.exec));
  graphs_.clear();
  seen_.clear();
}

void Recorder::AppendKey(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  key_.append(reinterpret_cast<const char*>(b), n);
  for (size_t i = 0; i < n; ++i) hash_ = (hash_ ^ b[i]) * 1099511628211ull;
}

void Recorder::RunEagerly() {
  for (auto& c : commands_) c(stream_);
}

cudaGraphExec_t Recorder::Capture() {
  INFX_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  for (auto& c : commands_) c(stream_);
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

void Recorder::Flush() {
  if (commands_.empty()) return;
  ++clock_;
  if (!use_graphs_) {
    RunEagerly();
    ++stats_.units_eager;
  } else if (auto it = graphs_.find(hash_); it != graphs_.end() && it->second.key == key_) {
    it->second.last_use = clock_;
    INFX_CUDA_CHECK(cudaGraphLaunch(it->second.exec, stream_));
    ++stats_.units_replayed;
  } else if (std::find(seen_.begin(), seen_.end(), hash_) != seen_.end() && it == graphs_.end()) {
    Evict();
    Graph g{key_, Capture(), clock_};
    INFX_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
    graphs_.emplace(hash_, std::move(g));
    ++stats_.units_captured;
  } else {
    RunEagerly();
    seen_.push_back(hash_);
    if (seen_.size() > 4 * max_graphs_) seen_.pop_front();
    ++stats_.units_eager;
  }
  commands_.clear();
  key_.clear();
  hash_ = 1469598103934665603ull;
}

}  // namespace infernix::cuda
