#include "quant/random_blocks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/thread_pool.h"
#include "quant/quant.h"

namespace infernix {
namespace {

// Bytes depend on (seed, offset) alone: a large tensor (filled on several threads) starts with the bytes
// of a small one of the same seed and row length, and two calls agree.
TEST(RandomQuantBlocks, DeterministicAcrossSizesAndThreads) {
  for (DType type : {DType::kQ8_0, DType::kQ4_K, DType::kF8E4M3B128}) {
    const int64_t k = 8192, big_rows = 4096;  // > 16 MiB for every type here: the threaded path
    HostBuffer big = RandomQuantBlocks(type, big_rows, k, 42, 0.1f);
    ASSERT_GE(big.size_bytes(), size_t{1} << 24) << DTypeName(type);
    HostBuffer again = RandomQuantBlocks(type, big_rows, k, 42, 0.1f);
    HostBuffer small = RandomQuantBlocks(type, 3, k, 42, 0.1f);
    EXPECT_EQ(std::memcmp(big.view().data, again.view().data, big.size_bytes()), 0) << DTypeName(type);
    EXPECT_EQ(std::memcmp(big.view().data, small.view().data, small.size_bytes()), 0) << DTypeName(type);
    // Values are finite and within a few times the scale.
    std::vector<float> row(static_cast<size_t>(k));
    DequantizeRow(type, static_cast<const char*>(big.view().data) + (big_rows - 1) * RowBytes(type, k), row.data(), k);
    for (float v : row) {
      ASSERT_TRUE(std::isfinite(v)) << DTypeName(type);
      ASSERT_LE(std::abs(v), 1.0f) << DTypeName(type);
    }
  }
}

// A shared pool (dummy weights) fills tensors from 256 KiB on: the same bytes as the serial fill.
TEST(RandomQuantBlocks, SharedPoolGivesTheSameBytes) {
  ThreadPool pool(4);
  for (DType type : {DType::kQ4_K, DType::kQ6_K, DType::kF8E4M3B128}) {
    HostBuffer serial = RandomQuantBlocks(type, 768, 2048, 7, 0.05f);
    ASSERT_GE(serial.size_bytes(), size_t{1} << 18) << DTypeName(type);
    ASSERT_LT(serial.size_bytes(), size_t{1} << 24) << DTypeName(type);
    HostBuffer pooled = RandomQuantBlocks(type, 768, 2048, 7, 0.05f, &pool);
    EXPECT_EQ(std::memcmp(serial.view().data, pooled.view().data, serial.size_bytes()), 0) << DTypeName(type);
  }
}

}  // namespace
}  // namespace infernix
