// Greedy picks over logit rows on the host: Backend::PickGreedy's default and the reference its device
// forms are tested against (ops.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "base/check.h"

namespace infernix {

// For each of `rows` rows of `cols` f32 logits: the lowest index of the largest of its first `sampleable`
// values, or -1 where one of those is NaN or +inf, or all of them are -inf (no pick the caller could
// trust: it samples that row itself, and its sampler names the fault). The values past `sampleable`
// (a vocabulary padded past the tokenizer's) are never looked at.
inline std::vector<int32_t> PickGreedyRows(std::span<const float> logits, int64_t rows, int64_t cols,
                                           int64_t sampleable) {
  INFX_CHECK_MSG(rows >= 0 && cols > 0 && static_cast<int64_t>(logits.size()) == rows * cols,
                 "{} logits for {} rows of {}", logits.size(), rows, cols);
  INFX_CHECK_MSG(sampleable >= 1 && sampleable <= cols && cols <= std::numeric_limits<int32_t>::max(),
                 "sampleable {} of {} columns", sampleable, cols);
  std::vector<int32_t> ids(static_cast<size_t>(rows), -1);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * cols;
    float best = -std::numeric_limits<float>::infinity();
    int64_t best_i = -1;
    bool bad = false;
    for (int64_t i = 0; i < sampleable; ++i) {
      const float v = row[i];
      if (std::isnan(v) || v == std::numeric_limits<float>::infinity()) {
        bad = true;
        break;
      }
      if (v > best) {  // strict: the lowest index among equal values
        best = v;
        best_i = i;
      }
    }
    if (!bad) ids[static_cast<size_t>(r)] = static_cast<int32_t>(best_i);  // -1 when all are -inf
  }
  return ids;
}

}  // namespace infernix
