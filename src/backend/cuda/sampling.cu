// Sampling-side reductions over f32 logit rows: greedy picks (greedy.h's PickGreedyRows on the device,
// each row split over kGreedySplits blocks), and, one block per row, the top-k candidates (descending,
// ties to the lower index; top-p is applied by the caller over these) and logsumexp for log-probabilities.
// Ties always go to the lower index, as torch.argmax does.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "backend/cuda/device_util.cuh"

namespace infernix::cuda {
namespace {

constexpr int kThreads = 256;

struct Best {
  float v;
  int i;
};

__device__ __forceinline__ Best Better(Best a, Best b) {
  // NaN never wins; equal values go to the lower index.
  if (isnan(b.v)) return a;
  if (isnan(a.v)) return b;
  if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
  return a;
}

__device__ __forceinline__ Best BlockBest(Best b, Best* shared) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    Best o{__shfl_xor_sync(0xffffffffu, b.v, off), __shfl_xor_sync(0xffffffffu, b.i, off)};
    b = Better(b, o);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) shared[warp] = b;
  __syncthreads();
  Best r = shared[0];
  for (int w = 1; w < kThreads / 32; ++w) r = Better(r, shared[w]);
  return r;
}

// Block (row, part) of a greedy pick: the best (value, index) among the part's share of the row's first
// `sampleable` values and whether one of them is NaN or +inf, into parts[row * kGreedySplits + part]; the
// last block of the row to arrive combines the parts (Better orders (value, index) totally, so the order
// of arrival does not matter) into ids[row]: the index, or -1 (a NaN or +inf, or only -inf).
__global__ void __launch_bounds__(kThreads)
    GreedyKernel(const float* logits, int64_t cols, int64_t sampleable, GreedyPart* parts, int32_t* counters,
                 int32_t* ids) {
  __shared__ Best shared[kThreads / 32];
  const int row = static_cast<int>(blockIdx.x) / kGreedySplits, part = static_cast<int>(blockIdx.x) % kGreedySplits;
  const float* l = logits + static_cast<int64_t>(row) * cols;
  const int64_t per = (sampleable + kGreedySplits - 1) / kGreedySplits;
  const int64_t begin = part * per, end = min(sampleable, begin + per);
  Best b{-INFINITY, INT32_MAX};
  bool bad = false;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float v = __ldg(l + i);
    bad |= isnan(v) || v == INFINITY;
    if (v > b.v) b = Best{v, static_cast<int>(i)};  // strict, i rising: this thread's lowest index
  }
  bad = __syncthreads_or(bad) != 0;
  b = BlockBest(b, shared);
  if (threadIdx.x == 0) parts[blockIdx.x] = GreedyPart{b.v, b.i, bad ? 1 : 0};
  if (!LastBlockToArrive(counters + row, kGreedySplits)) return;
  if (threadIdx.x >= 32) return;
  static_assert(kGreedySplits == 32, "a lane per part");
  const GreedyPart* p = parts + row * kGreedySplits + threadIdx.x;  // other blocks' writes: through L2
  Best c{__ldcg(&p->v), __ldcg(&p->i)};
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    Best o{__shfl_xor_sync(0xffffffffu, c.v, off), __shfl_xor_sync(0xffffffffu, c.i, off)};
    c = Better(c, o);
  }
  const bool any_bad = __any_sync(0xffffffffu, __ldcg(&p->bad) != 0);
  if (threadIdx.x == 0) ids[row] = any_bad || c.i == INT32_MAX ? -1 : c.i;
}

// k rounds of a block argmax, each excluding what earlier rounds took (a strict order on (value, index)).
__global__ void __launch_bounds__(kThreads)
    TopKKernel(const float* logits, int64_t cols, int k, float* values, int32_t* ids) {
  __shared__ Best shared[kThreads / 32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * cols;
  Best prev{INFINITY, -1};  // everything strictly "after" prev in the order is still available
  for (int j = 0; j < k; ++j) {
    Best b{-INFINITY, INT32_MAX};
    for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
      float v = row[i];
      bool after = v < prev.v || (v == prev.v && static_cast<int>(i) > prev.i);
      if (after && !isnan(v)) b = Better(b, Best{v, static_cast<int>(i)});
    }
    b = BlockBest(b, shared);
    if (threadIdx.x == 0) {
      values[static_cast<int64_t>(blockIdx.x) * k + j] = b.v;
      ids[static_cast<int64_t>(blockIdx.x) * k + j] = b.i == INT32_MAX ? -1 : b.i;
    }
    prev = b;
  }
}

__global__ void __launch_bounds__(kThreads) LogSumExpKernel(const float* logits, int64_t cols, float* out) {
  __shared__ float shared[32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * cols;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) mx = fmaxf(mx, row[i]);
  mx = WarpMax(mx);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) shared[threadIdx.x >> 5] = mx;
  __syncthreads();
  mx = shared[0];
  for (int w = 1; w < kThreads / 32; ++w) mx = fmaxf(mx, shared[w]);
  float sum = 0;
  if (mx != -INFINITY)
    for (int64_t i = threadIdx.x; i < cols; i += kThreads) sum += expf(row[i] - mx);
  sum = BlockSum(sum, shared);
  if (threadIdx.x == 0) out[blockIdx.x] = mx == -INFINITY ? -INFINITY : mx + logf(sum);
}

__global__ void FeedTokensKernel(const int32_t* picks, const int32_t* rows, int64_t n, int32_t* ids) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    ids[i] = max(picks[rows[i]], 0);
}

}  // namespace

void LaunchFeedTokens(cudaStream_t s, const int32_t* picks, const int32_t* rows, int64_t n, int32_t* ids) {
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 64);
  FeedTokensKernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(picks, rows, n, ids);
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchGreedyRows(cudaStream_t s, const float* logits, int64_t rows, int64_t cols, int64_t sampleable,
                      GreedyPart* parts, int32_t* counters, int32_t* ids) {
  if (rows == 0) return;
  INFX_CHECK(sampleable >= 1 && sampleable <= cols && rows <= kGreedyMaxRows);
  GreedyKernel<<<static_cast<unsigned>(rows * kGreedySplits), kThreads, 0, s>>>(logits, cols, sampleable, parts,
                                                                                  counters, ids);
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchTopKRows(cudaStream_t s, const float* logits, int64_t rows, int64_t cols, int32_t k, float* values,
                    int32_t* ids) {
  if (rows == 0 || k == 0) return;
  TopKKernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(logits, cols, k, values, ids);
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchLogSumExpRows(cudaStream_t s, const float* logits, int64_t rows, int64_t cols, float* out) {
  if (rows == 0) return;
  LogSumExpKernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(logits, cols, out);
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
