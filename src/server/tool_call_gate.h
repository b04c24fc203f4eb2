// The server's TriggerGate (engine/request.h) for the lazy tool-call grammar of strict tools under
// tool_choice auto: a `<tool_call>` the model writes starts a constrained call only where the output
// parser (src/chat/output) would read a call, i.e. not inside a markdown code fence, where it is quoted
// text. Fences are followed as the parsers follow them (output::FenceTracker); the content after
// `</think>` starts outside any fence (reasoning and content are parsed apart), and a completed call
// ends its line.
#pragma once

#include <string>
#include <string_view>

#include "chat/output/text_scan.h"
#include "engine/request.h"

namespace infernix {

class ToolCallGate final : public TriggerGate {
 public:
  void Feed(std::string_view text) override;
  bool Open() override { return !fence_.InFenceBeforeMarkup(); }
  void AfterConstrained() override { fence_.StartLine(); }

 private:
  output::FenceTracker fence_;
  std::string tail_;  // the last bytes fed, to find `</think>` across pieces
};

}  // namespace infernix
