// A GGUF file as a model: the config from its `<arch>.*` metadata, and its tensors under the Hugging Face
// names the architectures bind (model/qwen3.cpp, model/qwen3_next.cpp), undoing what llama.cpp's
// converter changed. See docs/gguf.md for the mapping, tensor by tensor.
//
// Architectures: qwen3, qwen3moe, qwen3next, qwen35, qwen35moe; any other is refused with kUnsupported.
// qwen35 / qwen35moe files hold their DeltaNet value heads in tiled order (the converter reorders them,
// including the columns of ssm_out, which cannot be undone for block-quantized weights by moving bytes):
// the config says so (ModelConfig::linear_value_heads_tiled) and the delta rule maps value head h to key
// head h % nk. Their multi-token-prediction layers (nextn_predict_layers) are not loaded.
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
// The same with the config already derived (GgufModelConfig(*file)).
std::unique_ptr<Model> LoadGgufModel(std::shared_ptr<const GgufFile> file, ModelConfig config, Backend& backend);

}  // namespace infernix
