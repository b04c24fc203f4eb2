// The CPU ops that read weights (MatMul, Embedding, MoeExperts, RmsNorm) with block-quantized weights:
// each must give exactly (bit for bit) what it gives with the same weight dequantized to f32 first, for
// every block type, and the same bits for any thread count. The decoders themselves are tested against
// llama.cpp in src/quant/quant_test.cpp.
#include <bit>
#include <cstddef>

#include "backend/cpu/cpu_test_util.h"
#include "quant/quant.h"

namespace infernix {
namespace {

using namespace cpu_test;

const std::vector<DType> kBlockTypes = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,  DType::kQ5_1,
                                        DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,  DType::kQ4_K,
                                        DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS};

// Byte offsets of a block's f16 scale and (for types with one) its f16 min.
std::pair<size_t, int64_t> ScaleOffsets(DType type) {
  using namespace quant;
  switch (type) {
    case DType::kQ4_0: return {offsetof(BlockQ4_0, d), -1};
    case DType::kQ4_1: return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
    case DType::kQ5_0: return {offsetof(BlockQ5_0, d), -1};
    case DType::kQ5_1: return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case DType::kQ8_0: return {offsetof(BlockQ8_0, d), -1};
    case DType::kQ2_K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case DType::kQ3_K: return {offsetof(BlockQ3_K, d), -1};
    case DType::kQ4_K: return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case DType::kQ5_K: return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case DType::kQ6_K: return {offsetof(BlockQ6_K, d), -1};
    case DType::kIQ4_NL: return {offsetof(BlockIQ4_NL, d), -1};
    case DType::kIQ4_XS: return {offsetof(BlockIQ4_XS, d), -1};
    default: ADD_FAILURE() << "not a block type"; return {0, -1};
  }
}

// A [rows, cols] weight of pseudo-random packed blocks whose f16 scales are small finite values.
HostBuffer RandomQuantWeight(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  HostBuffer b(type, Shape{rows, cols});
  auto* bytes = static_cast<uint8_t*>(b.view().data);
  uint32_t s = seed * 2654435761u + 99u;
  auto next = [&] { return s = s * 1664525u + 1013904223u; };
  for (size_t i = 0; i < b.size_bytes(); ++i) bytes[i] = static_cast<uint8_t>(next() >> 24);
  auto [d_off, m_off] = ScaleOffsets(type);
  size_t block_bytes = DTypeBlockBytes(type);
  for (size_t blk = 0; blk < b.size_bytes() / block_bytes; ++blk) {
    float d = (0.002f + static_cast<float>(next() >> 8) * 0x1p-24f * 0.02f) * ((next() >> 31) ? -1.0f : 1.0f);
    uint16_t h = F32ToF16(d);
    std::memcpy(bytes + blk * block_bytes + d_off, &h, 2);
    if (m_off >= 0) {
      h = F32ToF16(static_cast<float>(next() >> 8) * 0x1p-24f * 0.01f);
      std::memcpy(bytes + blk * block_bytes + static_cast<size_t>(m_off), &h, 2);
    }
  }
  return b;
}

// The same weight decoded to f32 up front.
HostBuffer Dequantized(const Tensor& w) {
  HostBuffer f(DType::kF32, w.shape);
  for (int64_t r = 0; r < w.rows(); ++r)
    DequantizeRow(w.dtype, static_cast<const char*>(w.data) + static_cast<size_t>(r) * RowBytes(w.dtype, w.cols()),
                  f.view().as<float>() + r * w.cols(), w.cols());
  return f;
}

void ExpectBitIdentical(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.numel(), want.numel());
  int64_t mismatches = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    float g = got.as<const float>()[i], w = want.as<const float>()[i];
    if (std::bit_cast<uint32_t>(g) != std::bit_cast<uint32_t>(w) && ++mismatches <= 3)
      ADD_FAILURE() << what << " element " << i << ": " << g << " vs " << w;
    EXPECT_TRUE(std::isfinite(g)) << what << " element " << i;
  }
  EXPECT_EQ(mismatches, 0) << what;
}

// Outputs must depend on the weight: not all equal.
void ExpectVaries(const Tensor& t, const std::string& what) {
  float first = t.as<const float>()[0];
  bool varies = false;
  for (int64_t i = 1; i < t.numel(); ++i) varies |= t.as<const float>()[i] != first;
  EXPECT_TRUE(varies) << what;
}

class CpuQuantOps : public ::testing::TestWithParam<DType> {};

TEST_P(CpuQuantOps, MatMulEqualsMatMulOfTheDequantizedWeight) {
  DType type = GetParam();
  const int64_t n = 3, k = 512, m = 7;
  CpuBackend backend(2);
  HostBuffer w = RandomQuantWeight(type, m, k, 1);
  HostBuffer wf = Dequantized(w.view());
  HostBuffer x = MakeF32(Shape{n, k}, Pseudo(static_cast<size_t>(n * k), 2));
  HostBuffer got = MakeOut(Shape{n, m}), want = MakeOut(Shape{n, m});
  backend.MatMul(x.view(), w.view(), got.view());
  backend.MatMul(x.view(), wf.view(), want.view());
  ExpectBitIdentical(got.view(), want.view(), "MatMul");
  ExpectVaries(got.view(), "MatMul");
}

TEST_P(CpuQuantOps, EmbeddingRowsAreTheDecodedRows) {
  DType type = GetParam();
  const int64_t vocab = 6, h = 256;
  CpuBackend backend(2);
  HostBuffer table = RandomQuantWeight(type, vocab, h, 3);
  HostBuffer tf = Dequantized(table.view());
  HostBuffer ids = MakeI32(Shape{4}, {5, 0, 3, 3});
  HostBuffer got = MakeOut(Shape{4, h}), want = MakeOut(Shape{4, h});
  backend.Embedding(ids.view(), table.view(), got.view());
  backend.Embedding(ids.view(), tf.view(), want.view());
  ExpectBitIdentical(got.view(), want.view(), "Embedding");
  // Row 5 of the table, decoded directly.
  std::vector<float> row(static_cast<size_t>(h));
  DequantizeRow(type, static_cast<const char*>(table.view().data) + 5 * RowBytes(type, h), row.data(), h);
  EXPECT_EQ(std::vector<float>(got.view().as<float>(), got.view().as<float>() + h), row);
}

TEST_P(CpuQuantOps, MoeExpertsEqualExpertsOfTheDequantizedWeights) {
  DType type = GetParam();
  const int64_t n = 3, hidden = 256, inter = 256, n_experts = 3, top_k = 2;
  CpuBackend backend(2);
  std::vector<HostBuffer> buffers;
  ExpertWeights quantized, dequantized;
  for (int64_t e = 0; e < n_experts; ++e) {
    for (int p = 0; p < 3; ++p) {
      buffers.push_back(RandomQuantWeight(type, p == 2 ? hidden : inter, p == 2 ? inter : hidden,
                                          static_cast<uint32_t>(10 + 3 * e + p)));
      Tensor q = buffers.back().view();
      buffers.push_back(Dequantized(q));
      Tensor f = buffers.back().view();
      (p == 0 ? quantized.gate : p == 1 ? quantized.up : quantized.down).push_back(q);
      (p == 0 ? dequantized.gate : p == 1 ? dequantized.up : dequantized.down).push_back(f);
    }
  }
  HostBuffer x = MakeF32(Shape{n, hidden}, Pseudo(static_cast<size_t>(n * hidden), 20));
  HostBuffer weights = MakeF32(Shape{n, top_k}, {0.7f, 0.3f, 0.5f, 0.5f, 0.9f, 0.1f});
  HostBuffer ids = MakeI32(Shape{n, top_k}, {2, 0, 1, 2, 0, 1});
  HostBuffer got = MakeOut(Shape{n, hidden}), want = MakeOut(Shape{n, hidden});
  backend.MoeExperts(x.view(), weights.view(), ids.view(), quantized, got.view());
  backend.MoeExperts(x.view(), weights.view(), ids.view(), dequantized, want.view());
  ExpectBitIdentical(got.view(), want.view(), "MoeExperts");
  ExpectVaries(got.view(), "MoeExperts");
}

INSTANTIATE_TEST_SUITE_P(BlockTypes, CpuQuantOps, ::testing::ValuesIn(kBlockTypes),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

TEST(CpuQuantOpsThreads, QuantizedMatMulAndExpertsAreBitIdenticalAcrossThreadCounts) {
  const int64_t n = 5, k = 256, m = 67;
  HostBuffer w = RandomQuantWeight(DType::kQ4_K, m, k, 30);
  HostBuffer x = MakeF32(Shape{n, k}, Pseudo(static_cast<size_t>(n * k), 31));
  ExpertWeights experts;
  std::vector<HostBuffer> buffers;
  for (int e = 0; e < 2; ++e) {
    buffers.push_back(RandomQuantWeight(DType::kQ6_K, 256, k, static_cast<uint32_t>(40 + e)));
    experts.gate.push_back(buffers.back().view());
    buffers.push_back(RandomQuantWeight(DType::kQ8_0, 256, k, static_cast<uint32_t>(50 + e)));
    experts.up.push_back(buffers.back().view());
    buffers.push_back(RandomQuantWeight(DType::kIQ4_XS, k, 256, static_cast<uint32_t>(60 + e)));
    experts.down.push_back(buffers.back().view());
  }
  HostBuffer weights = MakeF32(Shape{n, 2}, {0.6f, 0.4f, 0.5f, 0.5f, 0.2f, 0.8f, 0.9f, 0.1f, 0.3f, 0.7f});
  HostBuffer ids = MakeI32(Shape{n, 2}, {0, 1, 1, 0, 0, 1, 1, 0, 0, 1});
  std::vector<HostBuffer> mm, moe;
  for (size_t threads : {1, 3, 8}) {
    CpuBackend backend(threads);
    mm.push_back(MakeOut(Shape{n, m}));
    backend.MatMul(x.view(), w.view(), mm.back().view());
    moe.push_back(MakeOut(Shape{n, k}));
    backend.MoeExperts(x.view(), weights.view(), ids.view(), experts, moe.back().view());
  }
  for (size_t i = 1; i < mm.size(); ++i) {
    ExpectBitIdentical(mm[i].view(), mm[0].view(), "MatMul threads");
    ExpectBitIdentical(moe[i].view(), moe[0].view(), "MoeExperts threads");
  }
}

TEST(CpuQuantOpsNorm, RmsNormWithABlockQuantizedWeightEqualsItsDequantizedWeight) {
  CpuBackend backend(2);
  HostBuffer w = RandomQuantWeight(DType::kQ8_0, 1, 256, 70);
  HostBuffer wf = Dequantized(w.view());
  Tensor wv = w.view().Reshaped(Shape{256}), wfv = wf.view().Reshaped(Shape{256});
  HostBuffer x = MakeF32(Shape{2, 256}, Pseudo(512, 71));
  for (bool unit_offset : {false, true}) {
    HostBuffer got = MakeOut(Shape{2, 256}), want = MakeOut(Shape{2, 256});
    backend.RmsNorm(x.view(), wv, 1e-6f, unit_offset, got.view());
    backend.RmsNorm(x.view(), wfv, 1e-6f, unit_offset, want.view());
    ExpectBitIdentical(got.view(), want.view(), "RmsNorm");
  }
}

TEST(CpuQuantOpsDeathTest, Fp8WeightWithoutItsScalesIsAnInternalCheck) {
  CpuBackend backend(1);
  HostBuffer w(DType::kF8E4M3, Shape{2, 32});
  HostBuffer x = MakeF32(Shape{1, 32}, Pseudo(32, 80));
  HostBuffer out = MakeOut(Shape{1, 2});
  EXPECT_DEATH(backend.MatMul(x.view(), w.view(), out.view()), "weight dtype f8_e4m3 in a float op");
}

}  // namespace
}  // namespace infernix
