// Options shared by the subcommands that run a model (logits, generate, bench; serve takes
// --kv-cache-dtype too): the backend flags, --dummy-weights and --kv-cache-dtype (cmd_model.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "backend/ops.h"
#include "base/file_set.h"
#include "engine/backend_factory.h"
#include "formats/hf_config.h"

namespace infernix {

// --backend, --threads, --gpu and --no-cuda-graphs (serve and the model commands).
void AddDeviceOptions(CLI::App* cmd, BackendOptions& backend);
// AddDeviceOptions and --dummy-weights.
void AddBackendOptions(CLI::App* cmd, BackendOptions& backend, bool& dummy_weights);

// --kv-cache-dtype, a checked choice: auto sets `kv_type` (which must outlive `cmd`) to
// KvCacheType::kActivation, fp8 to KvCacheType::kF8E4M3; any other value is a parse error listing both.
CLI::Option* AddKvCacheOption(CLI::App* cmd, KvCacheType& kv_type);
// How the bench header names a state's KV cache: the activation dtype's name ("bf16", "f32") or "fp8 e4m3".
std::string KvCacheTypeName(KvCacheType kv_type, DType activation_dtype);

// The config a --dummy-weights model is made from: `model_path` may name a config .json file (then
// *files stays empty), a model folder, or be empty for the embedded model (then *files holds it).
ModelConfig LoadConfigForDummyWeights(const std::string& model_path, std::unique_ptr<FileSet>* files);

}  // namespace infernix
