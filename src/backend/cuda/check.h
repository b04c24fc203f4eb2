// Return-code checks for CUDA runtime and cuBLASLt calls. A failing call is a broken invariant
// (a bug, or a device that fell over): it aborts with file:line and the CUDA error text. Errors a user
// can cause (no GPU, out of memory) are turned into infernix::Error where they can arise instead.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "base/check.h"

#define INFX_CUDA_CHECK(expr)                                                                        \
  do {                                                                                               \
    cudaError_t infx_err_ = (expr);                                                                  \
    if (infx_err_ != cudaSuccess) [[unlikely]]                                                       \
      ::infernix::detail::CheckFailed(__FILE__, __LINE__, #expr,                                     \
                                      fmt::format("CUDA error {}: {}", static_cast<int>(infx_err_),  \
                                                  cudaGetErrorString(infx_err_)));                   \
  } while (0)

#define INFX_CUBLAS_CHECK(expr)                                                                      \
  do {                                                                                               \
    cublasStatus_t infx_st_ = (expr);                                                                \
    if (infx_st_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                              \
      ::infernix::detail::CheckFailed(__FILE__, __LINE__, #expr,                                     \
                                      fmt::format("cuBLAS status {}", static_cast<int>(infx_st_)));  \
  } while (0)

// After a kernel launch: a bad configuration shows up here, not at the <<<>>> line.
#define INFX_CUDA_CHECK_LAUNCH() INFX_CUDA_CHECK(cudaGetLastError())
