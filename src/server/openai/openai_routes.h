// The OpenAI-compatible endpoints.
#pragma once

#include <httplib.h>

#include "server/service.h"

namespace infernix {

void HandleModels(ModelService& service, const httplib::Request& req, httplib::Response& res);
void HandleChatCompletions(ModelService& service, const httplib::Request& req, httplib::Response& res);
void HandleCompletions(ModelService& service, const httplib::Request& req, httplib::Response& res);
void HandleResponses(ModelService& service, const httplib::Request& req, httplib::Response& res);

}  // namespace infernix
