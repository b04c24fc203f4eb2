// Dummy weights: deterministic in the seed and the name, scaled as documented, and made on the host where
// the backend cannot make them itself (the CPU backend; the CUDA backend's fill is compared with the
// host's bits in tests/gpu_model_test.cpp).
#include "model/dummy_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "tensor/dtype.h"

namespace infernix {
namespace {

const char* kDown = "model.layers.0.mlp.down_proj.weight";

std::vector<uint16_t> Bits(const Tensor& t) {
  std::vector<uint16_t> v(static_cast<size_t>(t.shape.numel()));
  std::memcpy(v.data(), t.data, v.size() * 2);
  return v;
}

TEST(DummyWeights, SameSeedAndNameSameBits) {
  ModelConfig c;
  DummyWeightSource a(c, 7), b(c, 7), other_seed(c, 8);
  const Shape s{300, 1024};
  const auto bits = Bits(a.Get(kDown, s));
  EXPECT_EQ(bits, Bits(b.Get(kDown, s)));
  EXPECT_NE(bits, Bits(other_seed.Get(kDown, s)));
  EXPECT_NE(bits, Bits(a.Get("model.layers.1.mlp.down_proj.weight", s)));
  EXPECT_EQ(bits, Bits(a.Get(kDown, s)));  // kept: the same tensor again
}

TEST(DummyWeights, ProjectionsAreUniformWithUnitVarianceOutputs) {
  ModelConfig c;
  DummyWeightSource src(c, 1);
  const Shape s{256, 1024};
  const Tensor t = src.Get(kDown, s);
  ASSERT_EQ(t.dtype, DType::kBF16);
  const float bound = std::sqrt(3.0f / 1024.0f);  // uniform in [-bound, bound): variance 1 / 1024 per weight
  double sum = 0, sum2 = 0;
  for (uint16_t b : Bits(t)) {
    const float v = Bf16ToF32(b);
    ASSERT_LE(std::fabs(v), bound * (1.0f + 1.0f / 128.0f));  // bf16 rounding of the bound
    sum += v;
    sum2 += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(s.numel());
  EXPECT_NEAR(sum / n, 0.0, 0.01 * bound);
  EXPECT_NEAR(sum2 / n, bound * bound / 3.0, 0.02 * bound * bound / 3.0);
}

TEST(DummyWeights, NormsAreNearOne) {
  ModelConfig c;
  DummyWeightSource src(c, 1);
  for (uint16_t b : Bits(src.Get("model.norm.weight", {4096}))) {
    const float v = Bf16ToF32(b);
    ASSERT_GE(v, 0.89f);
    ASSERT_LE(v, 1.11f);
  }
}

TEST(DummyWeights, TheCpuBackendTakesTheHostTensors) {
  ModelConfig c;
  DummyWeightSource src(c, 1);
  CpuBackend cpu;
  EXPECT_FALSE(src.MakeOnBackend(kDown, {2048, 1024}, cpu).has_value());
  EXPECT_FALSE(cpu.MakeDummyWeight(DType::kBF16, {2048, 1024}, 1, 1.0f).has_value());
  DummyWeightSource quantized(c, 1, DType::kQ4_K);
  EXPECT_FALSE(quantized.MakeOnBackend(kDown, {2048, 1024}, cpu).has_value());
}

}  // namespace
}  // namespace infernix
