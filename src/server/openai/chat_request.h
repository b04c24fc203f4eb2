// Translation of OpenAI request bodies into protocol-neutral inputs: chat messages for the template,
// tools and tool_choice, sampling parameters. Every invalid field is an ApiError 400 naming it.
#pragma once

#include <initializer_list>

#include "engine/request.h"
#include "server/generation_run.h"
#include "server/json_reader.h"
#include "server/service.h"

namespace infernix {

// Checks "model" names a served model: 404 model_not_found otherwise.
void CheckModel(const ModelService& service, const JsonReader& body);

// OpenAI messages -> the shape chat templates expect: content flattened to a string (text parts
// joined by newlines), "developer" as "system", tool-call arguments parsed into objects when they
// are JSON objects.
Json NormalizeOpenAiMessages(const Json& messages, const std::string& param);

// tools (chat shape: {type: function, function: {...}}), tool_choice (a named tool must exist) and
// parallel_tool_calls.
void ParseOpenAiTools(const JsonReader& body, ChatInput& input);
// tool_choice alone, against tools already in `input`.
void ParseToolChoice(const Json& choice, ChatInput& input);
// parallel_tool_calls (a boolean; default true): false ends the turn with its first tool call.
void ParseParallelToolCalls(const JsonReader& body, ChatInput& input);

// Sampling and length parameters shared by chat/completions, completions and responses:
// temperature, top_p, top_k, min_p, presence/frequency/repetition penalties, seed, stop, logit_bias,
// logprobs/top_logprobs, n (1 only), and the token limit under the first present of max_tokens_keys.
void ParseOpenAiSampling(const JsonReader& body, const ModelService& service, GenerationRequest& request,
                         std::initializer_list<const char*> max_tokens_keys);

// Constrained decoding: at most one of response_format (json_object), grammar (GBNF), regex, and
// choice (an array of strings). Malformed grammars are 400s giving the position.
void ParseConstraint(const JsonReader& body, ModelService& service, GenerationRequest& request);

// Responses structured outputs: text.format {type: text | json_object | json_schema (schema, name,
// strict)}. Malformed schemas are 400s on text.format.schema giving the JSON pointer.
void ParseResponsesTextFormat(const JsonReader& body, ModelService& service, GenerationRequest& request);

// Template variables: chat_template_kwargs entries and the top-level enable_thinking extension.
void ParseTemplateVariables(const JsonReader& body, ChatInput& input);

}  // namespace infernix
