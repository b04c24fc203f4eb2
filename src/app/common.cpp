#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "app/commands.h"
#include "base/error.h"
#include "embedded_model.h"

namespace infernix {

std::unique_ptr<FileSet> OpenModelFiles(const std::string& path) {
  if (path.empty()) return EmbeddedDefaultModel();
  return std::make_unique<DirFileSet>(path);
}

std::unique_ptr<ModelPackage> OpenModel(const std::string& path) {
  if (path.empty()) return ModelPackage::FromFiles(EmbeddedDefaultModel());
  return ModelPackage::Open(path);
}

std::vector<int32_t> ParseTokenList(const std::string& text) {
  std::vector<int32_t> ids;
  size_t pos = 0, index = 0;
  if (text.find_first_not_of(" \t\n") == std::string::npos) return ids;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    size_t b = item.find_first_not_of(" \t\n"), e = item.find_last_not_of(" \t\n");
    item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    long long value = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || value < 0 || value > INT32_MAX)
      ThrowError(ErrorCode::kInvalidArgument, "--tokens: element {} is '{}', expected a non-negative integer", index,
                 item);
    ids.push_back(static_cast<int32_t>(value));
    pos = comma + 1;
    ++index;
  }
  return ids;
}

void WriteStdout(std::string_view bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() || std::fflush(stdout) != 0)
    ThrowError(ErrorCode::kIo, "cannot write to standard output");
}

std::string ReadFileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ThrowError(ErrorCode::kNotFound, "{}: cannot open file", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) ThrowError(ErrorCode::kIo, "{}: read error", path);
  return ss.str();
}

}  // namespace infernix
