// Checks for the CLI's numeric options, with plain messages: CLI11's own number checks print their bound
// as a 300-digit double and pass a negative value to an unsigned option (which then wraps around).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

namespace infernix {

// A whole number in [lo, hi] written in decimal: "abc", "1.5", "-3" with lo >= 0, and values out of range
// are parse errors ("--port: must be a whole number from 0 to 65535, not '99999'"). --help shows "lo..hi".
CLI::Validator WholeNumber(int64_t lo, int64_t hi);

// The bound of a --ctx-size option as written; the real one, what the model is configured for
// (ModelConfig::CheckedContextSize), is checked once its config is read.
inline constexpr int64_t kMaxContextOption = int64_t{1} << 30;

}  // namespace infernix
