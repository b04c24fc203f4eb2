// The FP8 KV cache's rows (kv_f8.h).
#include "quant/kv_f8.h"

#include <algorithm>
#include <cmath>

#include "quant/quant_internal.h"

namespace infernix::quant {

int KvF8Exponent(float amax) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 0;
  int x = 0;
  const float m = std::frexp(amax, &x);  // amax = m * 2^x, m in [0.5, 1); 448 = 0.875 * 2^9
  return m <= 0.875f ? x - 9 : x - 8;
}

uint8_t F32ToE4M3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::min(std::fabs(x), kE4M3Max);
  int code = 0;
  if (a < 0x1p-6f) {  // subnormal: multiples of 2^-9 (8 * 2^-9 carries into the smallest normal, code 8)
    code = static_cast<int>(std::nearbyint(std::ldexp(a, 9)));
  } else {
    int ex = 0;
    std::frexp(a, &ex);  // a in [2^(ex - 1), 2^ex)
    const int e = ex - 1;
    const int r = static_cast<int>(std::nearbyint((std::ldexp(a, -e) - 1.0f) * 8.0f));  // exact operands
    code = ((e + 7) << 3) + r;  // r == 8 carries into the next binade
  }
  return static_cast<uint8_t>(sign | std::min(code, 0x7E));
}

int KvF8EncodeRow(const float* x, int64_t n, uint8_t* codes) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const int e = KvF8Exponent(amax);
  for (int64_t i = 0; i < n; ++i) codes[i] = F32ToE4M3(std::ldexp(x[i], -e));
  return e;
}

float KvF8Value(uint8_t code, int e) { return std::ldexp(E4M3Table()[code], e); }

void KvF8RoundTripRow(float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const int e = KvF8Exponent(amax);
  for (int64_t i = 0; i < n; ++i) x[i] = KvF8Value(F32ToE4M3(std::ldexp(x[i], -e)), e);
}

}  // namespace infernix::quant
