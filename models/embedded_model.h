// The default model compiled into the binary (models/qwen3-next-e2e: a tiny random-weight Qwen3-Next
// with the real Qwen3 tokenizer and chat template). Used when no --model is given.
#pragma once

#include <memory>

#include "base/file_set.h"

namespace infernix {

inline constexpr const char* kEmbeddedModelName = "qwen3-next-e2e";

std::unique_ptr<FileSet> EmbeddedDefaultModel();

}  // namespace infernix
