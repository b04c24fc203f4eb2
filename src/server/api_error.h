// Errors of the HTTP APIs: a status code, a kind, the offending parameter and a message. Each API
// renders them in its own shape (OpenAI: {"error": {...}}, Anthropic: {"type": "error", "error": {...}}).
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace infernix {

enum class ApiErrorKind {
  kInvalidRequest,  // 400
  kAuthentication,  // 401
  kNotFound,        // 404
  kTooLarge,        // 413
  kOverloaded,      // 429: the queue is full
  kInternal,        // 500
};

class ApiError : public std::runtime_error {
 public:
  ApiError(ApiErrorKind kind, const std::string& message, std::string param = "")
      : std::runtime_error(message), kind_(kind), param_(std::move(param)) {}
  ApiErrorKind kind() const { return kind_; }
  const std::string& param() const { return param_; }
  int status() const;

 private:
  ApiErrorKind kind_;
  std::string param_;
};

// {"error": {"message", "type", "param", "code"}}
nlohmann::json OpenAiErrorBody(const ApiError& e);
// {"type": "error", "error": {"type", "message"}}
nlohmann::json AnthropicErrorBody(const ApiError& e);

[[noreturn]] inline void BadRequest(const std::string& param, const std::string& message) {
  throw ApiError(ApiErrorKind::kInvalidRequest, message, param);
}

}  // namespace infernix
