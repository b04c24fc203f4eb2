#include "engine/backend_factory.h"

#include "backend/cpu/cpu_backend.h"
#include "base/error.h"

namespace infernix {

std::unique_ptr<Backend> CreateBackend(const BackendOptions& options) {
  if (options.name == "cpu") return std::make_unique<CpuBackend>(options.n_threads);
  if (options.name == "cuda")
    ThrowError(ErrorCode::kUnsupported, "--backend cuda: this build of infernix has no CUDA backend yet; use cpu");
  ThrowError(ErrorCode::kInvalidArgument, "--backend '{}': unknown backend (expected cpu or cuda)", options.name);
}

}  // namespace infernix
