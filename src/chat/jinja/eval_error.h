// Errors raised while a template is parsed or rendered.
//
// Code that does not know where in the template it is (values, filters, methods) throws EvalError;
// the interpreter catches it at the innermost expression being evaluated and rethrows it as an
// infernix::Error whose message carries the template name, line and column (see SourceMap).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "base/error.h"

namespace infernix::jinja {

class EvalError : public std::runtime_error {
 public:
  EvalError(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// A runtime error in the template or in the data it was given (ErrorCode::kInvalidArgument).
template <typename... Args>
[[noreturn]] void ThrowEval(fmt::format_string<Args...> format, Args&&... args) {
  throw EvalError(ErrorCode::kInvalidArgument, fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void ThrowEvalCode(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw EvalError(code, fmt::format(format, std::forward<Args>(args)...));
}

// Maps byte offsets of the (newline-normalised) template source to lines and columns (1-based;
// columns count code points).
class SourceMap {
 public:
  SourceMap(std::string name, std::string_view source);
  const std::string& name() const { return name_; }
  // "line L, column C"
  std::string LineColumn(uint32_t offset) const;
  // "NAME, line L, column C"
  std::string Describe(uint32_t offset) const { return name_ + ", " + LineColumn(offset); }
  // Throws Error(code, "NAME, line L, column C: message").
  [[noreturn]] void Throw(ErrorCode code, uint32_t offset, std::string_view message) const;

 private:
  std::string name_;
  std::string source_;
};

}  // namespace infernix::jinja
