// Timing on a CUDA stream, for the measurements of the benchmark (measure.cpp, bench/cuda/).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/check.h"

namespace infernix::cuda {

// Median milliseconds of `reps` runs of fn (after `warmup` runs), timed with events on `stream`.
template <typename F>
double MedianMs(cudaStream_t stream, int warmup, int reps, F fn) {
  cudaEvent_t start, stop;
  INFX_CUDA_CHECK(cudaEventCreate(&start));
  INFX_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    INFX_CUDA_CHECK(cudaEventRecord(start, stream));
    fn();
    INFX_CUDA_CHECK(cudaEventRecord(stop, stream));
    INFX_CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    INFX_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  INFX_CUDA_CHECK(cudaEventDestroy(start));
  INFX_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace infernix::cuda
