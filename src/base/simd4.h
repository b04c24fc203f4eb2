// 4-lane float / int kernels in GCC / Clang vector extensions (SSE2 on x86-64, NEON on AArch64), for the
// host's scans over logit rows (logit_scan.h, the engine's sampler).
#pragma once

#include <cstdint>
#include <cstring>

namespace infernix::simd4 {

typedef float F4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));
typedef uint32_t U4 __attribute__((vector_size(16)));

inline F4 Load4(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline I4 LoadI4(const int32_t* p) {
  I4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void Store4(float* p, F4 v) { std::memcpy(p, &v, sizeof v); }

inline F4 Broadcast(float x) { return F4{x, x, x, x}; }

inline F4 Select(I4 mask, F4 if_true, F4 if_false) {
  return reinterpret_cast<F4>((mask & reinterpret_cast<I4>(if_true)) | (~mask & reinterpret_cast<I4>(if_false)));
}

inline bool AnyLane(I4 mask) { return (mask[0] | mask[1] | mask[2] | mask[3]) != 0; }

inline float LaneSum(F4 v) { return (v[0] + v[1]) + (v[2] + v[3]); }

}  // namespace infernix::simd4
