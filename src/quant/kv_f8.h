// The FP8 KV cache's number format (StateSpec::kv_type == KvCacheType::kF8E4M3), shared by both
// backends: the CPU backend keeps the decoded values, the CUDA kernels store the codes and exponents
// and must produce the same bits (the GPU op tests compare them with these functions).
//
// Each cached row (one token's key or value for one KV head, head_dim values) is stored as head_dim
// E4M3 codes and one power-of-two scale 2^e: e is the smallest exponent with max|x| * 2^-e <= 448 (the
// largest finite E4M3 value), so the row's largest value lands in E4M3's top binade. Because the scale
// is a power of two, scaling is exact both ways: the only rounding is x * 2^-e to the nearest E4M3 value
// (ties to even, saturating at +-448), and a decoded value E4M3(code) * 2^e is exactly representable in
// f32 and bf16. A row of zeros (or with a non-finite maximum) takes e = 0.
#pragma once

#include <cstdint>

namespace infernix::quant {

// The largest finite E4M3 value.
inline constexpr float kE4M3Max = 448.0f;

// The exponent e of a row whose largest magnitude is amax (>= 0).
int KvF8Exponent(float amax);
// x to E4M3, round to nearest even, saturating to +-448; NaN to 0x7F.
uint8_t F32ToE4M3(float x);
// The codes of a row of n values and its exponent.
int KvF8EncodeRow(const float* x, int64_t n, uint8_t* codes);
// A stored value: E4M3(code) * 2^e (exact).
float KvF8Value(uint8_t code, int e);
// x [n] replaced by its stored values (encode, then decode): what attention reads from an FP8 cache.
void KvF8RoundTripRow(float* x, int64_t n);

}  // namespace infernix::quant
