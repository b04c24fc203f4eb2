// Pieces shared by the OpenAI endpoints' responses.
#pragma once

#include <vector>

#include "engine/request.h"
#include "server/generation_run.h"
#include "server/http_util.h"
#include "server/json_reader.h"
#include "tokenizer/tokenizer.h"

namespace infernix {

// A token's bytes; nothing for an id past the tokenizer's vocabulary (the model's may be padded past
// it, and such ids come up among the top_logprobs alternatives).
std::string_view TokenBytesOrNothing(const Tokenizer& tokenizer, int32_t id);

// logprobs.content entries: {token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}.
Json LogprobsContent(const Tokenizer& tokenizer, const std::vector<TokenOutput>& tokens);

// {prompt_tokens, completion_tokens, total_tokens}
Json OpenAiUsage(const RunResult& r);

// Ends a chat/completions stream: with include_usage a last chunk (`head` + empty choices + usage),
// then `data: [DONE]`. Returns whether the client is still there.
bool EndOpenAiStream(SseWriter& sse, const Json& head, bool include_usage, const RunResult& r);

}  // namespace infernix
