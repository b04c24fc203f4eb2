// A GGUF file as a model: the config from its `<arch>.*` metadata, and its tensors under the Hugging Face
// names the architectures bind (model/qwen3.cpp, model/qwen3_next.cpp), undoing what llama.cpp's
// converter changed. See docs/gguf.md for the mapping, tensor by tensor.
//
// Architectures: qwen3, qwen3moe, qwen3next. (qwen35 / qwen35moe files reorder the DeltaNet value heads
// into an order our kernels do not take yet; they are refused with kUnsupported.)
#pragma once

#include <memory>

#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "model/weight_binder.h"

namespace infernix {

// Errors: kUnsupported naming the architecture or option; kInvalidFormat naming a missing or wrong key.
ModelConfig GgufModelConfig(const GgufFile& file);

// The file's tensors under Hugging Face names for `config` (from GgufModelConfig). The source keeps
// `file` alive and owns the few tensors it has to recompute (A_log from ssm_a, the split of ssm_ba).
std::unique_ptr<WeightSource> MakeGgufWeightSource(std::shared_ptr<const GgufFile> file, const ModelConfig& config);

// GgufModelConfig + MakeGgufWeightSource, bound onto `backend` (which must outlive the model).
class Model;
std::unique_ptr<Model> LoadGgufModel(std::shared_ptr<const GgufFile> file, Backend& backend);

}  // namespace infernix
