// How fast thread blocks shaped like the decode kernels' stream their tiles of weights (docs/performance.md,
// device_run.sh step `streambench`): a design question for gemv.cu and moe_gemv.cu, measured without their
// arithmetic. Each block reads one tile (16 rows of --tile bytes in all, contiguous) and adds up its
// 32-bit words (integer adds: nothing else to wait for), in one of two ways:
//  - regs: as the decode GEMVs load: 8 warps split the row's 64-byte steps, thread (g, t) of a warp takes
//    16 bytes of rows g and g + 8 at each of its steps, 8 steps of both rows in flight (register loads,
//    kUnroll = 8), a block issuing one 16-byte load per thread per row and step;
//  - tma (sm_90): one thread asks the copy engine for the whole tile (cp.async.bulk into shared memory,
//    completion counted on an mbarrier), every thread then reads it from shared memory.
// A CUDA graph holds --layers launches, each over its own tiles (as the layers of a decode step), and runs
// --reps times (the median reported); blocks per SM are held to --per-sm with shared memory, for both ways
// alike. Reported: microseconds per launch and GB/s over the tiles' bytes. Needs a GPU (tma: sm_90 or later).
//
//   stream_bench [--tiles 128,264,352,704] [--tile-kb 32,64] [--per-sm 2] [--layers 8] [--reps 20]
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "base/error.h"
#include "base/int_list.h"
#include "bench_util.h"

namespace infernix {
namespace {

constexpr int kThreads = 256, kWarps = 8, kUnroll = 8;

// The block's words added up, into one value per block (so that nothing is optimised away).
__device__ void FinishSum(uint32_t v, uint32_t* sink) {
  __shared__ uint32_t warp_sums[kWarps];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t total = 0;
    for (int w = 0; w < kWarps; ++w) total += warp_sums[w];
    sink[blockIdx.x] = total;
  }
}

__device__ __forceinline__ uint32_t Sum4(uint4 v) { return v.x + v.y + v.z + v.w; }

// tile: 16 rows of row_bytes (a multiple of 64).
__global__ void __launch_bounds__(kThreads) RegsKernel(const uint8_t* tiles, int64_t tile_bytes, uint32_t* sink) {
  // Its dynamic shared memory is not used: its size holds the blocks per SM to --per-sm.
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t row_bytes = tile_bytes / 16, steps = row_bytes / 64;
  const uint8_t* base = tiles + blockIdx.x * tile_bytes;
  const uint4* rg = reinterpret_cast<const uint4*>(base + g * row_bytes);
  const uint4* rh = reinterpret_cast<const uint4*>(base + (g + 8) * row_bytes);
  uint32_t acc = 0;
  for (int64_t s0 = warp; s0 < steps; s0 += kWarps * kUnroll) {
    uint4 a[kUnroll], b[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t s = s0 + u * kWarps;
      a[u] = s < steps ? __ldcs(rg + s * 4 + t) : uint4{};
      b[u] = s < steps ? __ldcs(rh + s * 4 + t) : uint4{};
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc += Sum4(a[u]) + Sum4(b[u]);
  }
  FinishSum(acc, sink);
}

__global__ void __launch_bounds__(kThreads) TmaKernel(const uint8_t* tiles, int64_t tile_bytes, uint32_t* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ __align__(8) uint64_t bar;
  const unsigned bar_s = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const uint8_t* src = tiles + blockIdx.x * tile_bytes;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar_s) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar_s),
                 "r"(static_cast<unsigned>(tile_bytes))
                 : "memory");
    // One bulk copy per 32 KB piece (any multiple of 16 bytes is allowed; pieces keep each request moderate).
    for (int64_t o = 0; o < tile_bytes; o += 32768) {
      const unsigned piece = static_cast<unsigned>(tile_bytes - o < 32768 ? tile_bytes - o : 32768);
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                       dst + static_cast<unsigned>(o)),
                   "l"(src + o), "r"(piece), "r"(bar_s)
                   : "memory");
    }
  }
  // Wait for phase 0 of the barrier (the whole tile), giving up after 2^22 polls (reported by the host).
  uint32_t done = 0;
  for (uint32_t i = 0; i < (1u << 22) && done == 0; ++i) {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar_s)
                 : "memory");
  }
  uint32_t acc = 0;
  if (done != 0) {
    const uint4* words = reinterpret_cast<const uint4*>(smem);
    for (int64_t i = threadIdx.x; i < tile_bytes / 16; i += kThreads) acc += Sum4(words[i]);
  }
  FinishSum(done != 0 ? acc : 0xDEADu, sink);
  if (done == 0 && threadIdx.x == 0) sink[gridDim.x] = 1;  // the flag the host checks
#else
  if (threadIdx.x == 0 && blockIdx.x == 0) sink[gridDim.x] = 2;  // built without sm_90 code
#endif
}

struct Options {
  std::string tiles = "128,264,352,704", tile_kb = "32,64";
  int per_sm = 2, layers = 8, reps = 20;
};

int Run(const Options& o) {
  int device = 0, sms = 0, smem_per_sm = 0, optin = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    std::fprintf(stderr, "stream_bench: no usable GPU\n");
    return 1;
  }
  INFX_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  INFX_CUDA_CHECK(cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  INFX_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  INFX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  const std::vector<int64_t> tile_counts = ParseIntList(o.tiles, "--tiles", 1, "a block count", "128,352", 1 << 20);
  const std::vector<int64_t> tile_kbs = ParseIntList(o.tile_kb, "--tile-kb", 1, "a size in KB", "32,64", 1024);
  int64_t max_bytes = 0;
  for (int64_t n : tile_counts)
    for (int64_t kb : tile_kbs) max_bytes = std::max(max_bytes, n * kb * 1024);
  const int layers = bench::LayersThatFit(static_cast<size_t>(max_bytes), o.layers);
  uint8_t* buf = nullptr;
  uint32_t* sink = nullptr;
  INFX_CUDA_CHECK(cudaMalloc(&buf, static_cast<size_t>(max_bytes) * layers));
  INFX_CUDA_CHECK(cudaMemset(buf, 1, static_cast<size_t>(max_bytes) * layers));
  int64_t max_tiles = 0;
  for (int64_t n : tile_counts) max_tiles = std::max(max_tiles, n);
  INFX_CUDA_CHECK(cudaMalloc(&sink, sizeof(uint32_t) * static_cast<size_t>(max_tiles + 1)));
  cudaStream_t s = nullptr;
  INFX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // Both kernels get the same dynamic shared memory: the tile (tma) or at least 1/per_sm of the SM's.
  int max_dynamic = optin;
  for (auto* kernel : {RegsKernel, TmaKernel}) {
    cudaFuncAttributes attr{};
    INFX_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    const int dynamic = optin - static_cast<int>(attr.sharedSizeBytes);
    max_dynamic = std::min(max_dynamic, dynamic);
    INFX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic));
  }
  std::printf("device: %d SMs, %d KB shared memory per SM; %d launches per graph, blocks held to %d per SM\n\n", sms,
              smem_per_sm / 1024, layers, o.per_sm);
  std::printf("| tiles | tile KB | way | blocks per SM | us per launch | GB/s |\n|---:|---:|---|---:|---:|---:|\n");
  for (int64_t kb : tile_kbs) {
    const int64_t tile_bytes = kb * 1024;
    if (tile_bytes > max_dynamic) {
      std::printf("| | %lld | | | tile too large for shared memory | |\n", static_cast<long long>(kb));
      continue;
    }
    const size_t hold = static_cast<size_t>(smem_per_sm / o.per_sm) - 2048;  // per_sm blocks and no more
    const size_t smem = std::max(static_cast<size_t>(tile_bytes), std::min(hold, static_cast<size_t>(max_dynamic)));
    for (int64_t n : tile_counts) {
      for (int way = 0; way < 2; ++way) {
        if (way == 1 && major < 9) continue;
        auto* kernel = way == 0 ? RegsKernel : TmaKernel;
        int per_sm = 0;
        INFX_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
        INFX_CUDA_CHECK(cudaMemsetAsync(sink, 0, sizeof(uint32_t) * static_cast<size_t>(n + 1), s));
        const double ms = bench::GraphMedianMs(s, o.reps, [&] {
          for (int l = 0; l < layers; ++l)
            kernel<<<static_cast<unsigned>(n), kThreads, smem, s>>>(buf + l * max_bytes, tile_bytes, sink);
        });
        uint32_t flag = 0;
        INFX_CUDA_CHECK(cudaMemcpy(&flag, sink + n, sizeof(flag), cudaMemcpyDeviceToHost));
        const double us = 1e3 * ms / layers;
        const double gbs = static_cast<double>(n * tile_bytes) / (us * 1e3);
        if (flag != 0) {
          std::printf("| %lld | %lld | %s | %d | %s | |\n", static_cast<long long>(n), static_cast<long long>(kb),
                      way == 0 ? "regs" : "tma", per_sm,
                      flag == 1 ? "timed out waiting for the copy" : "no sm_90 code in this build");
        } else {
          std::printf("| %lld | %lld | %s | %d | %.2f | %.0f |\n", static_cast<long long>(n),
                      static_cast<long long>(kb), way == 0 ? "regs" : "tma", per_sm, us, gbs);
        }
      }
    }
  }
  INFX_CUDA_CHECK(cudaStreamDestroy(s));
  INFX_CUDA_CHECK(cudaFree(sink));
  INFX_CUDA_CHECK(cudaFree(buf));
  return 0;
}

}  // namespace
}  // namespace infernix

int main(int argc, char** argv) {
  infernix::Options o;
  CLI::App app{"How fast blocks shaped like the decode GEMVs stream their tiles: register loads or one bulk copy"};
  app.add_option("--tiles", o.tiles, "blocks (tiles) per launch, a list")->capture_default_str();
  app.add_option("--tile-kb", o.tile_kb, "KB per tile (16 rows), a list")->capture_default_str();
  app.add_option("--per-sm", o.per_sm, "blocks per SM at most (held with shared memory)")->capture_default_str();
  app.add_option("--layers", o.layers, "launches per graph, each over its own tiles")->capture_default_str();
  app.add_option("--reps", o.reps, "graph launches timed (the median is reported)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    return infernix::Run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stream_bench: %s\n", e.what());
    return 1;
  }
}
