#include "app/cli_checks.h"

#include <fmt/format.h>

#include <charconv>
#include <string>

namespace infernix {

CLI::Validator WholeNumber(int64_t lo, int64_t hi) {
  auto check = [lo, hi](std::string& text) -> std::string {
    int64_t value = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end || value < lo || value > hi)
      return fmt::format("must be a whole number from {} to {}, not '{}'", lo, hi, text);
    return {};
  };
  return CLI::Validator(check, fmt::format("{}..{}", lo, hi));
}

}  // namespace infernix
