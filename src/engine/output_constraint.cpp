#include "engine/output_constraint.h"

#include <algorithm>

namespace infernix {

OutputConstraint::OutputConstraint(std::shared_ptr<grammar::TokenGrammar> grammar, std::vector<int32_t> eos_ids,
                                   std::string trigger, int64_t vocab_size)
    : grammar_(std::move(grammar)), eos_ids_(std::move(eos_ids)), trigger_(std::move(trigger)) {
  const size_t tokenizer_words = (static_cast<size_t>(grammar_->vocab()->size()) + 31) / 32;
  mask_.resize(std::max(tokenizer_words, static_cast<size_t>((vocab_size + 31) / 32)));
  if (trigger_.empty()) Start("");
}

void OutputConstraint::Start(std::string_view after_trigger) {
  matcher_.emplace(grammar_, eos_ids_);
  // Text past the trigger in the same token: the grammar must take it, or the call is left alone.
  if (!after_trigger.empty() && !matcher_->AcceptBytes(after_trigger)) matcher_.reset();
}

OutputConstraint::Next OutputConstraint::NextMask() {
  if (!matcher_) return {};
  matcher_->FillNextTokenBitmask(mask_);
  const bool any = std::any_of(mask_.begin(), mask_.end(), [](uint32_t w) { return w != 0; });
  return Next{mask_, !any};
}

void OutputConstraint::Accept(int32_t token) {
  const auto& vocab = *grammar_->vocab();
  if (matcher_) {
    matcher_->AcceptToken(token);
    if (!trigger_.empty() && matcher_->IsComplete()) {  // the constrained part is over: free again
      matcher_.reset();
      recent_.clear();
    }
    return;
  }
  if (token < 0 || token >= vocab.size()) return;
  recent_ += vocab.bytes(token);
  const size_t at = recent_.find(trigger_);
  if (at != std::string::npos) {
    std::string after = recent_.substr(at + trigger_.size());
    recent_.clear();
    Start(after);
    return;
  }
  if (recent_.size() >= trigger_.size()) recent_.erase(0, recent_.size() - (trigger_.size() - 1));
}

}  // namespace infernix
