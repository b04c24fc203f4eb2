// The values of dummy weights (model/dummy_weights.h), shared by the host fill and the CUDA backend's
// fill in device memory (Backend::MakeDummyWeight), so that both make the same bits: element i of a
// tensor whose stream is `base` is scale * DummyUniform(base, i) rounded to bf16 (round to nearest even),
// the product rounded once to f32 (the CUDA kernel multiplies with __fmul_rn, which is never contracted).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define INFX_HOST_DEVICE __host__ __device__
#else
#define INFX_HOST_DEVICE
#endif

namespace infernix {

INFX_HOST_DEVICE inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1): the top 24 bits of SplitMix64(base + i), scaled by 2^-23 (exact) minus 1 (exact
// for every such value, so a fused multiply-add gives the same result).
INFX_HOST_DEVICE inline float DummyUniform(uint64_t base, uint64_t i) {
  return static_cast<float>(SplitMix64(base + i) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

}  // namespace infernix
