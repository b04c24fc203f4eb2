// Creates a backend by name: "cpu", "cuda" (when built with it), or "auto" (cuda when this build has
// it and a usable GPU is present, else cpu).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "backend/ops.h"

namespace infernix {

struct BackendOptions {
  static constexpr size_t kMaxThreads = 4096;
  std::string name = "auto";
  size_t n_threads = 0;     // CPU threads; 0 = one per hardware thread; at most kMaxThreads
  int cuda_device = 0;      // CUDA: which GPU
  bool cuda_graphs = true;  // CUDA: replay repeated forward passes (decode steps) as CUDA graphs
  bool cuda_fuse = true;    // CUDA: fuse neighbouring ops (off: every op its own launch; tests compare both)
  // CUDA: decode steps of a shape seen before launch the last one's graph without queuing the ops again;
  // verify: queue them anyway and check they make that graph (CudaOptions::replay_steps, verify_replay).
  bool cuda_replay_steps = true;
  bool cuda_verify_replay = false;
};

// Throws Error(kInvalidArgument) for an unknown name or more than kMaxThreads threads, kUnsupported for one this build or machine
// lacks (naming the reason: no CUDA in this build, no GPU, a GPU that is too old).
std::unique_ptr<Backend> CreateBackend(const BackendOptions& options);

// Empty when "--backend cuda" would work here; otherwise why not.
std::string CudaUnavailable(int device = 0);

// The device ceilings a benchmark compares against, measured now; nullopt for a non-CUDA backend.
struct DeviceCeilings {
  std::string name;
  double copy_bytes_per_s = 0;  // device-to-device copy, bytes read + written per second
  double bf16_flops_per_s = 0;  // plain BF16 GEMM through cuBLASLt
};
std::optional<DeviceCeilings> MeasureDeviceCeilings(Backend& backend);

// Execution counters of a CUDA backend (nullopt for others): units of queued work run eagerly,
// captured into a CUDA graph or replayed, the device time of the units timed so far, and host time in
// launching units (host_flush_ms) and in copies to the host, waiting for the device (host_wait_ms).
// forwards_replayed: of the units replayed, forward passes launched without their ops queued again.
struct BackendCounters {
  int64_t units_eager = 0, units_captured = 0, units_replayed = 0, units_timed = 0, forwards_replayed = 0;
  double gpu_ms = 0, host_flush_ms = 0, host_wait_ms = 0;
};
// Runs what is queued first and waits for it, so that the counters cover all of it.
std::optional<BackendCounters> ReadBackendCounters(Backend& backend);

}  // namespace infernix
