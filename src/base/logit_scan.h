// One pass over a row of f32 logits: its largest value, the lowest index holding it, and the lowest index
// holding NaN or +inf. The engine's sampler scans every row it samples with it, and greedy picks on the
// host (backend/pick.h) are made from it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>

#include "base/simd4.h"

namespace infernix {

struct LogitScan {
  float max = -std::numeric_limits<float>::infinity();
  int64_t argmax = 0;    // lowest index holding max
  int64_t invalid = -1;  // lowest index holding NaN or +inf, or -1
};

inline LogitScan ScanLogits(std::span<const float> x) {
  using simd4::F4, simd4::I4;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const int64_t n = static_cast<int64_t>(x.size());
  F4 m0 = simd4::Broadcast(-kInf), m1 = m0;
  I4 nan = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const F4 a = simd4::Load4(x.data() + i), b = simd4::Load4(x.data() + i + 4);
    m0 = simd4::Select(a > m0, a, m0);
    m1 = simd4::Select(b > m1, b, m1);
    nan |= (a != a) | (b != b);
  }
  LogitScan s;
  for (int j = 0; j < 4; ++j) s.max = std::max({s.max, m0[j], m1[j]});
  bool bad = simd4::AnyLane(nan);
  for (; i < n; ++i) {
    bad |= std::isnan(x[i]);
    s.max = std::max(s.max, x[i]);
  }
  if (bad || s.max == kInf) {
    for (int64_t j = 0; j < n; ++j)
      if (std::isnan(x[j]) || x[j] == kInf) {
        s.invalid = j;
        return s;
      }
  }
  while (s.argmax < n - 1 && x[s.argmax] != s.max) ++s.argmax;
  return s;
}

}  // namespace infernix
