// Errors in three tiers (see docs/design.md):
//  1. User errors (bad input, bad files, unsupported models): throw infernix::Error with a code and
//     a message that names the thing at fault, what was expected and what was found.
//  2. Expected conditions (KV cache full, queue full): return values, never exceptions.
//  3. Broken invariants: INFX_CHECK (check.h) aborts with file:line.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace infernix {

enum class ErrorCode {
  kInvalidArgument,  // a caller-supplied value is wrong (CLI flag, token id, request field)
  kNotFound,         // a file, tensor or key that must exist does not
  kInvalidFormat,    // a file exists but its content is malformed
  kUnsupported,      // well-formed but not something we implement (model type, dtype, feature)
  kOutOfRange,       // a value outside the limits of the model or the request (context overflow)
  kIo,               // the operating system refused (open, read, mmap)
  kInternal,         // a bug surfaced as an error rather than a crash
};

std::string_view ErrorCodeName(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

template <typename... Args>
[[noreturn]] void ThrowError(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace infernix
