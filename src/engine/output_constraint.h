// The grammar side of one request's sampling (docs/grammar.md, "Wiring"): when the next token is
// masked and with what. Two modes:
//
//   - eager: every token is sampled under the grammar's mask (stop tokens allowed exactly when the
//     grammar is complete); when the grammar allows nothing more, the request ends;
//   - lazy (a trigger string is given): the output is free until it contains the trigger (found
//     across token boundaries); the grammar then constrains what follows the trigger (bytes of the
//     triggering token past the trigger are fed to it first), and once the grammar is complete the
//     output is free again and the trigger re-arms. Used for strict tools under tool_choice auto:
//     trigger `<tool_call>`, grammar the call. An optional TriggerGate (engine/request.h) sees the
//     unconstrained output in order and decides whether a trigger counts where it stands (the server's
//     gate: not inside a markdown code fence).
//
// Plan/apply: NextMask computes the mask without changing the state; Accept applies the sampled
// token. Not thread-safe (one per request, on the engine thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/request.h"
#include "grammar/token_matcher.h"

namespace infernix {

class OutputConstraint {
 public:
  // vocab_size: the model's vocabulary (may be padded past the tokenizer's); masks cover it.
  OutputConstraint(std::shared_ptr<grammar::TokenGrammar> grammar, std::vector<int32_t> eos_ids,
                   std::string trigger, int64_t vocab_size, std::shared_ptr<TriggerGate> gate = nullptr);

  struct Next {
    std::span<const uint32_t> mask;  // empty: sample freely
    bool exhausted = false;          // eager: nothing is allowed any more; end the request
  };
  Next NextMask();
  // Records the sampled token (one that NextMask's mask allowed).
  void Accept(int32_t token);

  bool constrained() const { return matcher_.has_value(); }

 private:
  void Start(std::string_view after_trigger);

  std::shared_ptr<grammar::TokenGrammar> grammar_;
  std::vector<int32_t> eos_ids_;
  std::string trigger_;             // empty: eager
  std::optional<grammar::TokenMatcher> matcher_;
  std::vector<uint32_t> mask_;
  std::string recent_;              // lazy and free: output not yet given to the gate (may start a trigger)
  std::shared_ptr<TriggerGate> gate_;
};

}  // namespace infernix
