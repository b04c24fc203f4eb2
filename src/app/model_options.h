// Options shared by the subcommands that run a model (logits, generate, bench): the backend flags
// and --dummy-weights (cmd_model.cpp).
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "base/file_set.h"
#include "engine/backend_factory.h"
#include "formats/hf_config.h"

namespace infernix {

// --backend, --threads, --gpu, --no-cuda-graphs and --dummy-weights.
void AddBackendOptions(CLI::App* cmd, BackendOptions& backend, bool& dummy_weights);

// The config a --dummy-weights model is made from: `model_path` may name a config .json file (then
// *files stays empty), a model folder, or be empty for the embedded model (then *files holds it).
ModelConfig LoadConfigForDummyWeights(const std::string& model_path, std::unique_ptr<FileSet>* files);

}  // namespace infernix
