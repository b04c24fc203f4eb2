// Comma-separated integer lists of command-line options (--batch 1,2,4,8).
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

namespace infernix {

// The integers of `text` ("1,8"), each in [min_value, max_value]. Throws Error(kInvalidArgument)
// "<option>: '<item>' is not <what>" for an item that is not such an integer (an empty one included; a
// trailing comma ends the list), and "<option>: expected a list such as <example>" for an empty list.
std::vector<int64_t> ParseIntList(std::string_view text, std::string_view option, int64_t min_value, std::string_view what,
                                  std::string_view example,
                                  int64_t max_value = std::numeric_limits<int64_t>::max());

}  // namespace infernix
