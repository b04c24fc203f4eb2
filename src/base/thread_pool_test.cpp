#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace infernix {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (size_t threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (size_t n : {0, 1, 5, 100, 1001}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, 3, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) hits[i]++;
      });
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
    }
  }
}

TEST(ThreadPool, ReusableAcrossManyLoops) {
  ThreadPool pool(3);
  std::atomic<long> sum{0};
  for (int round = 0; round < 200; ++round)
    pool.ParallelFor(64, 1, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) sum += static_cast<long>(i);
    });
  EXPECT_EQ(sum.load(), 200L * (63 * 64 / 2));
}

TEST(ThreadPool, ConcurrentCallersAreSerialisedSafely) {
  ThreadPool pool(3);
  std::atomic<long> sum{0};
  auto work = [&] {
    for (int round = 0; round < 300; ++round)
      pool.ParallelFor(50, 1, [&](size_t b, size_t e) { sum += static_cast<long>(e - b); });
  };
  std::thread a(work), b(work);
  work();
  a.join();
  b.join();
  EXPECT_EQ(sum.load(), 3L * 300 * 50);
}

}  // namespace
}  // namespace infernix
