// Binds checkpoint tensors to model weights: resolves the name prefix ("model." or
// "model.language_model."), checks each tensor's shape against the config, uploads it to the backend,
// and keeps host copies of weights the loader had to re-layout. Vision-tower and MTP tensors are
// recognised and skipped. Tensors come from a WeightSource: safetensors files, or weights made up
// from the config alone (dummy_weights.h) for benchmarks.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "formats/safetensors.h"

namespace infernix {

// Where the binder takes host tensors from. Tensors stay valid for the source's lifetime.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool Contains(const std::string& name) const = 0;
  // The tensor `name` (present: Contains(name)). `expected` is the shape the model asks for: a source
  // that makes weights up builds them in that shape; a file-backed one returns what it holds (the
  // binder checks the shape).
  virtual Tensor Get(const std::string& name, const Shape& expected) = 0;
  // A source that makes its tensors up may make `name` (present, in the shape `expected`) on the backend
  // itself instead, with no host copy; nullopt: WeightBinder::Get uploads Get's host tensor.
  virtual std::optional<Tensor> MakeOnBackend(const std::string& /*name*/, const Shape& /*expected*/,
                                              Backend& /*backend*/) {
    return std::nullopt;
  }
  // Every tensor name the source holds (for WeightBinder::Unused).
  virtual std::vector<std::string> Names() const = 0;
  // Where a tensor lives, and the source as a whole, for messages.
  virtual std::string FileOf(const std::string& name) const = 0;
  virtual std::string Describe() const = 0;
};

// The tensors of safetensors files.
class SafetensorsWeightSource final : public WeightSource {
 public:
  explicit SafetensorsWeightSource(std::unique_ptr<WeightFiles> files) : files_(std::move(files)) {}
  bool Contains(const std::string& name) const override { return files_->Contains(name); }
  Tensor Get(const std::string& name, const Shape&) override { return files_->Get(name); }
  std::vector<std::string> Names() const override { return files_->Names(); }
  std::string FileOf(const std::string& name) const override { return files_->FileOf(name); }
  std::string Describe() const override { return files_->Describe(); }

 private:
  std::unique_ptr<WeightFiles> files_;
};

class WeightBinder {
 public:
  // Throws kInvalidFormat when the decoder's embedding cannot be found under any known prefix.
  WeightBinder(WeightSource& files, Backend& backend);

  const std::string& prefix() const { return prefix_; }
  bool Has(const std::string& name) const { return files_.Contains(name); }
  // A tensor by full name, checked against `expected` (kInvalidFormat naming file, tensor, shapes).
  Tensor Host(const std::string& name, const Shape& expected);
  // Host(name) uploaded to the backend (or made there by the source: WeightSource::MakeOnBackend).
  Tensor Get(const std::string& name, const Shape& expected);
  // Stores a derived host tensor (re-laid-out weights) and uploads it.
  Tensor Own(HostBuffer buffer);
  // Tensors that were neither bound nor recognised as skippable (vision tower, MTP head).
  std::vector<std::string> Unused() const;

 private:
  WeightSource& files_;
  Backend& backend_;
  std::string prefix_;
  std::set<std::string> used_;
  std::vector<std::unique_ptr<HostBuffer>> owned_;
};

// Copies rows of a 2-D weight: out row i = w row rows[i]. Any dtype.
HostBuffer GatherWeightRows(const Tensor& w, const std::vector<int64_t>& rows);
// The rows [offset, offset + count) of each of `groups` consecutive groups of `stride` rows, group by
// group: one part of a weight whose rows interleave several parts per head (for GatherWeightRows).
std::vector<int64_t> InterleavedRows(int64_t groups, int64_t stride, int64_t offset, int64_t count);

}  // namespace infernix
