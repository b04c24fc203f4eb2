#include "server/generation_run.h"

#include <random>

#include "base/error.h"
#include "server/tool_call_gate.h"

namespace infernix {
namespace {

Json RenderedTools(const ChatInput& input) {
  if (input.tool_choice == ToolChoiceMode::kNone || input.tools.is_null()) return nullptr;
  if (input.tool_choice != ToolChoiceMode::kNamed) return input.tools;
  Json only = Json::array();
  for (const auto& t : input.tools)
    if (t.contains("function") && StringMember(t["function"], "name") == input.tool_choice_name) only.push_back(t);
  return only;
}

// Tool-call ids "call_" + 24 alphanumerics, from a generator owned by the request.
std::function<std::string()> CallIdGenerator() {
  auto rng = std::make_shared<std::mt19937_64>(std::random_device{}());
  return [rng] {
    static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    std::string id = "call_";
    for (int i = 0; i < 24; ++i) id += kChars[(*rng)() % (sizeof(kChars) - 1)];
    return id;
  };
}

// Where a turn that allows one tool call ends: a parser of its own, with the run's options, reads the
// output as the engine publishes it (the run's parser reads the same text on the HTTP thread; their
// results do not depend on how the text is split, so both end at the same byte).
class SingleToolCallEnd final : public OutputEnd {
 public:
  SingleToolCallEnd(OutputParserOptions options, std::string_view forced_prefix)
      : parser_(WithoutIds(std::move(options))) {
    parser_.Push(forced_prefix);
  }
  bool Feed(std::string_view text) override {
    parser_.Push(text);
    return parser_.done();
  }

 private:
  // Ids are the run's parser's business (and its generator is not for this thread).
  static OutputParserOptions WithoutIds(OutputParserOptions options) {
    options.make_call_id = [] { return std::string(); };
    return options;
  }
  OutputParser parser_;
};

}  // namespace

void ConstrainToolCalls(ModelService& service, ChatInput& input, GenerationRequest& request) {
  if (input.tools.is_null() || input.tools.empty()) return;
  const bool forced = input.tool_choice == ToolChoiceMode::kRequired || input.tool_choice == ToolChoiceMode::kNamed;
  // A forced call has no text answer for a response_format to shape; under auto the output-wide
  // constraint stays (a lazy call grammar cannot run beside it).
  if (request.grammar && !forced) return;
  bool any_strict = false;
  for (const auto& t : input.tools) {
    auto it = t["function"].find("strict");
    any_strict = any_strict || (it != t["function"].end() && it->is_boolean() && it->get<bool>());
  }
  if (!forced && !(input.tool_choice == ToolChoiceMode::kAuto && (any_strict || input.strict_if_compatible))) return;
  try {
    if (forced) {
      request.grammar = service.CompileGrammar(GrammarKind::kToolCalls, DumpJson(RenderedTools(input)));
      input.tool_call_constrained = true;
    } else {
      request.grammar = service.CompileGrammar(GrammarKind::kToolCallsLazy, DumpJson(input.tools));
      request.grammar_trigger = std::string(kToolCallOpen);
      request.trigger_gate = std::make_shared<ToolCallGate>();  // not inside code fences
    }
  } catch (const Error& e) {
    BadRequest("tools", std::string("a strict tool's parameters cannot be enforced: ") + e.what());
  }
}

void CompileConstraint(ModelService& service, GrammarKind kind, const std::string& source, const std::string& param,
                       GenerationRequest& request) {
  try {
    request.grammar = service.CompileGrammar(kind, source);
  } catch (const Error& e) {
    BadRequest(param, param + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    BadRequest(param, param + ": " + e.what());
  }
}

PreparedPrompt PrepareChatPrompt(const ModelService& service, const ChatInput& input) {
  PreparedPrompt p;
  Json vars = input.template_variables;
  if (!vars.contains("add_generation_prompt")) vars["add_generation_prompt"] = true;
  try {
    p.text = service.chat_template().Render(input.messages, RenderedTools(input), vars);
  } catch (const Error& e) {
    BadRequest("messages", std::string("the chat template failed: ") + e.what());
  }
  if (input.tool_choice == ToolChoiceMode::kNamed || input.tool_choice == ToolChoiceMode::kRequired) {
    // Commit the assistant turn to a tool call (named: to that tool) by writing its opening.
    p.forced_prefix = std::string(kToolCallOpen) + "\n";
    if (input.tool_choice == ToolChoiceMode::kNamed && !input.tool_call_constrained) {
      if (service.tool_call_format() == ToolCallFormat::kXml) {
        p.forced_prefix += "<function=" + input.tool_choice_name + ">\n";
      } else {
        p.forced_prefix += "{\"name\": " + DumpJson(Json(input.tool_choice_name)) + ", \"arguments\": ";
      }
    }
  }
  static constexpr std::string_view kThinkOpen = "<think>\n";
  p.starts_in_reasoning = p.text.size() >= kThinkOpen.size() &&
                          p.text.compare(p.text.size() - kThinkOpen.size(), kThinkOpen.size(), kThinkOpen) == 0;
  if (!p.forced_prefix.empty() && p.starts_in_reasoning) {
    p.text += "\n</think>\n\n";  // a forced tool call cannot wait for the reasoning to end
    p.starts_in_reasoning = false;
  }
  try {
    p.ids = service.tokenizer().Encode(p.text + p.forced_prefix);
  } catch (const Error& e) {
    BadRequest("messages", e.what());
  }
  return p;
}

GenerationRequest DefaultGenerationRequest(const ModelService& service) {
  GenerationRequest r;
  const GenerationDefaults& d = service.defaults();
  if (d.do_sample) {
    r.sampling.temperature = d.temperature;
    r.sampling.top_p = d.top_p;
    r.sampling.top_k = d.top_k;
    r.sampling.min_p = d.min_p;
  } else {
    r.sampling.temperature = 0;
  }
  r.sampling.repetition_penalty = d.repetition_penalty;
  r.stop_token_ids = service.eos_token_ids();
  r.max_new_tokens = 0;
  return r;
}

void DefaultMaxTokens(const ModelService& service, GenerationRequest& request) {
  if (request.max_new_tokens > 0) return;
  int64_t rest = service.engine().options().max_context - static_cast<int64_t>(request.prompt.size());
  request.max_new_tokens = static_cast<int>(std::clamp<int64_t>(rest, 1, 1 << 30));
}

OutputParserOptions ChatParserOptions(const ChatInput& input, const PreparedPrompt& prompt) {
  OutputParserOptions o;
  o.starts_in_reasoning = prompt.starts_in_reasoning;
  o.parse_reasoning = true;
  o.parse_tool_calls = input.tool_choice != ToolChoiceMode::kNone && input.tools.is_array() && !input.tools.empty();
  o.tools = input.tools.is_null() ? nlohmann::ordered_json::array() : input.tools;
  o.make_call_id = CallIdGenerator();
  o.single_tool_call = o.parse_tool_calls && !input.parallel_tool_calls;
  return o;
}

GenerationRun::GenerationRun(ModelService& service, GenerationRequest request, OutputParserOptions parser_options,
                             std::string forced_prefix)
    : parser_(parser_options), forced_prefix_(std::move(forced_prefix)) {
  DefaultMaxTokens(service, request);
  prompt_tokens_ = static_cast<int64_t>(request.prompt.size());
  Submission s = service.engine().Submit(std::move(request));
  switch (s.status) {
    case SubmitStatus::kAccepted: break;
    case SubmitStatus::kQueueFull: throw ApiError(ApiErrorKind::kOverloaded, s.message);
    case SubmitStatus::kContextOverflow: BadRequest("max_tokens", s.message);
    case SubmitStatus::kInvalid: BadRequest("", s.message);
  }
  handle_ = std::move(s.handle);
  if (parser_options.single_tool_call)
    handle_->SetOutputEnd(std::make_shared<SingleToolCallEnd>(std::move(parser_options), forced_prefix_));
}

GenerationRun::~GenerationRun() {
  if (handle_) handle_->Cancel();  // no effect once finished
}

RunResult GenerationRun::Pump(const RunCallbacks& callbacks) {
  RunResult result;
  result.prompt_tokens = prompt_tokens_;
  auto emit = [&](const OutputDelta& d, const std::vector<TokenOutput>& tokens) {
    if (callbacks.on_delta) callbacks.on_delta(d, tokens);
  };
  if (!forced_prefix_.empty()) emit(parser_.Push(forced_prefix_), {});
  RequestUpdate update;
  for (;;) {
    if (callbacks.keep_going && !callbacks.keep_going()) {
      handle_->Cancel();
      result.finish_reason = FinishReason::kCancelled;
      return result;
    }
    if (!handle_->Wait(&update, std::chrono::milliseconds(50))) continue;
    std::string text;
    for (const auto& t : update.tokens) text += t.text;
    OutputDelta delta = parser_.Push(text);
    if (update.finished) {
      OutputDelta tail = parser_.Finish();
      delta.reasoning += tail.reasoning;
      delta.content += tail.content;
      delta.tool_calls.insert(delta.tool_calls.end(), tail.tool_calls.begin(), tail.tool_calls.end());
    }
    emit(delta, update.tokens);
    result.tokens.insert(result.tokens.end(), update.tokens.begin(), update.tokens.end());
    if (!update.finished) continue;
    if (update.finish_reason == FinishReason::kError)
      throw ApiError(ApiErrorKind::kInternal, "generation failed: " + update.error);
    result.output = parser_.result();
    result.finish_reason = update.finish_reason;
    result.matched_stop = update.matched_stop;
    result.stopped_by_string = update.stopped_by_string;
    result.completion_tokens = update.completion_tokens;
    return result;
  }
}

}  // namespace infernix
