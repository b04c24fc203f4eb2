#include "quant/random_blocks.h"

#include <cstring>

#include <algorithm>
#include <functional>
#include <memory>
#include <thread>

#include "base/check.h"
#include "base/thread_pool.h"

namespace infernix {
namespace {

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void PutHalf(uint8_t* p, float v) {
  uint16_t h = F32ToF16(v);
  std::memcpy(p, &h, 2);
}

}  // namespace

HostBuffer RandomQuantBlocks(DType type, int64_t rows, int64_t k, uint64_t seed, float scale, ThreadPool* shared) {
  INFX_CHECK(IsBlockQuantized(type));
  HostBuffer buffer(type, Shape{rows, k});
  auto* bytes = static_cast<uint8_t*>(buffer.view().data);
  const size_t total = buffer.size_bytes(), block = DTypeBlockBytes(type), n_blocks = total / block;
  // Every byte is a function of (seed, offset) alone, so large tensors are filled on several threads
  // (dummy weights of tens of GB) with the same result.
  std::unique_ptr<ThreadPool> own;
  ThreadPool* pool = nullptr;
  if (shared != nullptr && total >= (size_t{1} << 18)) {
    pool = shared;
  } else if (shared == nullptr && total >= (size_t{1} << 24)) {
    own = std::make_unique<ThreadPool>(std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16));
    pool = own.get();
  }
  auto parallel = [&](size_t n, const std::function<void(size_t, size_t)>& fn) {
    if (pool) {
      pool->ParallelFor(n, std::max<size_t>(1, n / 256), fn);
    } else {
      fn(0, n);
    }
  };
  const bool fp8 = type == DType::kF8E4M3B128;
  parallel((total + 7) / 8, [&](size_t w0, size_t w1) {
    for (size_t w = w0; w < w1; ++w) {
      uint64_t r = Mix(seed * 0x100000001b3ull + 8 * w);
      if (fp8) {  // no E4M3 NaN (0x7f, 0xff): such bytes lose their lowest bit (per byte, no carries)
        const uint64_t nan = ((r & 0x7f7f7f7f7f7f7f7full) + 0x0101010101010101ull) & 0x8080808080808080ull;
        r ^= nan >> 7;
      }
      std::memcpy(bytes + 8 * w, &r, std::min<size_t>(8, total - 8 * w));
    }
  });
  if (fp8) {  // f32 scales over the first 4 bytes of each block
    parallel(n_blocks, [&](size_t b0, size_t b1) {
      for (size_t b = b0 * block; b < b1 * block; b += block) {
        float d = scale / 448 * (0.5f + static_cast<float>(Mix(seed + b) >> 40) / 33554432.0f);
        std::memcpy(bytes + b, &d, 4);
      }
    });
    return buffer;
  }
  // Scale fields: (offset of the f16 scale, offset of an f16 min or -1, value of the scale).
  int d_at = 0, min_at = -1;
  float d = scale;
  switch (type) {
    case DType::kQ8_0: d = scale / 127; break;
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL: d = scale / 16; min_at = (type == DType::kQ4_1 || type == DType::kQ5_1) ? 2 : -1; break;
    case DType::kQ2_K: d_at = 80; min_at = 82; d = scale / 48; break;
    case DType::kQ3_K: d_at = 108; d = scale / 256; break;
    case DType::kQ4_K:
    case DType::kQ5_K: min_at = 2; d = scale / 1000; break;
    case DType::kQ6_K: d_at = 208; d = scale / 4096; break;
    case DType::kIQ4_XS: d = scale / 4096; break;
    default: break;
  }
  parallel(n_blocks, [&](size_t b0, size_t b1) {
    for (size_t b = b0 * block; b < b1 * block; b += block) {
      float u = 0.5f + static_cast<float>(Mix(seed + b) >> 40) / 33554432.0f;  // [0.5, 1)
      PutHalf(bytes + b + d_at, d * u);
      if (min_at >= 0) PutHalf(bytes + b + min_at, d * u * 0.5f);
    }
  });
  return buffer;
}

}  // namespace infernix
