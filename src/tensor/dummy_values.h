// The values of dummy weights (model/dummy_weights.h), shared by the host fill and the CUDA backend's
// fill in device memory (Backend::MakeDummyWeight), so that both make the same bits:
//  - bf16: element i of a tensor whose stream is `base` is scale * DummyUniform(base, i) rounded to bf16
//    (round to nearest even), the product rounded once to f32 (the CUDA kernel multiplies with
//    __fmul_rn, which is never contracted);
//  - random quantized blocks (quant/random_blocks.h): the tensor's 8-byte words are DummyBlockWord,
//    then each block's scale fields are overwritten (tensor/dummy_blocks.h says where and with what).
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

// The 8-byte word w (bytes 8w .. 8w + 7, little-endian) of a random block tensor. FP8: bytes that would
// be an E4M3 NaN (0x7f, 0xff) lose their lowest bit (per byte, no carries).
INFX_HOST_DEVICE inline uint64_t DummyBlockWord(uint64_t seed, uint64_t w, bool fp8) {
  uint64_t r = SplitMix64(seed * 0x100000001b3ull + 8 * w);
  if (fp8) {
    const uint64_t nan = ((r & 0x7f7f7f7f7f7f7f7full) + 0x0101010101010101ull) & 0x8080808080808080ull;
    r ^= nan >> 7;
  }
  return r;
}

// A block's scale multiplier in [0.5, 1), b the block's byte offset: 0.5 + (24 random bits) * 2^-25, one
// rounding (the product is exact, so a fused multiply-add gives the same).
INFX_HOST_DEVICE inline float DummyBlockFactor(uint64_t seed, uint64_t b) {
  return 0.5f + static_cast<float>(SplitMix64(seed + b) >> 40) * (1.0f / 33554432.0f);
}

}  // namespace infernix
