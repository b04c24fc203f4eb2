// Helpers shared by the CPU backend tests: host buffers from values, NaN-poisoned outputs, layouts,
// deterministic inputs and tolerant comparisons.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace infernix::cpu_test {

// ---- helpers ----

inline HostBuffer MakeF32(Shape shape, const std::vector<float>& values) {
  HostBuffer b(DType::kF32, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), shape.numel());
  std::copy(values.begin(), values.end(), b.view().as<float>());
  return b;
}

// bf16 or f16 storage of `values` (callers pass values exactly representable in both).
inline HostBuffer MakeHalf(DType dtype, Shape shape, const std::vector<float>& values) {
  HostBuffer b(dtype, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), shape.numel());
  uint16_t* dst = b.view().as<uint16_t>();
  for (size_t i = 0; i < values.size(); ++i)
    dst[i] = dtype == DType::kBF16 ? F32ToBf16(values[i]) : F32ToF16(values[i]);
  return b;
}

inline HostBuffer MakeWeight(DType dtype, Shape shape, const std::vector<float>& values) {
  return dtype == DType::kF32 ? MakeF32(shape, values) : MakeHalf(dtype, shape, values);
}

inline HostBuffer MakeI32(Shape shape, const std::vector<int32_t>& values) {
  HostBuffer b(DType::kI32, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), shape.numel());
  std::copy(values.begin(), values.end(), b.view().as<int32_t>());
  return b;
}

// An f32 buffer filled with NaN, so that an op that leaves an element unwritten is caught.
inline HostBuffer MakeOut(Shape shape) {
  HostBuffer b(DType::kF32, shape);
  std::fill(b.view().as<float>(), b.view().as<float>() + shape.numel(), NAN);
  return b;
}

inline std::vector<float> Values(const Tensor& t) {
  const float* p = t.as<const float>();
  return std::vector<float>(p, p + t.numel());
}

inline std::vector<int32_t> IntValues(const Tensor& t) {
  const int32_t* p = t.as<const int32_t>();
  return std::vector<int32_t>(p, p + t.numel());
}

// Deterministic pseudo-random floats in [lo, hi).
inline std::vector<float> Pseudo(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> out(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& v : out) {
    s = s * 1664525u + 1013904223u;
    v = lo + (hi - lo) * static_cast<float>(s >> 8) / static_cast<float>(1u << 24);
  }
  return out;
}

// Deterministic values m / 32 with m in [-64, 64]: exact in f32, f16 and bf16.
inline std::vector<float> Grid(size_t n, uint32_t seed) {
  std::vector<float> out(n);
  uint32_t s = seed * 2246822519u + 7u;
  for (auto& v : out) {
    s = s * 1664525u + 1013904223u;
    v = static_cast<float>(static_cast<int>((s >> 8) % 129u) - 64) / 32.0f;
  }
  return out;
}

// A layout from its sequences; positions are pos_begin + offset, per token row.
inline BatchLayout Layout(std::initializer_list<BatchSeq> seqs) {
  BatchLayout layout;
  layout.seqs = seqs;
  for (const BatchSeq& s : seqs) layout.n_tokens += s.n_tokens;
  layout.positions.assign(static_cast<size_t>(layout.n_tokens), -1);
  for (const BatchSeq& s : seqs)
    for (int64_t i = 0; i < s.n_tokens; ++i)
      layout.positions[static_cast<size_t>(s.token_begin + i)] = static_cast<int32_t>(s.pos_begin + i);
  return layout;
}

// One sequence of n tokens in `slot` starting at position pos_begin.
inline BatchLayout OneSeq(int64_t n, int64_t pos_begin = 0, int slot = 0) {
  return Layout({BatchSeq{.slot = slot, .token_begin = 0, .n_tokens = n, .pos_begin = pos_begin}});
}

inline void ExpectNearAll(const std::vector<float>& got, const std::vector<double>& want, double abs_tol,
                   double rel_tol = 0.0) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    double tol = abs_tol + rel_tol * std::fabs(want[i]);
    EXPECT_NEAR(got[i], want[i], tol) << "at index " << i;
  }
}

inline double SiluD(double x) { return x / (1.0 + std::exp(-x)); }
inline double SigmoidD(double x) { return 1.0 / (1.0 + std::exp(-x)); }

inline std::vector<double> ToDouble(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

}  // namespace infernix::cpu_test
