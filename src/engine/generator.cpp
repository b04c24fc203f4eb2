#include "engine/generator.h"

#include <algorithm>

#include "base/error.h"

namespace infernix {

int32_t Argmax(const float* values, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (values[i] > values[best]) best = i;
  return static_cast<int32_t>(best);
}

std::vector<float> PromptLogits(Model& model, const std::vector<int32_t>& tokens, KvCacheType kv_type) {
  if (tokens.empty()) ThrowError(ErrorCode::kInvalidArgument, "--tokens: expected at least one token");
  auto state = model.backend().CreateState(model.MakeStateSpec(1, static_cast<int64_t>(tokens.size()), kv_type));
  std::vector<float> logits;
  model.Forward(ForwardBatch::Single(tokens, 0, 0, /*all_logits=*/true), *state, logits);
  return logits;
}

std::vector<int32_t> GreedyGenerate(Model& model, const std::vector<int32_t>& prompt, const GreedyOptions& options) {
  if (prompt.empty()) ThrowError(ErrorCode::kInvalidArgument, "--tokens: expected at least one prompt token");
  if (options.max_new_tokens < 0)
    ThrowError(ErrorCode::kInvalidArgument, "--max-tokens: expected a non-negative count, got {}",
               options.max_new_tokens);
  int64_t needed = static_cast<int64_t>(prompt.size()) + options.max_new_tokens;
  int64_t max_context = options.max_context > 0 ? options.max_context : needed;
  if (needed > max_context)
    ThrowError(ErrorCode::kOutOfRange, "prompt of {} tokens + {} new tokens exceeds the context size of {} tokens",
               prompt.size(), options.max_new_tokens, max_context);
  auto state = model.backend().CreateState(model.MakeStateSpec(1, max_context, options.kv_cache_type));
  const int64_t vocab = model.config().vocab_size;
  std::vector<int32_t> out;
  std::vector<float> logits;
  std::vector<int32_t> step = prompt;
  int64_t pos = 0;
  while (static_cast<int>(out.size()) < options.max_new_tokens) {
    int64_t n = static_cast<int64_t>(step.size());
    model.Forward(ForwardBatch::Single(step, 0, pos, /*all_logits=*/false), *state, logits);
    pos += n;
    int32_t next = Argmax(logits.data(), vocab);
    if (options.on_step) options.on_step(logits, next);
    out.push_back(next);
    if (options.stop_at_eos &&
        std::find(options.eos_token_ids.begin(), options.eos_token_ids.end(), next) != options.eos_token_ids.end())
      break;
    step.assign(1, next);
  }
  return out;
}

}  // namespace infernix
