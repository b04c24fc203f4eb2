// Token picks over logit rows on the host: Backend::PickGreedy's and Backend::QueuePick's defaults and the
// references their device forms are tested against (ops.h): greedy picks from the scan the engine's sampler
// makes of a row (base/logit_scan.h), draws with the sampler's own (base/token_draw.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "base/check.h"
#include "base/logit_scan.h"
#include "base/token_draw.h"

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
    const LogitScan scan = ScanLogits(logits.subspan(static_cast<size_t>(r * cols), static_cast<size_t>(sampleable)));
    if (scan.invalid < 0 && scan.max != -std::numeric_limits<float>::infinity())
      ids[static_cast<size_t>(r)] = static_cast<int32_t>(scan.argmax);
  }
  return ids;
}

// For each of `rows` rows of `cols` f32 logits, its draw's pick (draws[r], TokenDraw): greedy as PickGreedyRows,
// else the token the engine's Sampler draws from that row's first `sampleable` values at draws[r].u (the ids
// past them may not be drawn); -1 where those values hold NaN or +inf or only -inf.
inline std::vector<int32_t> PickRows(std::span<const float> logits, int64_t rows, int64_t cols, int64_t sampleable,
                                     std::span<const TokenDraw> draws) {
  INFX_CHECK_MSG(static_cast<int64_t>(draws.size()) == rows, "{} draws for {} rows", draws.size(), rows);
  std::vector<int32_t> ids = PickGreedyRows(logits, rows, cols, sampleable);
  std::vector<float> row;
  DrawScratch scratch;
  for (int64_t r = 0; r < rows; ++r) {
    const TokenDraw& d = draws[static_cast<size_t>(r)];
    if (d.greedy || ids[static_cast<size_t>(r)] < 0) continue;
    const std::span<const float> values = logits.subspan(static_cast<size_t>(r * cols), static_cast<size_t>(cols));
    const float max = values[static_cast<size_t>(ids[static_cast<size_t>(r)])];
    if (d.rule.top_k >= 1 && d.rule.top_k < sampleable) {
      // Top-k within the sampleable ids: the draw over them alone is the draw over the row with the rest -inf.
      ids[static_cast<size_t>(r)] = DrawToken(values.first(static_cast<size_t>(sampleable)), max, d.rule, d.u, scratch);
      continue;
    }
    row.assign(values.begin(), values.begin() + sampleable);
    row.resize(static_cast<size_t>(cols), -std::numeric_limits<float>::infinity());
    ids[static_cast<size_t>(r)] = DrawToken(row, max, d.rule, d.u, scratch);
  }
  return ids;
}

// The token ids a pass takes from a pick (Backend::FeedPickedTokens): ids[i] = picks[rows[i]], 0 where
// that pick is -1 (the caller drops what follows from a row it could not pick).
inline std::vector<int32_t> FeedFromPicks(std::span<const int32_t> picks, std::span<const int32_t> rows) {
  std::vector<int32_t> ids(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    INFX_CHECK_MSG(rows[i] >= 0 && static_cast<size_t>(rows[i]) < picks.size(), "feed row {} of a pick of {} rows",
                   rows[i], picks.size());
    ids[i] = std::max(picks[static_cast<size_t>(rows[i])], 0);
  }
  return ids;
}

}  // namespace infernix
