// DequantizeRow throughput per type on one thread: 64 rows of 4096 elements (a Qwen3-8B hidden row),
// decoded one row at a time into an f32 row, as the CPU backend's WeightRow does. Items are elements
// decoded, bytes are packed bytes read. Results: docs/performance.md.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "quant/quant.h"

namespace infernix {
namespace {

constexpr int64_t kCols = 4096, kRows = 64;

// Pseudo-random packed rows; every 16-bit field that could be a scale is overwritten with a small
// finite half so that no value is inf or NaN (their cost is the same, but they would be unrealistic).
std::vector<uint8_t> MakeRows(DType type) {
  size_t bytes = RowBytes(type, kCols) * kRows;
  std::vector<uint8_t> data(bytes);
  uint32_t s = 12345;
  for (auto& b : data) b = static_cast<uint8_t>((s = s * 1664525u + 1013904223u) >> 24);
  if (IsBlockQuantized(type)) {
    uint16_t half = F32ToF16(0.0123f);
    for (size_t off = 0; off + 1 < bytes; off += DTypeBlockBytes(type)) std::memcpy(&data[off], &half, 2);
  }
  if (type == DType::kF16 || type == DType::kBF16) {  // weights of magnitude ~0.01-0.1, as in models
    for (size_t off = 0; off + 1 < bytes; off += 2) {
      float v = (static_cast<float>((s = s * 1664525u + 1013904223u) >> 8) * 0x1p-24f - 0.5f) * 0.2f;
      uint16_t h = type == DType::kF16 ? F32ToF16(v) : F32ToBf16(v);
      std::memcpy(&data[off], &h, 2);
    }
  }
  return data;
}

void BM_DequantizeRow(benchmark::State& state, DType type) {
  std::vector<uint8_t> data = MakeRows(type);
  std::vector<float> out(kCols);
  size_t row_bytes = RowBytes(type, kCols);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r) {
      DequantizeRow(type, data.data() + static_cast<size_t>(r) * row_bytes, out.data(), kCols);
      benchmark::DoNotOptimize(out.data());
      benchmark::ClobberMemory();
    }
  }
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * data.size()));
}

#define INFX_QUANT_BENCH(T) BENCHMARK_CAPTURE(BM_DequantizeRow, T, DType::k##T)
INFX_QUANT_BENCH(F32);
INFX_QUANT_BENCH(F16);
INFX_QUANT_BENCH(BF16);
INFX_QUANT_BENCH(F8E4M3);
INFX_QUANT_BENCH(Q4_0);
INFX_QUANT_BENCH(Q4_1);
INFX_QUANT_BENCH(Q5_0);
INFX_QUANT_BENCH(Q5_1);
INFX_QUANT_BENCH(Q8_0);
INFX_QUANT_BENCH(Q2_K);
INFX_QUANT_BENCH(Q3_K);
INFX_QUANT_BENCH(Q4_K);
INFX_QUANT_BENCH(Q5_K);
INFX_QUANT_BENCH(Q6_K);
INFX_QUANT_BENCH(IQ4_NL);
INFX_QUANT_BENCH(IQ4_XS);

}  // namespace
}  // namespace infernix

BENCHMARK_MAIN();
