// Invariant checks: a failure is a bug in Infernix, never a user error. Aborts with file:line.
#pragma once

#include <fmt/format.h>

namespace infernix::detail {
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition, const std::string& message);
}  // namespace infernix::detail

#define INFX_CHECK(cond)                                                      \
  do {                                                                        \
    if (!(cond)) [[unlikely]]                                                 \
      ::infernix::detail::CheckFailed(__FILE__, __LINE__, #cond, std::string()); \
  } while (0)

#define INFX_CHECK_MSG(cond, ...)                                                        \
  do {                                                                                   \
    if (!(cond)) [[unlikely]]                                                            \
      ::infernix::detail::CheckFailed(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
  } while (0)

#ifdef NDEBUG
#define INFX_DCHECK(cond) \
  do {                    \
  } while (0)
#else
#define INFX_DCHECK(cond) INFX_CHECK(cond)
#endif
