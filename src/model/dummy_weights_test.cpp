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

// With a GGUF block type the routers are f32, as llama.cpp's files keep them (made on the host: the CUDA
// backend makes only bf16 and block types); FP8 checkpoints keep them in bf16.
TEST(DummyWeights, GgufTypesKeepTheRoutersInF32) {
  ModelConfig c;
  const char* router = "model.layers.0.mlp.gate.weight";
  const char* shared_gate = "model.layers.0.mlp.shared_expert_gate.weight";
  CpuBackend cpu;
  for (DType t : {DType::kQ4_K, DType::kQ8_0}) {
    DummyWeightSource src(c, 3, t);
    const Tensor r = src.Get(router, {512, 2048});
    ASSERT_EQ(r.dtype, DType::kF32) << DTypeName(t);
    EXPECT_EQ(src.Get(shared_gate, {1, 2048}).dtype, DType::kF32);
    EXPECT_EQ(src.Get(kDown, {2048, 512}).dtype, t);
    const float bound = std::sqrt(3.0f / 2048.0f);
    bool varied = false;
    for (int64_t i = 0; i < r.shape.numel(); ++i) {
      const float v = r.as<float>()[i];
      ASSERT_LT(std::fabs(v), bound);
      varied |= v != Bf16ToF32(F32ToBf16(v));  // not bf16 values widened
    }
    EXPECT_TRUE(varied);
    EXPECT_FALSE(src.MakeOnBackend(router, {512, 2048}, cpu).has_value());
  }
  DummyWeightSource fp8(c, 3, DType::kF8E4M3B128);
  EXPECT_EQ(fp8.Get(router, {512, 2048}).dtype, DType::kBF16);
  DummyWeightSource bf16(c, 3);
  EXPECT_EQ(bf16.Get(router, {512, 2048}).dtype, DType::kBF16);
}

}  // namespace
}  // namespace infernix
