#include "chat/output/reasoning_parser.h"

#include "base/check.h"

namespace infernix {

using output::Match;
using output::MatchLiteral;

ReasoningParser::ReasoningParser(ReasoningParserOptions options)
    : options_(options), state_(options.starts_in_reasoning ? State::kReasoningStart : State::kStart) {}

ReasoningDelta ReasoningParser::Push(std::string_view text) {
  ReasoningDelta out;
  buf_.append(text);
  Run(false, &out);
  return out;
}

ReasoningDelta ReasoningParser::Finish() {
  ReasoningDelta out;
  Run(true, &out);
  INFX_CHECK(buf_.empty());
  return out;
}

void ReasoningParser::Run(bool at_end, ReasoningDelta* out) {
  while (pos_ < buf_.size() && Step(at_end, out)) {
  }
  buf_.erase(0, pos_);
  pos_ = 0;
}

void ReasoningParser::EmitReasoning(std::string_view text, ReasoningDelta* out) {
  fence_.Feed(text);
  out->reasoning += trimmer_.Add(text);
}

bool ReasoningParser::Step(bool at_end, ReasoningDelta* out) {
  std::string_view rest = std::string_view(buf_).substr(pos_);
  switch (state_) {
    case State::kStart:
    case State::kReasoningStart: {
      // Leading whitespace is held until the next character shows whether "<think>" follows.
      size_t first = rest.find_first_not_of(" \t\r\n");
      if (first == std::string_view::npos) {
        if (!at_end) return false;
        first = rest.size();
      }
      Match think = MatchLiteral(rest.substr(first), output::kThinkOpen);
      if (think == Match::kPartial && !at_end) return false;
      if (think == Match::kYes) {
        pos_ += first + output::kThinkOpen.size();  // the whitespace before it goes too
        state_ = State::kReasoningStart;             // a repeated "<think>" is dropped as well
        return true;
      }
      state_ = state_ == State::kStart ? State::kContent : State::kReasoning;
      return true;
    }
    case State::kReasoning:
      return StepReasoning(at_end, out);
    case State::kContent:
      out->content.append(rest);
      pos_ = buf_.size();
      return true;
  }
  return false;
}

bool ReasoningParser::StepReasoning(bool at_end, ReasoningDelta* out) {
  std::string_view rest = std::string_view(buf_).substr(pos_);
  size_t lt = rest.find('<');
  if (lt != 0) {
    size_t n = lt == std::string_view::npos ? rest.size() : lt;
    EmitReasoning(rest.substr(0, n), out);
    pos_ += n;
    return true;
  }
  Match close = MatchLiteral(rest, output::kThinkClose);
  if (close == Match::kYes) {
    pos_ += output::kThinkClose.size();
    state_ = State::kContent;
    return true;
  }
  Match call = Match::kNo;
  if (options_.detect_tool_calls && !fence_.InFenceBeforeMarkup()) {
    output::ToolCallForm form;
    call = output::MatchToolCallStart(rest, at_end, &form);
  }
  if (call == Match::kYes) {
    state_ = State::kContent;  // the tool call itself goes on to the tool call parser
    return true;
  }
  if (!at_end && (close == Match::kPartial || call == Match::kPartial)) return false;
  EmitReasoning(rest.substr(0, 1), out);
  ++pos_;
  return true;
}

}  // namespace infernix
