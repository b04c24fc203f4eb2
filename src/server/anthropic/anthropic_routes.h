// The Anthropic-compatible endpoints: POST /v1/messages (streaming and not) and
// POST /v1/messages/count_tokens.
#pragma once

#include <httplib.h>

#include "server/service.h"

namespace infernix {

void HandleMessages(ModelService& service, const httplib::Request& req, httplib::Response& res);
void HandleCountTokens(ModelService& service, const httplib::Request& req, httplib::Response& res);

}  // namespace infernix
