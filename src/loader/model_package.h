// What a model path holds, whatever its format: a Hugging Face folder (config.json, safetensors,
// tokenizer.json, tokenizer_config.json, generation_config.json), the embedded default model, or a
// GGUF file (metadata, tensors, tokenizer.ggml.*, tokenizer.chat_template). Every command and the server
// load models through this, so each format is handled in one place.
#pragma once

#include <memory>
#include <string>

#include "backend/ops.h"
#include "base/file_set.h"
#include "chat/chat_template.h"
#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace infernix {

class ModelPackage {
 public:
  // A Hugging Face folder or an embedded file set. Parses config.json (errors name the file).
  static std::unique_ptr<ModelPackage> FromFiles(std::unique_ptr<FileSet> files);
  // A parsed GGUF file. Derives the config from its metadata (errors name the file and key).
  static std::unique_ptr<ModelPackage> FromGguf(std::shared_ptr<const GgufFile> file);
  // A directory is a Hugging Face folder; a file is read as GGUF. kNotFound when `path` does not exist.
  static std::unique_ptr<ModelPackage> Open(const std::string& path);

  const ModelConfig& config() const { return config_; }
  // The weights on `backend` (which must outlive the model).
  std::unique_ptr<Model> LoadModel(Backend& backend) const;
  // Throws Error(kInvalidArgument) naming both sizes when the tokenizer has more ids than the
  // model's vocabulary (config vocab_size): those ids would have no logits.
  std::unique_ptr<Tokenizer> LoadTokenizer() const;
  // kNotFound when the model has no chat template.
  std::unique_ptr<ChatTemplate> LoadChatTemplate() const;
  // End-of-sequence ids and sampling defaults (generation_config.json; for GGUF the eos token and
  // any general.sampling.* keys). Throws Error(kInvalidArgument) for an eos id outside the vocabulary.
  GenerationDefaults LoadGenerationDefaults() const;

 private:
  ModelPackage() = default;
  GenerationDefaults GgufGenerationDefaults() const;
  std::unique_ptr<FileSet> files_;
  std::shared_ptr<const GgufFile> gguf_;
  ModelConfig config_;
};

}  // namespace infernix
