// Binds checkpoint tensors to model weights: resolves the name prefix ("model." or
// "model.language_model."), checks each tensor's shape against the config, uploads it to the backend,
// and keeps host copies of weights the loader had to re-layout. Vision-tower and MTP tensors are
// recognised and skipped.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "formats/safetensors.h"

namespace infernix {

class WeightBinder {
 public:
  // Throws kInvalidFormat when the decoder's embedding cannot be found under any known prefix.
  WeightBinder(const WeightFiles& files, Backend& backend);

  const std::string& prefix() const { return prefix_; }
  bool Has(const std::string& name) const { return files_.Contains(name); }
  // A tensor by full name, checked against `expected` (kInvalidFormat naming file, tensor, shapes).
  Tensor Host(const std::string& name, const Shape& expected);
  // Host(name) uploaded to the backend.
  Tensor Get(const std::string& name, const Shape& expected);
  // Stores a derived host tensor (re-laid-out weights) and uploads it.
  Tensor Own(HostBuffer buffer);
  // Tensors that were neither bound nor recognised as skippable (vision tower, MTP head).
  std::vector<std::string> Unused() const;

 private:
  const WeightFiles& files_;
  Backend& backend_;
  std::string prefix_;
  std::set<std::string> used_;
  std::vector<std::unique_ptr<HostBuffer>> owned_;
};

// Copies rows of a 2-D weight: out row i = w row rows[i]. Any dtype.
HostBuffer GatherWeightRows(const Tensor& w, const std::vector<int64_t>& rows);

}  // namespace infernix
