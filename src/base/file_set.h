// A read-only set of named files: a model folder on disk, or a model embedded in the binary.
// Loaders (config, safetensors, tokenizer, chat template) read through this, so they work the same on
// both. Names are relative paths inside the set ("config.json", "model-00001-of-00002.safetensors").
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace infernix {

// Bytes that stay valid while the Blob lives (a mapping, or static data).
class Blob {
 public:
  virtual ~Blob() = default;
  virtual std::span<const std::byte> bytes() const = 0;
  std::string_view text() const {
    auto b = bytes();
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
};

class FileSet {
 public:
  virtual ~FileSet() = default;
  virtual bool Exists(std::string_view name) const = 0;
  // Throws Error(kNotFound) naming DisplayPath(name) when missing.
  virtual std::shared_ptr<const Blob> Open(std::string_view name) const = 0;
  // How to name the file in messages: the full path on disk, or "<embedded>/name".
  virtual std::string DisplayPath(std::string_view name) const = 0;
  // A short description of the set itself (the folder path, or "<embedded default model>").
  virtual std::string Describe() const = 0;
};

// Files of a folder on disk, memory-mapped on Open.
class DirFileSet final : public FileSet {
 public:
  // Throws Error(kNotFound) when `dir` does not exist or is not a folder.
  explicit DirFileSet(std::string dir);
  bool Exists(std::string_view name) const override;
  std::shared_ptr<const Blob> Open(std::string_view name) const override;
  std::string DisplayPath(std::string_view name) const override;
  std::string Describe() const override { return dir_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// Files held in memory that outlive the set (static data embedded in the binary, or test data).
class MemoryFileSet final : public FileSet {
 public:
  explicit MemoryFileSet(std::string description) : description_(std::move(description)) {}
  // `data` must outlive every Blob opened from this set (static storage, in practice).
  void Add(std::string name, std::span<const std::byte> data);
  // Takes a copy of `content`.
  void AddCopy(std::string name, std::string_view content);
  bool Exists(std::string_view name) const override;
  std::shared_ptr<const Blob> Open(std::string_view name) const override;
  std::string DisplayPath(std::string_view name) const override;
  std::string Describe() const override { return description_; }

 private:
  std::string description_;
  std::map<std::string, std::span<const std::byte>, std::less<>> files_;
  std::vector<std::shared_ptr<std::string>> owned_;
};

// Reads a whole file of a set as text.
std::string ReadText(const FileSet& files, std::string_view name);

// A Blob that owns a copy of `bytes` (tests, fuzz inputs).
std::shared_ptr<const Blob> CopyToBlob(std::string_view bytes);

}  // namespace infernix
