// One request's way through the engine, whatever API asked: chat messages rendered with the model's
// template and tokenized, submitted, and the engine's updates turned into reasoning, content and
// tool-call deltas by the output parser.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "chat/output/output_parser.h"
#include "engine/request.h"
#include "server/json_reader.h"
#include "server/service.h"

namespace infernix {

enum class ToolChoiceMode { kAuto, kNone, kRequired, kNamed };

struct ChatInput {
  Json messages = Json::array();  // OpenAI-shaped: role, content (string), tool_calls, tool_call_id, ...
  Json tools;                     // OpenAI tools array, or null
  ToolChoiceMode tool_choice = ToolChoiceMode::kAuto;
  std::string tool_choice_name;   // with kNamed
  Json template_variables = Json::object();  // enable_thinking, chat_template_kwargs entries, ...
  bool tool_call_constrained = false;  // a grammar writes the forced call's name and arguments
  // Some tool left `strict` out and the API's default is "strict when the schema allows" (OpenAI
  // Responses): under tool_choice auto, calls are constrained as for a strict tool, and a schema that
  // cannot be enforced falls back to arguments of any shape instead of a 400.
  bool strict_if_compatible = false;
  // false (OpenAI parallel_tool_calls: false, Anthropic disable_parallel_tool_use: true): the turn ends
  // with its first complete tool call; generation stops there and exactly one call is returned.
  bool parallel_tool_calls = true;
};

// A rendered chat prompt, ready to submit.
struct PreparedPrompt {
  std::string text;
  std::vector<int32_t> ids;
  bool starts_in_reasoning = false;  // the prompt leaves the model inside <think>
  std::string forced_prefix;         // output the prompt already committed to (tool_choice required/named)
};

// The opening of a tool call in every Qwen template.
inline constexpr std::string_view kToolCallOpen = "<tool_call>";

// Constrains tool calls with a grammar built from the tools' schemas, in the template's call form
// (JSON or XML, ModelService::tool_call_format):
//   - tool_choice required or named: the assistant turn is opened with `<tool_call>\n` (the forced
//     prefix) and the grammar writes one call to one of the allowed tools (sets
//     input.tool_call_constrained);
//   - tool_choice auto with at least one `strict` tool (or input.strict_if_compatible): a lazy grammar
//     (request.grammar_trigger = `<tool_call>`): the model may answer in text, and a call it opens
//     is constrained to the end;
//     not when `request` already has a grammar (response_format and the like), which then stays.
// A forced call replaces a grammar `request` already has (there is no text answer to shape).
// Tools whose schemas cannot be enforced get arguments of any shape; a strict one is a 400 naming
// its index, name and the schema's JSON pointer.
void ConstrainToolCalls(ModelService& service, ChatInput& input, GenerationRequest& request);

// Compiles a constraint for `request`; a malformed grammar or schema is a 400 on `param`, the message
// giving the position (line and column, or the schema's JSON pointer).
void CompileConstraint(ModelService& service, GrammarKind kind, const std::string& source, const std::string& param,
                       GenerationRequest& request);

// Renders and tokenizes. Template errors (raise_exception included) are 400s.
PreparedPrompt PrepareChatPrompt(const ModelService& service, const ChatInput& input);

// Sampling defaults from generation_config.json, and the stop token ids.
GenerationRequest DefaultGenerationRequest(const ModelService& service);
// When the request named no limit: the rest of the context.
void DefaultMaxTokens(const ModelService& service, GenerationRequest& request);

// Parser options for a chat request: tools, reasoning, how the prompt leaves the model, and whether
// the turn ends with its first tool call (single_tool_call, from input.parallel_tool_calls).
OutputParserOptions ChatParserOptions(const ChatInput& input, const PreparedPrompt& prompt);

// The protocol-neutral outcome of a finished run.
struct RunResult {
  ParsedOutput output;
  FinishReason finish_reason = FinishReason::kNone;
  std::string matched_stop;
  bool stopped_by_string = false;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::vector<TokenOutput> tokens;  // every generated token (with logprobs when asked)
};

struct RunCallbacks {
  // Called with each piece of output as it is produced, and the tokens it came from.
  std::function<void(const OutputDelta& delta, const std::vector<TokenOutput>& tokens)> on_delta;
  // Polled between updates; returning false cancels the request (the client is gone).
  std::function<bool()> keep_going;
};

// A submitted request. The constructor submits (queue full -> ApiError 429; context overflow -> 400
// naming the limits); Pump() then runs it to the end on the calling thread (engine failure -> 500).
// Destroying an unfinished run cancels it, freeing its slot. With parser_options.single_tool_call the
// engine stops generating at the token that completes the first tool call (RequestHandle::
// SetOutputEnd, fed by a parser of its own on the engine thread), and the run ends there (kStop).
class GenerationRun {
 public:
  GenerationRun(ModelService& service, GenerationRequest request, OutputParserOptions parser_options,
                std::string forced_prefix);
  ~GenerationRun();
  GenerationRun(const GenerationRun&) = delete;
  GenerationRun& operator=(const GenerationRun&) = delete;
  RunResult Pump(const RunCallbacks& callbacks);

 private:
  std::shared_ptr<RequestHandle> handle_;
  OutputParser parser_;
  std::string forced_prefix_;
  int64_t prompt_tokens_ = 0;
};

}  // namespace infernix
