// The FP8 KV cache's number format (kv_f8.h): the encoder against a brute-force nearest search over
// every E4M3 value, the exponent rule, and the round trip of rows.
#include "quant/kv_f8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "quant/quant_internal.h"

namespace infernix::quant {
namespace {

// The nearest finite E4M3 code to x (ties to the even code), saturating at +-448: by search.
uint8_t NearestE4M3(float x) {
  const auto& table = E4M3Table();
  int best = -1;
  double best_d = 0;
  for (int c = 0; c < 256; ++c) {
    const float v = table[static_cast<size_t>(c)];
    if (std::isnan(v) || std::signbit(v) != std::signbit(x)) continue;
    const double d =
        std::fabs(static_cast<double>(v) - std::min<double>(std::fabs(x), kE4M3Max) * (std::signbit(x) ? -1.0 : 1.0));
    if (best < 0 || d < best_d || (d == best_d && (c & 1) == 0)) {
      best = c;
      best_d = d;
    }
  }
  return static_cast<uint8_t>(best);
}

TEST(KvF8, EveryCodeEncodesToItself) {
  for (int c = 0; c < 256; ++c) {
    const float v = E4M3Table()[static_cast<size_t>(c)];
    if (std::isnan(v)) {
      EXPECT_EQ(F32ToE4M3(v) & 0x7F, 0x7F);
      continue;
    }
    EXPECT_EQ(F32ToE4M3(v), c) << v;
  }
}

TEST(KvF8, MidpointsRoundToEvenAndLargeValuesSaturate) {
  const auto& table = E4M3Table();
  for (int c = 0; c < 0x7E; ++c) {  // between c and c + 1 (positive, finite)
    const float lo = table[static_cast<size_t>(c)], hi = table[static_cast<size_t>(c + 1)];
    const float mid = 0.5f * (lo + hi);  // exact: both have few bits
    EXPECT_EQ(F32ToE4M3(mid), (c & 1) == 0 ? c : c + 1) << mid;
    EXPECT_EQ(F32ToE4M3(-mid), 0x80 | ((c & 1) == 0 ? c : c + 1)) << -mid;
    EXPECT_EQ(F32ToE4M3(std::nextafter(mid, 0.0f)), c);
    EXPECT_EQ(F32ToE4M3(std::nextafter(mid, 1e9f)), c + 1);
  }
  EXPECT_EQ(F32ToE4M3(448.0f), 0x7E);
  EXPECT_EQ(F32ToE4M3(470.0f), 0x7E);
  EXPECT_EQ(F32ToE4M3(-1e30f), 0xFE);
  EXPECT_EQ(F32ToE4M3(INFINITY), 0x7E);
  EXPECT_EQ(F32ToE4M3(-0.0f), 0x80);
  EXPECT_EQ(F32ToE4M3(0x1p-11f), 0x00);  // below half the smallest subnormal (2^-9)
}

TEST(KvF8, EncoderMatchesTheNearestValue) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-14, 10);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::ldexp(mant(rng), ex(rng));
    ASSERT_EQ(F32ToE4M3(x), NearestE4M3(x)) << x;
  }
}

TEST(KvF8, ExponentPutsTheRowMaximumInTheTopBinade) {
  EXPECT_EQ(KvF8Exponent(0.0f), 0);
  EXPECT_EQ(KvF8Exponent(NAN), 0);
  EXPECT_EQ(KvF8Exponent(INFINITY), 0);
  EXPECT_EQ(KvF8Exponent(448.0f), 0);
  EXPECT_EQ(KvF8Exponent(std::nextafter(448.0f, 1e9f)), 1);
  EXPECT_EQ(KvF8Exponent(224.0f), -1);
  EXPECT_EQ(KvF8Exponent(1.0f), -8);  // 1 * 2^8 = 256
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int i = 0; i < 10000; ++i) {
    const float amax = std::ldexp(0.5f + 0.5f * u(rng), static_cast<int>(u(rng) * 200) - 120);
    const int e = KvF8Exponent(amax);
    EXPECT_LE(std::ldexp(amax, -e), kE4M3Max) << amax;
    EXPECT_GT(std::ldexp(amax, 1 - e), kE4M3Max) << amax;  // the smallest such exponent
  }
}

TEST(KvF8, RowsRoundTripWithinE4M3Precision) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float scale : {1e-3f, 1.0f, 37.0f, 3e4f}) {
    std::vector<float> x(256), y;
    for (float& v : x) v = scale * nd(rng);
    y = x;
    KvF8RoundTripRow(y.data(), static_cast<int64_t>(y.size()));
    std::vector<uint8_t> codes(x.size());
    const int e = KvF8EncodeRow(x.data(), static_cast<int64_t>(x.size()), codes.data());
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(y[i], KvF8Value(codes[i], e));
      // Half a unit of E4M3's 3 mantissa bits, or of its subnormal spacing at this scale.
      EXPECT_LE(std::fabs(y[i] - x[i]), std::max(std::fabs(x[i]) / 16.0f, std::ldexp(1.0f, e - 10)) * 1.0001f);
    }
    EXPECT_EQ(std::fabs(y[0]) <= amax, true);
  }
}

}  // namespace
}  // namespace infernix::quant
