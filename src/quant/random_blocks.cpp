#include "quant/random_blocks.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include "base/check.h"
#include "base/thread_pool.h"
#include "tensor/dummy_blocks.h"
#include "tensor/dummy_values.h"

namespace infernix {
namespace {

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
  // The bytes of tensor/dummy_values.h and tensor/dummy_blocks.h (the CUDA backend writes the same).
  const DummyBlockScheme scheme = DummyBlockSchemeOf(type, scale);
  parallel((total + 7) / 8, [&](size_t w0, size_t w1) {
    for (size_t w = w0; w < w1; ++w) {
      const uint64_t r = DummyBlockWord(seed, w, scheme.fp8);
      std::memcpy(bytes + 8 * w, &r, std::min<size_t>(8, total - 8 * w));
    }
  });
  parallel(n_blocks, [&](size_t b0, size_t b1) {
    for (size_t b = b0 * block; b < b1 * block; b += block) {
      const float d = scheme.d * DummyBlockFactor(seed, b);
      if (scheme.fp8) {
        std::memcpy(bytes + b, &d, 4);
        continue;
      }
      PutHalf(bytes + b + scheme.d_at, d);
      if (scheme.min_at >= 0) PutHalf(bytes + b + scheme.min_at, d * 0.5f);
    }
  });
  return buffer;
}

}  // namespace infernix
