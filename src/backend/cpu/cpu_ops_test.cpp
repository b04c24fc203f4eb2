// Tests of the CPU backend, the reference implementation of backend/ops.h: the stateless ops (memory,
// embedding, norms, matmul, elementwise, RoPE, MoE) against values derived by hand or by a
// double-precision re-implementation written here. Stateful ops: cpu_state_ops_test.cpp.
#include "backend/cpu/cpu_test_util.h"

namespace infernix {
namespace {

using namespace cpu_test;

// ---- memory ----

TEST(CpuBackendMemory, NameAndActivationDtype) {
  CpuBackend backend(1);
  EXPECT_EQ(backend.name(), "cpu");
  EXPECT_EQ(backend.activation_dtype(), DType::kF32);
}

TEST(CpuBackendMemory, ScratchRegionsAreAlignedAndDisjointAndCopiesRoundTrip) {
  CpuBackend backend(1);
  Tensor a = backend.Scratch(DType::kF32, Shape{3, 5});
  Tensor b = backend.Scratch(DType::kBF16, Shape{7});
  Tensor c = backend.Scratch(DType::kF32, Shape{4});
  EXPECT_EQ(a.shape, (Shape{3, 5}));
  EXPECT_EQ(b.dtype, DType::kBF16);
  for (const Tensor* t : {&a, &b, &c}) EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % 64, 0u);
  auto* pa = static_cast<char*>(a.data);
  auto* pb = static_cast<char*>(b.data);
  auto* pc = static_cast<char*>(c.data);
  EXPECT_GE(pb, pa + a.size_bytes());
  EXPECT_GE(pc, pb + b.size_bytes());

  std::vector<float> host = Pseudo(15, 1), back(15, 0.0f);
  backend.CopyToBackend(host.data(), a);
  std::vector<float> filler(4, 9.0f);
  backend.CopyToBackend(filler.data(), c);  // must not clobber a
  backend.CopyToHost(a, back.data());
  EXPECT_EQ(back, host);

  backend.ResetScratch();
  Tensor again = backend.Scratch(DType::kF32, Shape{3, 5});
  EXPECT_EQ(again.data, a.data);  // the arena is reused after a reset

  // Requests larger than what is left of a block get a fresh region, disjoint from earlier ones.
  Tensor big1 = backend.Scratch(DType::kF32, Shape{3 << 20});
  Tensor big2 = backend.Scratch(DType::kF32, Shape{3 << 20});
  auto* b1 = static_cast<char*>(big1.data);
  auto* b2 = static_cast<char*>(big2.data);
  EXPECT_TRUE(b2 >= b1 + big1.size_bytes() || b1 >= b2 + big2.size_bytes());
  EXPECT_TRUE(b1 >= static_cast<char*>(again.data) + again.size_bytes() ||
              static_cast<char*>(again.data) >= b1 + big1.size_bytes());
  std::fill(big1.as<float>(), big1.as<float>() + big1.numel(), 1.0f);
  std::fill(big2.as<float>(), big2.as<float>() + big2.numel(), 2.0f);
  EXPECT_EQ(big1.as<float>()[big1.numel() - 1], 1.0f);

  HostBuffer w = MakeF32(Shape{2, 2}, {1, 2, 3, 4});
  Tensor up = backend.UploadWeight(w.view());
  EXPECT_EQ(up.data, w.view().data);
  EXPECT_EQ(up.shape, w.view().shape);
}

// ---- Embedding ----

TEST(CpuEmbedding, F32TableCopiesRows) {
  CpuBackend backend(1);
  HostBuffer table = MakeF32(Shape{3, 2}, {1.0f, 2.0f, 3.0f, 4.0f, -5.0f, 6.5f});
  HostBuffer ids = MakeI32(Shape{4}, {2, 0, 2, 1});
  HostBuffer out = MakeOut(Shape{4, 2});
  backend.Embedding(ids.view(), table.view(), out.view());
  EXPECT_EQ(Values(out.view()), (std::vector<float>{-5.0f, 6.5f, 1.0f, 2.0f, -5.0f, 6.5f, 3.0f, 4.0f}));
}

TEST(CpuEmbedding, Bf16TableIsWidenedExactly) {
  CpuBackend backend(1);
  // bf16 bit patterns: 0x3FC0 = 1.5, 0xC010 = -2.25, 0x3E00 = 0.125, 0x4380 = 256, 0xBF80 = -1, 0x0000 = 0.
  HostBuffer table(DType::kBF16, Shape{3, 2});
  const uint16_t bits[] = {0x3FC0, 0xC010, 0x3E00, 0x4380, 0xBF80, 0x0000};
  std::memcpy(table.view().data, bits, sizeof(bits));
  HostBuffer ids = MakeI32(Shape{3}, {1, 2, 0});
  HostBuffer out = MakeOut(Shape{3, 2});
  backend.Embedding(ids.view(), table.view(), out.view());
  EXPECT_EQ(Values(out.view()), (std::vector<float>{0.125f, 256.0f, -1.0f, 0.0f, 1.5f, -2.25f}));
}

TEST(CpuEmbedding, F16TableIsWidenedExactly) {
  CpuBackend backend(1);
  // f16 bit patterns: 0x3C00 = 1, 0xC000 = -2, 0x3800 = 0.5, 0x5640 = 100.
  HostBuffer table(DType::kF16, Shape{2, 2});
  const uint16_t bits[] = {0x3C00, 0xC000, 0x3800, 0x5640};
  std::memcpy(table.view().data, bits, sizeof(bits));
  HostBuffer ids = MakeI32(Shape{3}, {1, 1, 0});
  HostBuffer out = MakeOut(Shape{3, 2});
  backend.Embedding(ids.view(), table.view(), out.view());
  EXPECT_EQ(Values(out.view()), (std::vector<float>{0.5f, 100.0f, 0.5f, 100.0f, 1.0f, -2.0f}));
}

// ---- RmsNorm / GatedRmsNorm ----

TEST(CpuRmsNorm, KnownValuesPlainWeight) {
  CpuBackend backend(1);
  // Row 0: x = [3, 4], eps 0: rms = sqrt(12.5); row 1: x = [-1, 1], rms = 1.
  HostBuffer x = MakeF32(Shape{2, 2}, {3, 4, -1, 1});
  HostBuffer w = MakeF32(Shape{2}, {1, 2});
  HostBuffer out = MakeOut(Shape{2, 2});
  backend.RmsNorm(x.view(), w.view(), 0.0f, false, out.view());
  double r = std::sqrt(12.5);
  ExpectNearAll(Values(out.view()), {3 / r * 1, 4 / r * 2, -1.0, 2.0}, 1e-6);
}

TEST(CpuRmsNorm, UnitOffsetScalesByOnePlusWeight) {
  CpuBackend backend(1);
  HostBuffer x = MakeF32(Shape{1, 2}, {3, 4});
  HostBuffer w = MakeF32(Shape{2}, {0, 1});  // (1 + w) = [1, 2]
  HostBuffer out = MakeOut(Shape{1, 2});
  backend.RmsNorm(x.view(), w.view(), 0.0f, true, out.view());
  double r = std::sqrt(12.5);
  ExpectNearAll(Values(out.view()), {3 / r * 1, 4 / r * 2}, 1e-6);
  // The same weight without the offset zeroes the first column.
  backend.RmsNorm(x.view(), w.view(), 0.0f, false, out.view());
  ExpectNearAll(Values(out.view()), {0.0, 4 / r}, 1e-6);
}

TEST(CpuRmsNorm, EpsIsAddedToTheMeanSquare) {
  CpuBackend backend(1);
  // x = [1, 1, 1, 1], eps 3: 1 / sqrt(1 + 3) = 0.5.
  HostBuffer x = MakeF32(Shape{1, 4}, {1, 1, 1, 1});
  HostBuffer w = MakeHalf(DType::kBF16, Shape{4}, {1, 2, -1, 0.5f});
  HostBuffer out = MakeOut(Shape{1, 4});
  backend.RmsNorm(x.view(), w.view(), 3.0f, false, out.view());
  ExpectNearAll(Values(out.view()), {0.5, 1.0, -0.5, 0.25}, 1e-7);
}

TEST(CpuRmsNorm, ManyRowsMatchDoubleReference) {
  CpuBackend backend(2);
  const int64_t rows = 70, d = 13;  // more rows than one task's grain
  std::vector<float> xv = Pseudo(static_cast<size_t>(rows * d), 3, -2, 2), wv = Pseudo(static_cast<size_t>(d), 4);
  HostBuffer x = MakeF32(Shape{rows, d}, xv);
  HostBuffer w = MakeF32(Shape{d}, wv);
  HostBuffer out = MakeOut(Shape{rows, d});
  const float eps = 1e-5f;
  backend.RmsNorm(x.view(), w.view(), eps, true, out.view());
  std::vector<double> want;
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += double(xv[size_t(r * d + i)]) * xv[size_t(r * d + i)];
    double inv = 1.0 / std::sqrt(ss / d + eps);
    for (int64_t i = 0; i < d; ++i) want.push_back(xv[size_t(r * d + i)] * inv * (1.0 + wv[size_t(i)]));
  }
  ExpectNearAll(Values(out.view()), want, 1e-6, 1e-5);
}

TEST(CpuGatedRmsNorm, NormTimesWeightTimesSiluOfGate) {
  CpuBackend backend(1);
  // Row 0: x = [3, 4] (rms sqrt(12.5)), z = [0, 2]: silu(0) = 0 kills column 0.
  // Row 1: x = [2, -2] (rms 2), z = [1, -1].
  HostBuffer x = MakeF32(Shape{2, 2}, {3, 4, 2, -2});
  HostBuffer z = MakeF32(Shape{2, 2}, {0, 2, 1, -1});
  HostBuffer w = MakeF32(Shape{2}, {1, 0.5f});
  HostBuffer out = MakeOut(Shape{2, 2});
  backend.GatedRmsNorm(x.view(), z.view(), w.view(), 0.0f, out.view());
  double r = std::sqrt(12.5);
  ExpectNearAll(Values(out.view()), {0.0, 4 / r * 0.5 * SiluD(2), 1.0 * 1.0 * SiluD(1), -1.0 * 0.5 * SiluD(-1)}, 1e-6);
  // silu(2) = 2 / (1 + e^-2) = 1.7615941559557649 by hand.
  EXPECT_NEAR(Values(out.view())[1], 4 / r * 0.5 * 1.7615941559557649, 1e-6);
}

TEST(CpuGatedRmsNorm, EpsAndWeightWithoutOffset) {
  CpuBackend backend(1);
  // x = [1, 1], eps = 3 -> normalised 0.5; z large -> silu(z) ~ z; w = 0 is not offset by one.
  HostBuffer x = MakeF32(Shape{1, 2}, {1, 1});
  HostBuffer z = MakeF32(Shape{1, 2}, {30, 30});
  HostBuffer w = MakeF32(Shape{2}, {0, 2});
  HostBuffer out = MakeOut(Shape{1, 2});
  backend.GatedRmsNorm(x.view(), z.view(), w.view(), 3.0f, out.view());
  ExpectNearAll(Values(out.view()), {0.0, 0.5 * 2 * 30}, 1e-4);
}

// ---- MatMul ----

TEST(CpuMatMul, HandComputedSmallCase) {
  CpuBackend backend(1);
  HostBuffer x = MakeF32(Shape{2, 3}, {1, 2, 3, -1, 0, 2});
  HostBuffer w = MakeF32(Shape{4, 3}, {1, 0, 0, 0, 1, 0, 1, 1, 1, 2, -1, 0.5f});
  HostBuffer out = MakeOut(Shape{2, 4});
  backend.MatMul(x.view(), w.view(), out.view());
  EXPECT_EQ(Values(out.view()), (std::vector<float>{1, 2, 6, 1.5f, -1, 0, 1, -1}));
}

struct MatMulCase {
  DType dtype;
  int64_t n, k, m;
};

class CpuMatMulRef : public ::testing::TestWithParam<MatMulCase> {};

TEST_P(CpuMatMulRef, MatchesDoubleLoop) {
  const MatMulCase c = GetParam();
  CpuBackend backend(2);
  std::vector<float> xv = Pseudo(static_cast<size_t>(c.n * c.k), 11, -2, 2);
  std::vector<float> wv = Grid(static_cast<size_t>(c.m * c.k), 12);  // exact in every weight dtype
  HostBuffer x = MakeF32(Shape{c.n, c.k}, xv);
  HostBuffer w = MakeWeight(c.dtype, Shape{c.m, c.k}, wv);
  HostBuffer out = MakeOut(Shape{c.n, c.m});
  backend.MatMul(x.view(), w.view(), out.view());
  std::vector<float> got = Values(out.view());
  for (int64_t i = 0; i < c.n; ++i) {
    for (int64_t j = 0; j < c.m; ++j) {
      double ref = 0, mag = 0;
      for (int64_t l = 0; l < c.k; ++l) {
        double p = double(xv[size_t(i * c.k + l)]) * wv[size_t(j * c.k + l)];
        ref += p;
        mag += std::fabs(p);
      }
      EXPECT_NEAR(got[size_t(i * c.m + j)], ref, 1e-5 * mag + 1e-30) << "row " << i << " col " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuMatMulRef,
                         ::testing::Values(MatMulCase{DType::kF32, 1, 13, 5}, MatMulCase{DType::kF32, 3, 37, 9},
                                           MatMulCase{DType::kBF16, 1, 13, 5}, MatMulCase{DType::kBF16, 4, 37, 9},
                                           MatMulCase{DType::kF16, 1, 19, 6}, MatMulCase{DType::kF16, 5, 45, 70},
                                           MatMulCase{DType::kF32, 2, 7, 3}, MatMulCase{DType::kBF16, 2, 64, 33}),
                         [](const ::testing::TestParamInfo<MatMulCase>& info) {
                           const MatMulCase& c = info.param;
                           return std::string(DTypeName(c.dtype)) + "_n" + std::to_string(c.n) + "_k" +
                                  std::to_string(c.k) + "_m" + std::to_string(c.m);
                         });

// ---- elementwise ----

TEST(CpuElementwise, Add) {
  CpuBackend backend(1);
  HostBuffer a = MakeF32(Shape{2, 2}, {1, 2, 3, 4});
  HostBuffer b = MakeF32(Shape{2, 2}, {0.5f, -2, 10, -4});
  HostBuffer out = MakeOut(Shape{2, 2});
  backend.Add(a.view(), b.view(), out.view());
  EXPECT_EQ(Values(out.view()), (std::vector<float>{1.5f, 0, 13, 0}));
  backend.Add(a.view(), b.view(), a.view());  // aliasing out == a
  EXPECT_EQ(Values(a.view()), (std::vector<float>{1.5f, 0, 13, 0}));
}

TEST(CpuElementwise, SiluMul) {
  CpuBackend backend(1);
  HostBuffer gate = MakeF32(Shape{4}, {0, 1, -2, 20});
  HostBuffer up = MakeF32(Shape{4}, {5, 2, 3, -1});
  HostBuffer out = MakeOut(Shape{4});
  backend.SiluMul(gate.view(), up.view(), out.view());
  // silu(1) = 1 / (1 + e^-1) = 0.7310585786; silu(-2) = -2 / (1 + e^2) = -0.2384058440.
  ExpectNearAll(Values(out.view()), {0.0, 2 * 0.7310585786300049, 3 * -0.2384058440442351, -SiluD(20)}, 1e-6);
}

TEST(CpuElementwise, SigmoidMulIncludingAliasing) {
  CpuBackend backend(1);
  HostBuffer x = MakeF32(Shape{2, 2}, {2, -4, 3, 1});
  HostBuffer gate = MakeF32(Shape{2, 2}, {0, std::log(3.0f), -std::log(3.0f), 40});
  HostBuffer out = MakeOut(Shape{2, 2});
  backend.SigmoidMul(x.view(), gate.view(), out.view());
  // sigmoid(0) = 1/2, sigmoid(ln 3) = 3/4, sigmoid(-ln 3) = 1/4, sigmoid(40) = 1.
  std::vector<double> want = {1.0, -3.0, 0.75, 1.0};
  ExpectNearAll(Values(out.view()), want, 1e-6);
  backend.SigmoidMul(x.view(), gate.view(), x.view());  // out aliases x
  ExpectNearAll(Values(x.view()), want, 1e-6);
}

TEST(CpuElementwise, AddSigmoidGatedScalesEachRowByItsGate) {
  CpuBackend backend(1);
  HostBuffer acc = MakeF32(Shape{3, 2}, {1, 1, 1, 1, 1, 1});
  HostBuffer x = MakeF32(Shape{3, 2}, {2, 4, 8, -8, 4, 4});
  HostBuffer gate = MakeF32(Shape{3, 1}, {0, std::log(3.0f), -100});
  backend.AddSigmoidGated(acc.view(), x.view(), gate.view());
  ExpectNearAll(Values(acc.view()), {1 + 1.0, 1 + 2.0, 1 + 6.0, 1 - 6.0, 1.0, 1.0}, 1e-6);
}

TEST(CpuSliceColumns, TakesAColumnRangeOfEveryRow) {
  CpuBackend backend(1);
  HostBuffer x = MakeF32(Shape{3, 5}, {0, 1, 2, 3, 4, 10, 11, 12, 13, 14, 20, 21, 22, 23, 24});
  HostBuffer out = MakeOut(Shape{3, 2});
  backend.SliceColumns(x.view(), 2, out.view());
  EXPECT_EQ(Values(out.view()), (std::vector<float>{2, 3, 12, 13, 22, 23}));
  HostBuffer last = MakeOut(Shape{3, 1});
  backend.SliceColumns(x.view(), 4, last.view());
  EXPECT_EQ(Values(last.view()), (std::vector<float>{4, 14, 24}));
  // Works on 16-bit data too (element size honoured).
  HostBuffer xb = MakeHalf(DType::kBF16, Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  HostBuffer ob(DType::kBF16, Shape{2, 2});
  backend.SliceColumns(xb.view(), 1, ob.view());
  const uint16_t* o = ob.view().as<const uint16_t>();
  EXPECT_EQ(Bf16ToF32(o[0]), 2.0f);
  EXPECT_EQ(Bf16ToF32(o[1]), 3.0f);
  EXPECT_EQ(Bf16ToF32(o[2]), 5.0f);
  EXPECT_EQ(Bf16ToF32(o[3]), 6.0f);
}

TEST(CpuGatherRows, PicksRowsInOrderWithRepeats) {
  CpuBackend backend(1);
  HostBuffer x = MakeF32(Shape{4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  HostBuffer out = MakeOut(Shape{3, 2});
  backend.GatherRows(x.view(), {3, 0, 3}, out.view());
  EXPECT_EQ(Values(out.view()), (std::vector<float>{30, 31, 0, 1, 30, 31}));
  HostBuffer one = MakeOut(Shape{1, 2});
  backend.GatherRows(x.view(), {2}, one.view());
  EXPECT_EQ(Values(one.view()), (std::vector<float>{20, 21}));
}

// ---- Rope ----

// Reference rotate-half RoPE in double (the angle as an f32 product, as the contract says).
std::vector<double> RefRope(const std::vector<float>& x, int64_t n, int64_t heads, int64_t d,
                            const std::vector<int32_t>& positions, const std::vector<float>& inv_freq, double scale) {
  std::vector<double> out = ToDouble(x);
  int64_t half = static_cast<int64_t>(inv_freq.size());
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      double* v = out.data() + (t * heads + h) * d;
      const float* src = x.data() + (t * heads + h) * d;
      for (int64_t i = 0; i < half; ++i) {
        float angle = static_cast<float>(positions[size_t(t)]) * inv_freq[size_t(i)];
        double c = std::cos(double(angle)) * scale, s = std::sin(double(angle)) * scale;
        v[i] = src[i] * c - src[i + half] * s;
        v[i + half] = src[i + half] * c + src[i] * s;
      }
    }
  }
  return out;
}

TEST(CpuRope, KnownAngleRotateHalfPairingAndPassThrough) {
  CpuBackend backend(1);
  // d = 6, inv_freq = [1, 0]: rotary_dim 4, pairs (0, 2) at angle pos * 1 and (1, 3) at angle 0;
  // dims 4, 5 pass through. Position 1 -> rotation by 1 rad.
  HostBuffer x = MakeF32(Shape{1, 1, 6}, {1, 2, 3, 4, 5, 6});
  HostBuffer inv = MakeF32(Shape{2}, {1, 0});
  backend.Rope(x.view(), OneSeq(1, 1), inv.view(), 1.0f);
  double c = std::cos(1.0), s = std::sin(1.0);
  ExpectNearAll(Values(x.view()), {1 * c - 3 * s, 2, 3 * c + 1 * s, 4, 5, 6}, 1e-6);
}

TEST(CpuRope, PositionZeroIsIdentityAndAttentionScaleMultipliesRotaryDims) {
  CpuBackend backend(1);
  std::vector<float> xv = {1, -2, 3, 0.5f, 7, -8};
  HostBuffer x = MakeF32(Shape{1, 1, 6}, xv);
  HostBuffer inv = MakeF32(Shape{2}, {1, 0.5f});
  backend.Rope(x.view(), OneSeq(1, 0), inv.view(), 1.0f);
  EXPECT_EQ(Values(x.view()), xv);
  backend.Rope(x.view(), OneSeq(1, 0), inv.view(), 2.0f);
  // cos 0 * 2 = 2 on the rotary dims [0, 4); dims 4, 5 are untouched.
  ExpectNearAll(Values(x.view()), {2, -4, 6, 1, 7, -8}, 1e-6);
}

TEST(CpuRope, PerTokenPositionsFromLayoutAcrossSequencesAndHeads) {
  CpuBackend backend(2);
  const int64_t heads = 3, d = 8;
  // Two sequences: tokens 0-2 at positions 0, 1, 2 (slot 0); tokens 3-4 at positions 7, 8 (slot 1).
  BatchLayout layout = Layout({BatchSeq{.slot = 0, .token_begin = 0, .n_tokens = 3, .pos_begin = 0},
                               BatchSeq{.slot = 1, .token_begin = 3, .n_tokens = 2, .pos_begin = 7}});
  ASSERT_EQ(layout.positions, (std::vector<int32_t>{0, 1, 2, 7, 8}));
  const int64_t n = layout.n_tokens;
  std::vector<float> xv = Pseudo(static_cast<size_t>(n * heads * d), 21);
  std::vector<float> inv_freq = {1.0f, 0.1f, 0.01f};  // rotary_dim 6 of head_dim 8
  HostBuffer x = MakeF32(Shape{n, heads, d}, xv);
  HostBuffer inv = MakeF32(Shape{3}, inv_freq);
  backend.Rope(x.view(), layout, inv.view(), 1.25f);
  std::vector<float> got = Values(x.view());
  ExpectNearAll(got, RefRope(xv, n, heads, d, layout.positions, inv_freq, 1.25), 1e-5);
  // Dims 6, 7 of every head pass through unchanged, bit for bit.
  for (int64_t r = 0; r < n * heads; ++r) {
    EXPECT_EQ(got[size_t(r * d + 6)], xv[size_t(r * d + 6)]);
    EXPECT_EQ(got[size_t(r * d + 7)], xv[size_t(r * d + 7)]);
  }
}

TEST(CpuRope, RotationPreservesPairNormsAtUnitScale) {
  CpuBackend backend(1);
  std::vector<float> xv = Pseudo(2 * 4, 5);
  HostBuffer x = MakeF32(Shape{2, 1, 4}, xv);
  HostBuffer inv = MakeF32(Shape{2}, {0.7f, 0.3f});
  backend.Rope(x.view(), OneSeq(2, 5), inv.view(), 1.0f);
  std::vector<float> got = Values(x.view());
  for (int t = 0; t < 2; ++t)
    for (int i = 0; i < 2; ++i) {
      double before = std::hypot(xv[size_t(t * 4 + i)], xv[size_t(t * 4 + i + 2)]);
      double after = std::hypot(got[size_t(t * 4 + i)], got[size_t(t * 4 + i + 2)]);
      EXPECT_NEAR(after, before, 1e-6);
    }
}

// ---- MoE ----

TEST(CpuMoeRouting, SoftmaxTopKDescendingWithAndWithoutNormalisation) {
  CpuBackend backend(1);
  // logits = ln [1, 2, 3, 4] -> p = [0.1, 0.2, 0.3, 0.4].
  HostBuffer logits = MakeF32(Shape{1, 4}, {0, std::log(2.0f), std::log(3.0f), std::log(4.0f)});
  HostBuffer w = MakeOut(Shape{1, 2});
  HostBuffer ids = MakeI32(Shape{1, 2}, {-1, -1});
  backend.MoeRouting(logits.view(), 2, false, w.view(), ids.view());
  EXPECT_EQ(IntValues(ids.view()), (std::vector<int32_t>{3, 2}));
  ExpectNearAll(Values(w.view()), {0.4, 0.3}, 1e-6);
  backend.MoeRouting(logits.view(), 2, true, w.view(), ids.view());
  EXPECT_EQ(IntValues(ids.view()), (std::vector<int32_t>{3, 2}));
  ExpectNearAll(Values(w.view()), {4.0 / 7, 3.0 / 7}, 1e-6);
  HostBuffer w3 = MakeOut(Shape{1, 3});
  HostBuffer ids3 = MakeI32(Shape{1, 3}, {-1, -1, -1});
  backend.MoeRouting(logits.view(), 3, true, w3.view(), ids3.view());
  EXPECT_EQ(IntValues(ids3.view()), (std::vector<int32_t>{3, 2, 1}));
  ExpectNearAll(Values(w3.view()), {4.0 / 9, 3.0 / 9, 2.0 / 9}, 1e-6);
}

TEST(CpuMoeRouting, TiesGoToTheLowerExpertIdAndRowsAreIndependent) {
  CpuBackend backend(1);
  // Row 0: [1, 3, 2, 3]: experts 1 and 3 tie for first. Row 1: all equal -> ids 0, 1, weight 1/4 each.
  // Row 2: a shifted copy of row 0 (softmax is shift invariant).
  HostBuffer logits = MakeF32(Shape{3, 4}, {1, 3, 2, 3, 5, 5, 5, 5, 101, 103, 102, 103});
  HostBuffer w = MakeOut(Shape{3, 2});
  HostBuffer ids = MakeI32(Shape{3, 2}, {-1, -1, -1, -1, -1, -1});
  backend.MoeRouting(logits.view(), 2, false, w.view(), ids.view());
  EXPECT_EQ(IntValues(ids.view()), (std::vector<int32_t>{1, 3, 0, 1, 1, 3}));
  double e = std::exp(1.0), z = e + e * e * e + e * e + e * e * e;
  double p_top = e * e * e / z;
  ExpectNearAll(Values(w.view()), {p_top, p_top, 0.25, 0.25, p_top, p_top}, 1e-6);
}

// Reference SwiGLU expert in double: down (silu(gate x) * up x).
std::vector<double> RefExpert(const std::vector<float>& x, const std::vector<float>& gate, const std::vector<float>& up,
                              const std::vector<float>& down, int64_t hidden, int64_t inter) {
  std::vector<double> act(static_cast<size_t>(inter)), out(static_cast<size_t>(hidden), 0.0);
  for (int64_t i = 0; i < inter; ++i) {
    double gv = 0, uv = 0;
    for (int64_t j = 0; j < hidden; ++j) {
      gv += double(gate[size_t(i * hidden + j)]) * x[size_t(j)];
      uv += double(up[size_t(i * hidden + j)]) * x[size_t(j)];
    }
    act[size_t(i)] = SiluD(gv) * uv;
  }
  for (int64_t o = 0; o < hidden; ++o)
    for (int64_t i = 0; i < inter; ++i) out[size_t(o)] += down[size_t(o * inter + i)] * act[size_t(i)];
  return out;
}

TEST(CpuMoeExperts, HandSetExpertsWeightedByRouting) {
  CpuBackend backend(1);
  // H = 2, I = 2. Every expert: gate = up = identity, so act = silu(x) * x; down_e = s_e * identity
  // with s = [1, 1000, 3]: expert 1 is never routed, so a misrouting shows up as a huge value.
  const std::vector<float> eye = {1, 0, 0, 1};
  std::vector<HostBuffer> buffers;
  ExpertWeights experts;
  for (float s : {1.0f, 1000.0f, 3.0f}) {
    buffers.push_back(MakeF32(Shape{2, 2}, eye));
    experts.gate.push_back(buffers.back().view());
    buffers.push_back(MakeF32(Shape{2, 2}, eye));
    experts.up.push_back(buffers.back().view());
    buffers.push_back(MakeF32(Shape{2, 2}, {s, 0, 0, s}));
    experts.down.push_back(buffers.back().view());
  }
  // Token 0: x = [1, 2], experts [2, 0] with weights [0.75, 0.25]. Token 1: x = [-1, 0], expert 0 only
  // (second slot: expert 2 with weight 0).
  HostBuffer x = MakeF32(Shape{2, 2}, {1, 2, -1, 0});
  HostBuffer weights = MakeF32(Shape{2, 2}, {0.75f, 0.25f, 1.0f, 0.0f});
  HostBuffer ids = MakeI32(Shape{2, 2}, {2, 0, 0, 2});
  HostBuffer out = MakeOut(Shape{2, 2});
  backend.MoeExperts(x.view(), weights.view(), ids.view(), experts, out.view());
  double f = 0.75 * 3 + 0.25 * 1;  // 2.5
  ExpectNearAll(Values(out.view()), {f * SiluD(1) * 1, f * SiluD(2) * 2, SiluD(-1) * -1, 0.0}, 1e-5);
}

TEST(CpuMoeExperts, GeneralWeightsMatchDoubleReference) {
  CpuBackend backend(2);
  const int64_t n = 3, hidden = 11, inter = 6, n_experts = 4, top_k = 2;
  std::vector<HostBuffer> buffers;
  std::vector<std::vector<float>> gv, uv, dv;
  ExpertWeights experts;
  for (int64_t e = 0; e < n_experts; ++e) {
    gv.push_back(Grid(size_t(inter * hidden), uint32_t(200 + e)));
    uv.push_back(Grid(size_t(inter * hidden), uint32_t(300 + e)));
    dv.push_back(Grid(size_t(hidden * inter), uint32_t(400 + e)));
    DType dtype = e % 2 ? DType::kBF16 : DType::kF32;
    buffers.push_back(MakeWeight(dtype, Shape{inter, hidden}, gv.back()));
    experts.gate.push_back(buffers.back().view());
    buffers.push_back(MakeWeight(dtype, Shape{inter, hidden}, uv.back()));
    experts.up.push_back(buffers.back().view());
    buffers.push_back(MakeWeight(dtype, Shape{hidden, inter}, dv.back()));
    experts.down.push_back(buffers.back().view());
  }
  std::vector<float> xv = Pseudo(size_t(n * hidden), 500, -0.5f, 0.5f);
  std::vector<float> wv = {0.6f, 0.4f, 0.9f, 0.1f, 0.5f, 0.5f};
  std::vector<int32_t> idv = {3, 1, 0, 2, 2, 3};
  HostBuffer x = MakeF32(Shape{n, hidden}, xv);
  HostBuffer weights = MakeF32(Shape{n, top_k}, wv);
  HostBuffer ids = MakeI32(Shape{n, top_k}, idv);
  HostBuffer out = MakeOut(Shape{n, hidden});
  backend.MoeExperts(x.view(), weights.view(), ids.view(), experts, out.view());
  std::vector<double> want(size_t(n * hidden), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    std::vector<float> xt(xv.begin() + t * hidden, xv.begin() + (t + 1) * hidden);
    for (int64_t j = 0; j < top_k; ++j) {
      size_t e = size_t(idv[size_t(t * top_k + j)]);
      std::vector<double> y = RefExpert(xt, gv[e], uv[e], dv[e], hidden, inter);
      for (int64_t o = 0; o < hidden; ++o) want[size_t(t * hidden + o)] += wv[size_t(t * top_k + j)] * y[size_t(o)];
    }
  }
  ExpectNearAll(Values(out.view()), want, 1e-4, 1e-5);
}

}  // namespace
}  // namespace infernix
