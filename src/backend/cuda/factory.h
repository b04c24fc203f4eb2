// The CUDA backend's entry points for code that must not see CUDA headers (the backend factory, the
// CLI): availability, construction and the device measurements the benchmark reports.
#pragma once

#include <memory>
#include <string>

#include "backend/ops.h"

namespace infernix {

struct CudaOptions {
  int device = 0;
  // Replay decode steps (and any repeated forward pass) as CUDA graphs.
  bool graphs = true;
  // Which attention kernel serves batches with a prefill chunk: auto (flash when the head_dim fits),
  // or always one of them (tests use this to check both on the same inputs).
  enum class Attention { kAuto, kFlash, kSplit } attention = Attention::kAuto;
  // Matrix-product paths; turning one off sends its cases to the next (gemv -> cuBLASLt -> CUDA cores).
  bool gemv = true;
  bool cublas = true;
  // Fuse neighbouring ops (residual add + norm, q/k norm + RoPE + KV append, the norm into the decode
  // GEMV that reads it, SiLU-and-multiply into the gate/up GEMV); off: every op is its own launch
  // (tests compare the two).
  bool fuse = true;
  // Decode steps of a shape seen before launch the previous step's graph with the new token ids and
  // layout, without queuing the model's ops again (Backend::ReplayForward). verify_replay: queue them
  // anyway and check that they make the unit a replay would have launched (tests).
  bool replay_steps = true;
  bool verify_replay = false;
};

// Empty when GPU `device` can run the CUDA backend; otherwise why not (no driver, no GPU, a GPU older
// than compute capability 8.0, a build without kernels for its architecture).
std::string CudaUnavailableReason(int device = 0);

// Throws Error(kUnsupported) with CudaUnavailableReason() when the device cannot be used.
std::unique_ptr<Backend> CreateCudaBackend(const CudaOptions& options);

// What the benchmark needs to know about the device behind a CUDA backend, measured in this process.
struct CudaDeviceReport {
  std::string name;
  int sm_count = 0;
  double memory_gib = 0;
  double copy_bytes_per_s = 0;  // device-to-device copy, bytes read + bytes written per second
  double bf16_flops_per_s = 0;  // a plain cuBLASLt BF16 GEMM (8192^3, random data), median of runs
};
// backend must come from CreateCudaBackend.
CudaDeviceReport MeasureCudaDevice(Backend& backend);

// The recorder's counters (recorder.h): units run eagerly, captured, replayed (of them, forward passes
// replayed without their ops queued: Backend::ReplayForward); device time of units; host time in the
// recorder's flushes (hash, launch) and in copies to the host (waiting for the device).
struct CudaCounters {
  int64_t units_eager = 0, units_captured = 0, units_replayed = 0, units_timed = 0, forwards_replayed = 0;
  double gpu_ms = 0, host_flush_ms = 0, host_wait_ms = 0;
};
// Runs what is queued first and waits for the device, so that the counters cover all of it (and work
// queued before a measurement is not counted in it).
CudaCounters ReadCudaCounters(Backend& backend);

}  // namespace infernix
