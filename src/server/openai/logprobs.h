// OpenAI's logprobs.content entries: {token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}.
#pragma once

#include <vector>

#include "engine/request.h"
#include "server/json_reader.h"
#include "tokenizer/tokenizer.h"

namespace infernix {

Json LogprobsContent(const Tokenizer& tokenizer, const std::vector<TokenOutput>& tokens);

}  // namespace infernix
