// BF16 matrix products through cuBLASLt, for prefill-sized batches: out [n, m] = x [n, k] @ w [m, k]^T
// with x and w bf16, out bf16 or f32, f32 accumulation. Plans (descriptors and the heuristic's
// algorithm) are made once per shape and kept, so repeated calls pick the same algorithm (results are
// reproducible and CUDA graphs stay valid).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <tuple>

#include "backend/cuda/memory.h"
#include "tensor/dtype.h"

namespace infernix::cuda {

struct GemmPlan {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

class GemmLt {
 public:
  explicit GemmLt(size_t workspace_bytes = size_t{32} << 20);
  ~GemmLt();
  GemmLt(const GemmLt&) = delete;
  GemmLt& operator=(const GemmLt&) = delete;

  // The plan for this shape, or nullptr when cuBLASLt offers no algorithm (the caller falls back).
  // alignment: the largest power of two (<= 256) that divides every pointer the plan will see.
  const GemmPlan* Find(int64_t n, int64_t m, int64_t k, DType out, unsigned alignment);
  // Launcher (recorder.h): runs plan on the stream.
  static void Run(cudaStream_t s, const GemmPlan* plan, const void* x, const void* w, void* out);

 private:
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int, unsigned>, std::unique_ptr<GemmPlan>> plans_;
};

}  // namespace infernix::cuda
