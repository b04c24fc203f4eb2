// Copies: plain and strided memory copies (queued through the recorder so that they are ordered with,
// and captured alongside, the kernels), the embedding lookup and row gathers.
#include "backend/cuda/device_util.cuh"
#include "tensor/dummy_values.h"

namespace infernix::cuda {
namespace {

// A block per token. bf16 rows of whole 16-byte chunks (every Qwen model's) go as up to kEmbedChunks
// chunks per thread, all loaded before any is stored (element by element, each load waited for the store
// before it: ~10 us for a 4,096-wide row, the first kernel of every decode step).
constexpr int kEmbedChunks = 4;
__global__ void EmbeddingKernel(const int32_t* __restrict__ ids, const void* __restrict__ table, int table_dtype,
                                int64_t vocab, int64_t h, void* __restrict__ out, int out_dtype) {
  AllowDependentLaunch();
  WaitForPrevious();
  int64_t t = blockIdx.x;
  int32_t id = ids[t];
  bool valid = id >= 0 && id < vocab;
  if (table_dtype == kBF16 && out_dtype == kBF16 && h % 8 == 0 && reinterpret_cast<uintptr_t>(table) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(out) % 16 == 0) {
    const int64_t chunks = h / 8;
    const uint4* src = reinterpret_cast<const uint4*>(static_cast<const bf16*>(table) + (valid ? id : 0) * h);
    uint4* dst = reinterpret_cast<uint4*>(static_cast<bf16*>(out) + t * h);
    for (int64_t c0 = threadIdx.x; c0 < chunks; c0 += kEmbedChunks * blockDim.x) {
      uint4 v[kEmbedChunks];
#pragma unroll
      for (int j = 0; j < kEmbedChunks; ++j) {
        const int64_t c = c0 + j * blockDim.x;
        v[j] = valid && c < chunks ? __ldg(src + c) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int j = 0; j < kEmbedChunks; ++j)
        if (c0 + j * blockDim.x < chunks) dst[c0 + j * blockDim.x] = v[j];
    }
    return;
  }
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    float v = valid ? LoadF(table, table_dtype, static_cast<int64_t>(id) * h + i) : 0.0f;
    StoreF(out, out_dtype, t * h + i, v);
  }
}

// One block per output row; copies row_bytes in 16-, 4- or 2-byte units.
template <typename U>
__global__ void GatherRowsKernel(const U* x, const int32_t* rows, int64_t units, U* out) {
  AllowDependentLaunch();
  WaitForPrevious();
  int64_t r = blockIdx.x;
  const U* src = x + static_cast<int64_t>(rows[r]) * units;
  U* dst = out + r * units;
  for (int64_t i = threadIdx.x; i < units; i += blockDim.x) dst[i] = src[i];
}

// Dummy weights (tensor/dummy_values.h): the same bits as the host fill.
// dst[i] = bf16(src[i]), 8 elements per thread and step (grid-stride).
__global__ void ToBf16Kernel(const void* src, int src_dtype, bf16* dst, int64_t n) {
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x * 8) {
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (i + e < n) dst[i + e] = __float2bfloat16_rn(LoadF(src, src_dtype, i + e));
  }
}

__global__ void DummyBf16Kernel(bf16* data, int64_t n, uint64_t base, float scale) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    data[i] = __float2bfloat16_rn(__fmul_rn(scale, DummyUniform(base, static_cast<uint64_t>(i))));
  }
}

// Random quantized blocks, in two passes (the scale fields overwrite bytes of the words): the words, the
// last one cut at the end of the tensor.
__global__ void DummyWordsKernel(uint8_t* data, size_t bytes, uint64_t seed, int fp8) {
  const size_t words = (bytes + 7) / 8;
  for (size_t w = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words;
       w += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint64_t r = DummyBlockWord(seed, w, fp8 != 0);
    if (8 * w + 8 <= bytes) {
      *reinterpret_cast<uint64_t*>(data + 8 * w) = r;  // the weight arena's chunks are 256-byte aligned
    } else {
      for (size_t i = 8 * w; i < bytes; ++i) data[i] = static_cast<uint8_t>(r >> (8 * (i - 8 * w)));
    }
  }
}

__global__ void DummyScalesKernel(uint8_t* data, size_t blocks, size_t block_bytes, uint64_t seed, DummyBlockFields f) {
  for (size_t blk = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; blk < blocks;
       blk += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t b = blk * block_bytes;
    const float d = __fmul_rn(f.d, DummyBlockFactor(seed, b));
    if (f.fp8 != 0) {
      *reinterpret_cast<float*>(data + b) = d;
      continue;
    }
    // One store per field (the block types' sizes and field offsets are even, FP8's a multiple of 4:
    // LaunchDummyBlocks checks). Written as two byte stores of the f16's bits, the low byte came out 0 on
    // the H200 (sm_90 build, CUDA 13; CudaOps.DummyBlocksEqualTheHostFill), cutting 8 mantissa bits.
    *reinterpret_cast<__half*>(data + b + f.d_at) = __float2half_rn(d);
    if (f.min_at >= 0) *reinterpret_cast<__half*>(data + b + f.min_at) = __float2half_rn(__fmul_rn(d, 0.5f));
  }
}

// One row of FP8 blocks into the device layout (f8_layout.h), in place: the row goes through shared memory
// as 4-byte words (a row's 33 words per block are only 4-byte aligned), then word j of block b's codes
// lands at word 32 b + j and the block's scale at word k / 4 + b.
__global__ void F8ToDeviceRowsKernel(uint32_t* data, int64_t k) {
  extern __shared__ uint32_t row_words[];
  const int64_t blocks = k / 128, words = blocks * 33;
  uint32_t* row = data + static_cast<int64_t>(blockIdx.x) * words;
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) row_words[i] = row[i];
  __syncthreads();
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) {
    const int64_t code_words = k / 4;
    row[i] = i < code_words ? row_words[(i / 32) * 33 + 1 + i % 32] : row_words[(i - code_words) * 33];
  }
}

}  // namespace

void LaunchF8ToDeviceRows(cudaStream_t s, void* data, int64_t rows, int64_t k) {
  if (rows <= 0) return;
  INFX_CHECK(k > 0 && k % 128 == 0 && (reinterpret_cast<uintptr_t>(data) & 3u) == 0);
  const size_t smem = static_cast<size_t>(k / 128 * 132);
  if (smem > 48 * 1024) {  // long rows: shared memory past the default, as far as the device allows
    const cudaError_t e = cudaFuncSetAttribute(F8ToDeviceRowsKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    INFX_CHECK_MSG(e == cudaSuccess, "FP8 rows of {} values ({} bytes) do not fit in a block's shared memory: {}", k,
                   smem, cudaGetErrorString(e));
  }
  // A grid of rows blocks: a dimension holds 2^31 - 1 of them.
  INFX_CHECK(rows < (int64_t{1} << 31));
  F8ToDeviceRowsKernel<<<static_cast<unsigned>(rows), 256, smem, s>>>(static_cast<uint32_t*>(data), k);
  INFX_CUDA_CHECK_LAUNCH();
}

cudaError_t ProbeKernelImage() {
  cudaFuncAttributes attr{};
  return cudaFuncGetAttributes(&attr, EmbeddingKernel);
}

void LaunchDummyBf16(cudaStream_t s, void* data, int64_t n, uint64_t base, float scale) {
  if (n <= 0) return;
  DummyBf16Kernel<<<1024, 256, 0, s>>>(static_cast<bf16*>(data), n, base, scale);
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchDummyBlocks(cudaStream_t s, void* data, size_t bytes, size_t block_bytes, uint64_t seed,
                       DummyBlockFields f) {
  if (bytes == 0) return;
  const size_t align = f.fp8 != 0 ? 4 : 2;
  INFX_CHECK(block_bytes % align == 0 && reinterpret_cast<uintptr_t>(data) % align == 0 &&
             (f.fp8 != 0 || (f.d_at % 2 == 0 && (f.min_at < 0 || f.min_at % 2 == 0))));
  DummyWordsKernel<<<1024, 256, 0, s>>>(static_cast<uint8_t*>(data), bytes, seed, f.fp8);
  INFX_CUDA_CHECK_LAUNCH();
  DummyScalesKernel<<<1024, 256, 0, s>>>(static_cast<uint8_t*>(data), bytes / block_bytes, block_bytes, seed, f);
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchToBf16(cudaStream_t s, const void* src, int src_dtype, void* dst, int64_t n) {
  if (n <= 0) return;
  ToBf16Kernel<<<Blocks(n, 256 * 8), 256, 0, s>>>(src, src_dtype, static_cast<bf16*>(dst), n);
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchMemcpy(cudaStream_t s, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  INFX_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
}

void LaunchMemset(cudaStream_t s, void* dst, size_t bytes) {
  if (bytes == 0) return;
  INFX_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, s));
}

void LaunchCopy2D(cudaStream_t s, void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width_bytes,
                  size_t rows) {
  if (rows == 0 || width_bytes == 0) return;
  INFX_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width_bytes, rows, cudaMemcpyDeviceToDevice, s));
}

void LaunchEmbedding(cudaStream_t s, const int32_t* ids, int64_t n, const void* table, int table_dtype, int64_t vocab,
                     int64_t h, void* out, int out_dtype) {
  if (n <= 0) return;
  LaunchDependent(EmbeddingKernel, static_cast<unsigned>(n), 256, 0, s, ids, table, table_dtype, vocab, h, out,
                  out_dtype);
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchGatherRows(cudaStream_t s, const void* x, const int32_t* rows, int64_t n_rows, int64_t row_bytes,
                      void* out) {
  if (n_rows <= 0) return;
  unsigned blocks = static_cast<unsigned>(n_rows);
  if (row_bytes % 16 == 0 && Aligned16(x) && Aligned16(out)) {
    LaunchDependent(GatherRowsKernel<uint4>, blocks, 256, 0, s, static_cast<const uint4*>(x), rows, row_bytes / 16,
                    static_cast<uint4*>(out));
  } else if (row_bytes % 4 == 0 && (reinterpret_cast<uintptr_t>(x) & 3u) == 0 &&
             (reinterpret_cast<uintptr_t>(out) & 3u) == 0) {
    LaunchDependent(GatherRowsKernel<uint32_t>, blocks, 256, 0, s, static_cast<const uint32_t*>(x), rows, row_bytes / 4,
                    static_cast<uint32_t*>(out));
  } else {
    LaunchDependent(GatherRowsKernel<uint16_t>, blocks, 256, 0, s, static_cast<const uint16_t*>(x), rows, row_bytes / 2,
                    static_cast<uint16_t*>(out));
  }
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
