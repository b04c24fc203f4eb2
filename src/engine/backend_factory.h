// Creates a backend by name ("cpu"; "cuda" when built with it).
#pragma once

#include <memory>
#include <string>

#include "backend/ops.h"

namespace infernix {

struct BackendOptions {
  std::string name = "cpu";
  size_t n_threads = 0;  // CPU threads; 0 = one per hardware thread
};

// Throws Error(kInvalidArgument) for an unknown name, kUnsupported for one this build lacks.
std::unique_ptr<Backend> CreateBackend(const BackendOptions& options);

}  // namespace infernix
