#include "chat/jinja/eval_error.h"

#include <algorithm>

#include "chat/jinja/utf8.h"

namespace infernix::jinja {

SourceMap::SourceMap(std::string name, std::string_view source) : name_(std::move(name)), source_(source) {}

std::string SourceMap::LineColumn(uint32_t offset) const {
  size_t end = std::min<size_t>(offset, source_.size());
  size_t line = 1 + std::count(source_.begin(), source_.begin() + static_cast<std::ptrdiff_t>(end), '\n');
  size_t line_start = 0;
  if (end > 0) {
    size_t newline = source_.rfind('\n', end - 1);
    if (newline != std::string::npos) line_start = newline + 1;
  }
  size_t column = 1 + CountCodePoints(std::string_view(source_).substr(line_start, end - line_start));
  return fmt::format("line {}, column {}", line, column);
}

void SourceMap::Throw(ErrorCode code, uint32_t offset, std::string_view message) const {
  throw Error(code, fmt::format("{}: {}", Describe(offset), message));
}

}  // namespace infernix::jinja
