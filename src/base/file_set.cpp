#include "base/file_set.h"

#include <filesystem>

#include "base/error.h"
#include "base/mapped_file.h"

namespace infernix {
namespace {

class MappedBlob final : public Blob {
 public:
  explicit MappedBlob(const std::string& path) : file_(path) {}
  std::span<const std::byte> bytes() const override { return file_.bytes(); }

 private:
  MappedFile file_;
};

class SpanBlob final : public Blob {
 public:
  explicit SpanBlob(std::span<const std::byte> data) : data_(data) {}
  std::span<const std::byte> bytes() const override { return data_; }

 private:
  std::span<const std::byte> data_;
};

class StringBlob final : public Blob {
 public:
  explicit StringBlob(std::string_view s) : s_(s) {}
  std::span<const std::byte> bytes() const override {
    return std::as_bytes(std::span<const char>(s_.data(), s_.size()));
  }

 private:
  std::string s_;
};

}  // namespace

DirFileSet::DirFileSet(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  if (!std::filesystem::exists(dir_, ec)) ThrowError(ErrorCode::kNotFound, "{}: no such file or folder", dir_);
  if (!std::filesystem::is_directory(dir_, ec))
    ThrowError(ErrorCode::kInvalidArgument, "{}: expected a model folder, found a file", dir_);
}

bool DirFileSet::Exists(std::string_view name) const {
  std::error_code ec;
  return std::filesystem::is_regular_file(std::filesystem::path(dir_) / name, ec);
}

std::shared_ptr<const Blob> DirFileSet::Open(std::string_view name) const {
  std::string path = DisplayPath(name);
  if (!Exists(name)) ThrowError(ErrorCode::kNotFound, "{}: file not found", path);
  return std::make_shared<MappedBlob>(path);
}

std::string DirFileSet::DisplayPath(std::string_view name) const {
  return (std::filesystem::path(dir_) / name).string();
}

void MemoryFileSet::Add(std::string name, std::span<const std::byte> data) { files_[std::move(name)] = data; }

void MemoryFileSet::AddCopy(std::string name, std::string_view content) {
  auto owned = std::make_shared<std::string>(content);
  owned_.push_back(owned);
  files_[std::move(name)] = std::as_bytes(std::span<const char>(owned->data(), owned->size()));
}

bool MemoryFileSet::Exists(std::string_view name) const { return files_.find(name) != files_.end(); }

std::shared_ptr<const Blob> MemoryFileSet::Open(std::string_view name) const {
  auto it = files_.find(name);
  if (it == files_.end()) ThrowError(ErrorCode::kNotFound, "{}: file not found", DisplayPath(name));
  return std::make_shared<SpanBlob>(it->second);
}

std::string MemoryFileSet::DisplayPath(std::string_view name) const {
  return fmt::format("{}/{}", description_, name);
}

std::string ReadText(const FileSet& files, std::string_view name) { return std::string(files.Open(name)->text()); }

std::shared_ptr<const Blob> CopyToBlob(std::string_view bytes) { return std::make_shared<StringBlob>(bytes); }

}  // namespace infernix
