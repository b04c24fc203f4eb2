// Translation of an Anthropic Messages request into the protocol-neutral chat input: the system
// prompt, content blocks (text, tool_use, tool_result, thinking), tools with input_schema,
// tool_choice and the thinking switch.
#pragma once

#include "engine/request.h"
#include "server/generation_run.h"
#include "server/json_reader.h"
#include "server/service.h"

namespace infernix {

struct MessagesRequest {
  ChatInput input;
  GenerationRequest generation;
  bool stream = false;
};

// `for_count_tokens`: max_tokens is not required.
MessagesRequest ParseMessagesRequest(const ModelService& service, const Json& body, bool for_count_tokens);

// Structured outputs: `output_config: {format: {type: json_schema, schema}}`, or the beta shape
// `output_format: {type: json_schema, schema}`; the text answer is constrained to the schema.
// Malformed schemas are 400s giving the JSON pointer.
void ParseOutputFormat(const Json& body, ModelService& service, GenerationRequest& request);

}  // namespace infernix
