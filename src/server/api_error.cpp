#include "server/api_error.h"

namespace infernix {

int ApiError::status() const {
  switch (kind_) {
    case ApiErrorKind::kInvalidRequest: return 400;
    case ApiErrorKind::kAuthentication: return 401;
    case ApiErrorKind::kNotFound: return 404;
    case ApiErrorKind::kTooLarge: return 413;
    case ApiErrorKind::kOverloaded: return 429;
    case ApiErrorKind::kInternal: return 500;
  }
  return 500;
}

nlohmann::json OpenAiErrorBody(const ApiError& e) {
  const char* type = "invalid_request_error";
  const char* code = nullptr;
  switch (e.kind()) {
    case ApiErrorKind::kInvalidRequest: break;
    case ApiErrorKind::kAuthentication: type = "authentication_error"; code = "invalid_api_key"; break;
    case ApiErrorKind::kNotFound: code = "model_not_found"; break;
    case ApiErrorKind::kTooLarge: code = "request_too_large"; break;
    case ApiErrorKind::kOverloaded: type = "rate_limit_error"; code = "rate_limit_exceeded"; break;
    case ApiErrorKind::kInternal: type = "server_error"; break;
  }
  nlohmann::json err = {{"message", e.what()}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param().empty()) err["param"] = e.param();
  if (code != nullptr) err["code"] = code;
  return {{"error", err}};
}

nlohmann::json AnthropicErrorBody(const ApiError& e) {
  const char* type = "invalid_request_error";
  switch (e.kind()) {
    case ApiErrorKind::kInvalidRequest: break;
    case ApiErrorKind::kAuthentication: type = "authentication_error"; break;
    case ApiErrorKind::kNotFound: type = "not_found_error"; break;
    case ApiErrorKind::kTooLarge: type = "request_too_large"; break;
    case ApiErrorKind::kOverloaded: type = "overloaded_error"; break;
    case ApiErrorKind::kInternal: type = "api_error"; break;
  }
  return {{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}};
}

}  // namespace infernix
