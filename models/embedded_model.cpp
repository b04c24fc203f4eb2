#include "embedded_model.h"

#include <cstddef>
#include <span>

namespace infernix {
namespace {
struct EmbeddedFile {
  const char* name;
  const unsigned char* begin;
  const unsigned char* end;
};
#include "embedded_model_table.inc"
}  // namespace

std::unique_ptr<FileSet> EmbeddedDefaultModel() {
  auto files = std::make_unique<MemoryFileSet>(std::string("<embedded ") + kEmbeddedModelName + ">");
  for (const auto& f : kEmbeddedFiles)
    files->Add(f.name, std::as_bytes(std::span<const unsigned char>(f.begin, static_cast<size_t>(f.end - f.begin))));
  return files;
}

}  // namespace infernix
