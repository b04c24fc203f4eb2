// Pieces the GPU micro-benchmarks (gemv_bench, moe_gemv_bench, stream_bench) share: a CUDA graph of a
// function's launches and its replay time, and how many layers of weights fit in the device's free memory.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>

#include "backend/cuda/check.h"
#include "backend/cuda/timing.h"
#include "base/error.h"

namespace infernix::bench {

// fn's launches on stream s, captured and instantiated as one graph (the caller destroys it).
template <typename F>
cudaGraphExec_t CaptureGraph(cudaStream_t s, F fn) {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  INFX_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  fn();
  INFX_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  INFX_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
  INFX_CUDA_CHECK(cudaGraphDestroy(g));
  return exec;
}

// Median milliseconds of one replay of fn's launches as a graph (captured once, 2 replays of warm-up, `reps`
// timed, the graph destroyed after).
template <typename F>
double GraphMedianMs(cudaStream_t s, int reps, F fn) {
  cudaGraphExec_t g = CaptureGraph(s, fn);
  const double ms = cuda::MedianMs(s, 2, reps, [&] { INFX_CUDA_CHECK(cudaGraphLaunch(g, s)); });
  INFX_CUDA_CHECK(cudaGraphExecDestroy(g));
  return ms;
}

// Of `wanted` layers of `layer_bytes` each, as many as fit in the free device memory with 2 GiB to spare
// (saying so when fewer); throws when not even one does.
inline int LayersThatFit(size_t layer_bytes, int wanted) {
  size_t free_bytes = 0, total_bytes = 0;
  INFX_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t spare = size_t{2} << 30;
  if (free_bytes < spare + layer_bytes)
    ThrowError(ErrorCode::kOutOfRange, "one layer ({:.2f} GB) does not fit in the GPU's free memory",
               static_cast<double>(layer_bytes) / 1e9);
  if (static_cast<size_t>(wanted) * layer_bytes <= free_bytes - spare) return wanted;
  const int layers = static_cast<int>((free_bytes - spare) / layer_bytes);
  std::printf("only %d of the %d layers fit on the GPU: measuring %d\n", layers, wanted, layers);
  return layers;
}

}  // namespace infernix::bench
