#include "chat/output/output_parser.h"

#include <algorithm>
#include <memory>
#include <random>
#include <utility>

#include "base/check.h"

namespace infernix {

std::function<std::string()> RandomCallIdGenerator() {
  auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
  return [engine]() {
    static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
    std::string id = "call_";
    for (int i = 0; i < 24; ++i) id += kAlphabet[pick(*engine)];
    return id;
  };
}

OutputParser::OutputParser(OutputParserOptions options) {
  if (options.parse_reasoning)
    reasoning_.emplace(ReasoningParserOptions{.starts_in_reasoning = options.starts_in_reasoning,
                                              .detect_tool_calls = options.parse_tool_calls});
  if (options.parse_tool_calls) {
    if (!options.make_call_id) options.make_call_id = RandomCallIdGenerator();
    tool_calls_.emplace(ToolCallParserOptions{.tools = std::move(options.tools),
                                              .make_call_id = std::move(options.make_call_id),
                                              .single_call = options.single_tool_call});
  }
}

OutputDelta OutputParser::Push(std::string_view text) {
  INFX_CHECK_MSG(!finished_, "OutputParser::Push after Finish");
  OutputDelta out;
  if (done()) return out;  // the turn ended with its one call
  Route(reasoning_ ? reasoning_->Push(text) : ReasoningDelta{"", std::string(text)}, &out);
  Record(out);
  return out;
}

OutputDelta OutputParser::Finish() {
  INFX_CHECK_MSG(!finished_, "OutputParser::Finish called twice");
  finished_ = true;
  OutputDelta out;
  if (done()) return out;
  if (reasoning_) Route(reasoning_->Finish(), &out);
  if (tool_calls_) {
    ToolCallParserDelta last = tool_calls_->Finish();
    AppendDelta(&out, OutputDelta{"", std::move(last.content), std::move(last.tool_calls)});
  }
  Record(out);
  return out;
}

void AppendDelta(OutputDelta* delta, OutputDelta next) {
  delta->reasoning += next.reasoning;
  delta->content += next.content;
  for (ToolCallDelta& call : next.tool_calls) {
    auto same = std::find_if(delta->tool_calls.begin(), delta->tool_calls.end(),
                             [&](const ToolCallDelta& d) { return d.index == call.index; });
    if (same == delta->tool_calls.end())
      delta->tool_calls.push_back(std::move(call));
    else
      same->arguments_fragment += call.arguments_fragment;
  }
}

void OutputParser::Route(ReasoningDelta reasoning, OutputDelta* out) {
  out->reasoning += reasoning.reasoning;
  if (reasoning.content.empty()) return;
  if (!tool_calls_) {
    out->content += content_trimmer_.Add(reasoning.content);
    return;
  }
  ToolCallParserDelta parsed = tool_calls_->Push(reasoning.content);
  out->content += parsed.content;
  out->tool_calls = std::move(parsed.tool_calls);
}

void OutputParser::Record(const OutputDelta& delta) {
  result_.reasoning += delta.reasoning;
  result_.content += delta.content;
  for (const ToolCallDelta& call : delta.tool_calls) {
    auto index = static_cast<size_t>(call.index);
    if (index == result_.tool_calls.size()) result_.tool_calls.push_back(ToolCall{call.id, call.name, ""});
    INFX_CHECK(index < result_.tool_calls.size());
    result_.tool_calls[index].arguments += call.arguments_fragment;
  }
}

ParsedOutput ParseOutput(std::string_view text, OutputParserOptions options) {
  OutputParser parser(std::move(options));
  parser.Push(text);
  parser.Finish();
  return parser.result();
}

}  // namespace infernix
