#include "base/int_list.h"

#include <algorithm>
#include <string>

#include "base/error.h"

namespace infernix {

std::vector<int64_t> ParseIntList(std::string_view text, std::string_view option, int64_t min_value, std::string_view what,
                                  std::string_view example, int64_t max_value) {
  std::vector<int64_t> out;
  for (size_t at = 0; at < text.size();) {  // a trailing comma ends the list
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item(text.substr(at, end - at));
    int64_t v = 0;
    size_t used = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < min_value || v > max_value)
      ThrowError(ErrorCode::kInvalidArgument, "{}: '{}' is not {}", option, item, what);
    out.push_back(v);
    at = end + 1;
  }
  if (out.empty()) ThrowError(ErrorCode::kInvalidArgument, "{}: expected a list such as {}", option, example);
  return out;
}

}  // namespace infernix
