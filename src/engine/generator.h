// Single-sequence helpers over a Model: logits of a whole prompt, and greedy generation (prefill of
// the prompt, then one token per step with the cache). The scheduler will batch many sequences; these
// are the reference paths the CLI and tests use.
#pragma once

#include <functional>
#include <vector>

#include "model/model.h"

namespace infernix {

// Index of the largest value; ties go to the lowest index (as torch.argmax).
int32_t Argmax(const float* values, int64_t n);

// Logits of every position of `tokens` [n, vocab], in one forward pass from an empty slot 0 of a
// fresh state whose KV cache holds keys and values as `kv_type` says.
std::vector<float> PromptLogits(Model& model, const std::vector<int32_t>& tokens,
                                KvCacheType kv_type = KvCacheType::kActivation);

struct GreedyOptions {
  int max_new_tokens = 16;
  bool stop_at_eos = false;
  std::vector<int32_t> eos_token_ids;
  int64_t max_context = 0;  // 0: prompt + max_new_tokens
  KvCacheType kv_cache_type = KvCacheType::kActivation;
  // Called with each step's logits [vocab] and the token chosen from them.
  std::function<void(const std::vector<float>& logits, int32_t token)> on_step;
};

// Greedy decoding; returns the new tokens. Errors: kInvalidArgument for an empty prompt or a token out
// of the vocabulary, kOutOfRange when prompt + max_new_tokens exceeds max_context.
std::vector<int32_t> GreedyGenerate(Model& model, const std::vector<int32_t>& prompt, const GreedyOptions& options);

}  // namespace infernix
