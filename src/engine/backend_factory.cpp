#include "engine/backend_factory.h"

#include "backend/cpu/cpu_backend.h"
#include "base/error.h"
#ifdef INFERNIX_HAVE_CUDA
#include "backend/cuda/factory.h"
#endif


namespace infernix {

std::string CudaUnavailable(int device) {
#ifdef INFERNIX_HAVE_CUDA
  return CudaUnavailableReason(device);
#else
  (void)device;
  return "this build of infernix has no CUDA backend (no CUDA toolkit was found when it was built)";
#endif
}

std::unique_ptr<Backend> CreateBackend(const BackendOptions& options) {
  if (options.n_threads > BackendOptions::kMaxThreads)
    ThrowError(ErrorCode::kInvalidArgument, "--threads {}: at most {} CPU threads", options.n_threads,
               BackendOptions::kMaxThreads);
  std::string name = options.name;
  if (name == "auto") name = CudaUnavailable(options.cuda_device).empty() ? "cuda" : "cpu";
  if (name == "cpu") return std::make_unique<CpuBackend>(options.n_threads);
  if (name == "cuda") {
#ifdef INFERNIX_HAVE_CUDA
    CudaOptions cuda;
    cuda.device = options.cuda_device;
    cuda.graphs = options.cuda_graphs;
    cuda.fuse = options.cuda_fuse;
    cuda.replay_steps = options.cuda_replay_steps;
    cuda.verify_replay = options.cuda_verify_replay;
    return CreateCudaBackend(cuda);
#else
    ThrowError(ErrorCode::kUnsupported, "--backend cuda: {}; use --backend cpu", CudaUnavailable(options.cuda_device));
#endif
  }
  ThrowError(ErrorCode::kInvalidArgument, "--backend '{}': unknown backend (expected auto, cpu or cuda)", options.name);
}

std::optional<DeviceCeilings> MeasureDeviceCeilings(Backend& backend) {
#ifdef INFERNIX_HAVE_CUDA
  if (backend.name() == "cuda") {
    CudaDeviceReport r = MeasureCudaDevice(backend);
    return DeviceCeilings{r.name, r.copy_bytes_per_s, r.bf16_flops_per_s};
  }
#else
  (void)backend;
#endif
  return std::nullopt;
}

std::optional<BackendCounters> ReadBackendCounters(Backend& backend) {
#ifdef INFERNIX_HAVE_CUDA
  if (backend.name() == "cuda") {
    CudaCounters c = ReadCudaCounters(backend);
    return BackendCounters{c.units_eager,       c.units_captured, c.units_replayed, c.units_timed,
                           c.forwards_replayed, c.gpu_ms,         c.host_flush_ms,  c.host_wait_ms};
  }
#else
  (void)backend;
#endif
  return std::nullopt;
}

}  // namespace infernix
