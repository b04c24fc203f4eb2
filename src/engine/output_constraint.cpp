#include "engine/output_constraint.h"

#include <algorithm>

namespace infernix {

OutputConstraint::OutputConstraint(std::shared_ptr<grammar::TokenGrammar> grammar, std::vector<int32_t> eos_ids,
                                   std::string trigger, int64_t vocab_size, std::shared_ptr<TriggerGate> gate)
    : grammar_(std::move(grammar)),
      eos_ids_(std::move(eos_ids)),
      trigger_(std::move(trigger)),
      gate_(std::move(gate)) {
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
      if (gate_) gate_->AfterConstrained();
    }
    return;
  }
  if (token < 0 || token >= vocab.size()) return;
  recent_ += vocab.bytes(token);
  for (size_t at; (at = recent_.find(trigger_)) != std::string::npos;) {
    if (gate_) gate_->Feed(std::string_view(recent_).substr(0, at));
    if (!gate_ || gate_->Open()) {
      std::string after = recent_.substr(at + trigger_.size());
      recent_.clear();
      Start(after);
      return;
    }
    // Not here (quoted): the trigger is plain output; look on.
    gate_->Feed(trigger_);
    recent_.erase(0, at + trigger_.size());
  }
  // What could still begin a trigger stays; the rest is final.
  if (recent_.size() >= trigger_.size()) {
    const size_t done = recent_.size() - (trigger_.size() - 1);
    if (gate_) gate_->Feed(std::string_view(recent_).substr(0, done));
    recent_.erase(0, done);
  }
}

}  // namespace infernix
