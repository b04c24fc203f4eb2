// GGUF block-quantized weights on the GPU: a dequantizing GEMV for decode (out [n, rows] = x [n, k] @ w^T,
// n <= kQuantGemvMaxTokens, each packed weight byte read once) and a dequantizer into bf16 rows (for
// prefill, which then runs the bf16 GEMM, and for embedding lookups). Formats as src/quant/ decodes them
// on the CPU (docs/quant.md): the GGUF block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS,
// and FP8 E4M3 with inline 128-value block scales (f8_e4m3_b128, what an FP8 checkpoint is repacked into
// at load). The decode GEMV here is the general fallback of quant_gemv_mma.cu's tensor-core one.
//
// Work unit: a sub-block of 32 consecutive values of one row (a legacy block, or an eighth of a K-quant
// super-block). In the GEMV a warp owns a row and its lanes take the row's sub-blocks in turn; partial
// sums are reduced across the warp in a fixed order (deterministic).
#include "backend/cuda/quant_blocks.cuh"

namespace infernix::cuda {
namespace {

constexpr int kRowsPerBlock = 4;  // warps per thread block, one row each

// The warp's per-lane partial sums of its row, reduced in a fixed order; lane 0 stores token t's result.
template <int kTokens>
__device__ __forceinline__ void StoreWarpSums(const float* acc, int64_t n, int lane, void* out, int out_dtype,
                                              int64_t rows, int64_t row) {
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    if (t >= n) break;
    const float a = WarpSum(acc[t]);
    if (lane == 0) StoreF(out, out_dtype, t * rows + row, a);
  }
}

// Bytes of 32 sub-blocks (one warp step: a sub-block per lane).
template <int T>
__host__ __device__ constexpr int64_t StepBytes() {
  return 32 * 32 / BlockValues<T>() * BlockBytes<T>();
}
template <int T>
__host__ __device__ constexpr int StepWords() {  // 8-byte words per lane per step, rounded up
  return static_cast<int>((StepBytes<T>() / 8 + 31) / 32);
}

// A warp streams its row in steps of 32 sub-blocks: the step's packed bytes are read with coalesced
// 8-byte loads (the next step's loads are issued before this step is decoded), staged in shared memory,
// and each lane decodes one sub-block from there and multiplies it with x. Rows must be 8-byte aligned
// and hold a whole number of steps (k a multiple of 1024); LaunchQuantGemv checks.
template <int T, int kTokens>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    QuantGemvKernel(const bf16* x, const uint8_t* w, void* out, int out_dtype, int64_t n, int64_t rows, int64_t k) {
  constexpr int64_t kStepBytes = StepBytes<T>();
  constexpr int kWords = StepWords<T>();
  __shared__ uint2 stage[kRowsPerBlock][kWords * 32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + warp;
  if (row >= rows) return;
  const int64_t steps = k / 1024;
  const uint2* wr = reinterpret_cast<const uint2*>(w + row * steps * kStepBytes);
  constexpr int kStepWords = static_cast<int>(kStepBytes / 8);
  float acc[kTokens];
#pragma unroll
  for (int t = 0; t < kTokens; ++t) acc[t] = 0.0f;
  uint2 next[kWords];
#pragma unroll
  for (int i = 0; i < kWords; ++i) {
    const int word = i * 32 + lane;
    if (word < kStepWords) next[i] = __ldg(wr + word);
  }
  float v[32];
  for (int64_t step = 0; step < steps; ++step) {
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      const int word = i * 32 + lane;
      if (word < kStepWords) stage[warp][word] = next[i];
    }
    if (step + 1 < steps) {
      const uint2* nw = wr + (step + 1) * kStepWords;
#pragma unroll
      for (int i = 0; i < kWords; ++i) {
        const int word = i * 32 + lane;
        if (word < kStepWords) next[i] = __ldg(nw + word);
      }
    }
    __syncwarp();
    LoadSub<T>(reinterpret_cast<const uint8_t*>(stage[warp]), lane, v, k);
    __syncwarp();
    const int64_t s = step * 32 + lane;
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      if (t >= n) break;
      float sum = 0.0f;
      AddDot32(sum, v, x + t * k + s * 32);
      acc[t] += sum;
    }
  }
  StoreWarpSums<kTokens>(acc, n, lane, out, out_dtype, rows, row);
}

// The general form (any k that is a multiple of the block size, any alignment): each lane reads its own
// sub-blocks straight from global memory.
template <int T, int kTokens>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    QuantGemvSimpleKernel(const bf16* x, const uint8_t* w, void* out, int out_dtype, int64_t n, int64_t rows,
                          int64_t k) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const uint8_t* wr = w + row * (k / BlockValues<T>() * BlockBytes<T>());
  float acc[kTokens];
#pragma unroll
  for (int t = 0; t < kTokens; ++t) acc[t] = 0.0f;
  float v[32];
  for (int64_t s = lane; s < k / 32; s += 32) {
    LoadSub<T>(wr, s, v, k);
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      if (t >= n) break;
      float sum = 0.0f;
      for (int i = 0; i < 32; ++i) sum += v[i] * __bfloat162float(x[t * k + s * 32 + i]);
      acc[t] += sum;
    }
  }
  StoreWarpSums<kTokens>(acc, n, lane, out, out_dtype, rows, row);
}

// out[i, :] (bf16 or f32 act) = dequantized row ids[i] (ids null: row i); rows outside [0, n_table) give zeros.
template <int T>
__global__ void DequantRowsKernel(const uint8_t* w, const int32_t* ids, int64_t n_table, int64_t k, void* out,
                                  int out_dtype, int64_t n) {
  const int64_t subs = k / 32;
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (unit >= n * subs) return;
  const int64_t i = unit / subs, s = unit % subs;
  const int64_t r = ids != nullptr ? ids[i] : i;
  float v[32];
  if (r < 0 || r >= n_table) {
#pragma unroll
    for (int e = 0; e < 32; ++e) v[e] = 0.0f;
  } else {
    LoadSub<T>(w + r * (k / BlockValues<T>() * BlockBytes<T>()), s, v, k);
  }
  for (int e = 0; e < 32; ++e) StoreF(out, out_dtype, i * k + s * 32 + e, v[e]);
}

// The dequantizer for whole weights (prefill: ids null, bf16 out, 16-byte aligned ends), a tile of
// kDequantTile consecutive sub-blocks (unit u: row u / (k / 32), sub-block u % (k / 32)) per thread block:
// the tile's packed bytes are copied into shared memory with coalesced 16-byte loads (a tile starts on a
// block boundary: k / 32 is a multiple of a block's sub-blocks, and every type's tile is a multiple of 16
// bytes), thread t decodes sub-block t from there into a padded shared-memory row of bf16, and the block
// writes the tile's 64 * units output bytes, contiguous in out, with coalesced 16-byte stores. FP8 rows
// (codes, then scales, per row) are read per thread instead: its 32 codes with two 16-byte loads and its
// scale, staged as a row of one sub-block. DequantRowsKernel (one thread per sub-block writing its own 32
// values) remains for embedding lookups and odd alignments.
constexpr int kDequantTile = 256;
constexpr int kDequantOutPitch = 80;  // bytes per decoded sub-block in shared memory: 64 + 16 (conflict-free writes)
template <int T>
__host__ __device__ constexpr int DequantStageBytes() {
  return T == kF8E4M3B128 ? kDequantTile * 48
                          : static_cast<int>(kDequantTile / (BlockValues<T>() / 32) * BlockBytes<T>());
}

template <int T>
__global__ void __launch_bounds__(kDequantTile, 4) DequantTileKernel(const uint8_t* w, int64_t k, bf16* out,
                                                                  int64_t units) {
  __shared__ __align__(16) uint8_t stage[DequantStageBytes<T>()];
  __shared__ __align__(16) uint8_t decoded[kDequantTile * kDequantOutPitch];
  const int t = static_cast<int>(threadIdx.x);
  const int64_t u0 = static_cast<int64_t>(blockIdx.x) * kDequantTile;
  const int n_units = static_cast<int>(units - u0 < kDequantTile ? units - u0 : kDequantTile);
  float v[32];
  if constexpr (T == kF8E4M3B128) {
    if (t < n_units) {
      const int64_t subs = k / 32, u = u0 + t, r = u / subs, s = u % subs;
      const uint8_t* row = w + r * QuantRowBytes<T>(k);
      uint8_t* mine = stage + t * 48;
      const uint4* codes = reinterpret_cast<const uint4*>(row + s * 32);
      reinterpret_cast<uint4*>(mine)[0] = __ldg(codes);
      reinterpret_cast<uint4*>(mine)[1] = __ldg(codes + 1);
      *reinterpret_cast<float*>(mine + 32) = __ldg(reinterpret_cast<const float*>(row + k + (s / 4) * 4));
      LoadSub<T>(mine, 0, v, 32);  // a row of 32 values: the codes, then the scale
    }
  } else {
    constexpr int64_t kSubs = BlockValues<T>() / 32;
    const int64_t bytes = (n_units / kSubs) * BlockBytes<T>();
    const uint8_t* src = w + u0 / kSubs * BlockBytes<T>();
    for (int64_t i = t; i < bytes / 16; i += kDequantTile)
      reinterpret_cast<uint4*>(stage)[i] = __ldg(reinterpret_cast<const uint4*>(src) + i);
    for (int64_t i = bytes / 16 * 16 + t; i < bytes; i += kDequantTile) stage[i] = __ldg(src + i);
    __syncthreads();
    if (t < n_units) LoadSub<T>(stage, t, v, k);
  }
  if (t < n_units) {
    uint4* dst = reinterpret_cast<uint4*>(decoded + t * kDequantOutPitch);
#pragma unroll
    for (int i = 0; i < 4; ++i) dst[i] = Pack8(v + 8 * i);
  }
  __syncthreads();
  uint4* o = reinterpret_cast<uint4*>(out + u0 * 32);
  for (int c = t; c < n_units * 4; c += kDequantTile)
    o[c] = *reinterpret_cast<const uint4*>(decoded + (c >> 2) * kDequantOutPitch + (c & 3) * 16);
}

template <int T, int kTokens>
void LaunchGemvTokens(cudaStream_t st, const bf16* x, const uint8_t* w, void* out, int out_dtype, int64_t n,
                      int64_t rows, int64_t k) {
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  const bool fast = k % 1024 == 0 && (reinterpret_cast<uintptr_t>(w) & 7u) == 0 &&
                    (reinterpret_cast<uintptr_t>(x) & 15u) == 0;
  // The staged kernel copies runs of whole blocks: FP8's device layout keeps codes and scales apart.
  if constexpr (T != kF8E4M3B128) {
    if (fast) {
      QuantGemvKernel<T, kTokens><<<blocks, 32 * kRowsPerBlock, 0, st>>>(x, w, out, out_dtype, n, rows, k);
      return;
    }
  }
  QuantGemvSimpleKernel<T, kTokens><<<blocks, 32 * kRowsPerBlock, 0, st>>>(x, w, out, out_dtype, n, rows, k);
}

template <int T>
void LaunchGemvT(cudaStream_t st, const void* x, const void* w, void* out, int out_dtype, int64_t n, int64_t rows,
                 int64_t k) {
  const auto* xb = static_cast<const bf16*>(x);
  const auto* wb = static_cast<const uint8_t*>(w);
  if (n <= 1) {
    LaunchGemvTokens<T, 1>(st, xb, wb, out, out_dtype, n, rows, k);
  } else if (n <= 4) {
    LaunchGemvTokens<T, 4>(st, xb, wb, out, out_dtype, n, rows, k);
  } else {
    LaunchGemvTokens<T, kQuantGemvMaxTokens>(st, xb, wb, out, out_dtype, n, rows, k);
  }
}

template <int T>
void LaunchDequantT(cudaStream_t st, const void* w, const int32_t* ids, int64_t n_table, int64_t k, void* out,
                    int out_dtype, int64_t n) {
  const int64_t units = n * (k / 32);
  // FP8's rows are read one by one: each must start 16-byte aligned; the other types' tiles run across rows.
  const int64_t row_align = T == kF8E4M3B128 ? QuantRowBytes<T>(k) : 0;
  if (ids == nullptr && out_dtype == kBF16 &&
      ((reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(out) | static_cast<uintptr_t>(row_align)) &
       15u) == 0) {
    const auto tiles = static_cast<unsigned>((units + kDequantTile - 1) / kDequantTile);
    DequantTileKernel<T><<<tiles, kDequantTile, 0, st>>>(static_cast<const uint8_t*>(w), k, static_cast<bf16*>(out),
                                                         units);
    return;
  }
  const unsigned blocks = static_cast<unsigned>((units + 255) / 256);
  DequantRowsKernel<T><<<blocks, 256, 0, st>>>(static_cast<const uint8_t*>(w), ids, n_table, k, out, out_dtype, n);
}

}  // namespace

bool QuantTypeSupported(int type) {
  return std::find(std::begin(kQuantTypes), std::end(kQuantTypes), type) != std::end(kQuantTypes);
}

void LaunchQuantGemv(cudaStream_t s, int type, const void* x, const void* w, void* out, int out_dtype, int64_t n,
                     int64_t rows, int64_t k) {
  if (n <= 0 || rows <= 0) return;
  ByQuantType(type, [&](auto tc) { LaunchGemvT<decltype(tc)::value>(s, x, w, out, out_dtype, n, rows, k); });
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchDequantRows(cudaStream_t s, int type, const void* w, const int32_t* ids, int64_t n_table, int64_t k,
                       void* out, int out_dtype, int64_t n) {
  if (n <= 0) return;
  ByQuantType(type, [&](auto tc) { LaunchDequantT<decltype(tc)::value>(s, w, ids, n_table, k, out, out_dtype, n); });
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
