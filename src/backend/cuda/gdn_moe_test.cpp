// CPU-vs-CUDA tests of the Gated DeltaNet ops (conv1d and the delta rule carry state across calls:
// prefill, decode, mixed batches) and of the mixture-of-experts ops, at Qwen3-Next-like shapes.
#include <algorithm>
#include <cmath>
#include <set>

#include "backend/cuda/test_util.h"

#include <fmt/format.h>

namespace infernix {
namespace {

using cuda_test::ExpectClose;
using cuda_test::LinearSpec;
using cuda_test::MakeLayout;
using cuda_test::Pair;
using cuda_test::Rand;
using cuda_test::Rig;

const std::vector<std::vector<std::array<int64_t, 3>>> kSteps = {
    {{0, 10, 0}},                         // prefill
    {{0, 1, 10}},                         // decode
    {{1, 2, 0}, {0, 1, 11}, {2, 7, 0}},   // shorter than the conv window, decode, fresh
    {{1, 3, 2}, {2, 1, 7}},               // continuations
};

TEST(CudaGdn, CausalConv1dCarriesItsWindow) {
  INFX_REQUIRE_GPU();
  for (int kernel : {4, 2}) {
    Rig rig;
    const int channels = 2 * 16 * 128 + 32 * 128;  // Qwen3-Next: 2 * key_dim + value_dim
    StateSpec spec = LinearSpec(channels, kernel, 16, 32, 128, 128);
    auto cs = rig.cpu.CreateState(spec);
    auto gs = rig.gpu.CreateState(spec);
    auto w = rig.Weight(DType::kBF16, {channels, 1, kernel}, Rand(static_cast<size_t>(channels) * kernel, 500, -0.5f, 0.5f));
    for (size_t i = 0; i < kSteps.size(); ++i) {
      BatchLayout layout = MakeLayout(kSteps[i]);
      const int64_t n = layout.n_tokens;
      auto x = rig.Act({n, channels}, Rand(n * channels, 510 + i, -2, 2));
      auto out = rig.Out({n, channels});
      rig.cpu.CausalConv1d(x.cpu, w.cpu, *cs, 1, layout, out.cpu);
      rig.gpu.CausalConv1d(x.gpu, w.gpu, *gs, 1, layout, out.gpu);
      cs->Advance(layout);
      gs->Advance(layout);
      ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), 4e-3, 1e-2,
                  "CausalConv1d K=" + std::to_string(kernel) + " step " + std::to_string(i));
    }
    // A cleared slot starts from a zero window again.
    cs->ClearSlot(0);
    gs->ClearSlot(0);
    BatchLayout layout = MakeLayout({{0, 3, 0}});
    auto x = rig.Act({3, channels}, Rand(3 * channels, 520, -2, 2));
    auto out = rig.Out({3, channels});
    rig.cpu.CausalConv1d(x.cpu, w.cpu, *cs, 1, layout, out.cpu);
    rig.gpu.CausalConv1d(x.gpu, w.gpu, *gs, 1, layout, out.gpu);
    ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), 4e-3, 1e-2, "CausalConv1d after ClearSlot");
  }
}

TEST(CudaGdn, Gates) {
  INFX_REQUIRE_GPU();
  Rig rig;
  const int64_t n = 9, nv = 32;
  auto a = rig.Act({n, nv}, Rand(n * nv, 600, -30, 30));  // both sides of softplus' threshold
  auto b = rig.Act({n, nv}, Rand(n * nv, 601, -6, 6));
  auto a_log = rig.Weight(DType::kBF16, {nv}, Rand(nv, 602, -1, 2));
  auto dt_bias = rig.Weight(DType::kF32, {nv}, Rand(nv, 603, -1, 1));
  auto g = rig.Out({n, nv}, DType::kF32);
  auto beta = rig.Out({n, nv}, DType::kF32);
  rig.cpu.GdnGates(a.cpu, b.cpu, a_log.cpu, dt_bias.cpu, g.cpu, beta.cpu);
  rig.gpu.GdnGates(a.gpu, b.gpu, a_log.gpu, dt_bias.gpu, g.gpu, beta.gpu);
  ExpectClose(rig.Gpu(g.gpu), Rig::Cpu(g.cpu), 1e-5, 1e-5, "GdnGates g");
  ExpectClose(rig.Gpu(beta.gpu), Rig::Cpu(beta.cpu), 1e-5, 1e-5, "GdnGates beta");
}

void CheckDeltaRule(int nk, int nv, int dk, int dv, uint64_t seed, GdnHeadMapping mapping = GdnHeadMapping::kGrouped) {
  Rig rig;
  StateSpec spec = LinearSpec(2 * nk * dk + nv * dv, 4, nk, nv, dk, dv);
  auto cs = rig.cpu.CreateState(spec);
  auto gs = rig.gpu.CreateState(spec);
  for (size_t i = 0; i < kSteps.size(); ++i) {
    BatchLayout layout = MakeLayout(kSteps[i]);
    const int64_t n = layout.n_tokens;
    auto q = rig.Act({n, nk, dk}, Rand(n * nk * dk, seed + 10 * i, -1, 1));
    auto k = rig.Act({n, nk, dk}, Rand(n * nk * dk, seed + 10 * i + 1, -1, 1));
    auto v = rig.Act({n, nv, dv}, Rand(n * nv * dv, seed + 10 * i + 2, -2, 2));
    auto g = rig.F32({n, nv}, Rand(n * nv, seed + 10 * i + 3, -2, 0));
    auto beta = rig.F32({n, nv}, Rand(n * nv, seed + 10 * i + 4, 0, 1));
    auto out = rig.Out({n, nv, dv});
    rig.cpu.GatedDeltaRule(q.cpu, k.cpu, v.cpu, g.cpu, beta.cpu, mapping, *cs, 0, layout, out.cpu);
    rig.gpu.GatedDeltaRule(q.gpu, k.gpu, v.gpu, g.gpu, beta.gpu, mapping, *gs, 0, layout, out.gpu);
    cs->Advance(layout);
    gs->Advance(layout);
    ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), 5e-3, 2e-2,
                fmt::format("GatedDeltaRule nk={} nv={} dk={} dv={} tiled={} step {}", nk, nv, dk, dv,
                            mapping == GdnHeadMapping::kTiled, i));
  }
}

TEST(CudaGdn, GatedDeltaRuleCarriesItsState) {
  INFX_REQUIRE_GPU();
  CheckDeltaRule(16, 32, 128, 128, 700);  // Qwen3-Next
  CheckDeltaRule(2, 4, 16, 16, 710);      // the embedded e2e model
  CheckDeltaRule(2, 2, 192, 64, 720);     // dk > 128: state updated in global memory
}

// llama.cpp's qwen35 GGUF files: value head h uses key head h % nk.
TEST(CudaGdn, GatedDeltaRuleTiledHeadsMatchTheOracle) {
  INFX_REQUIRE_GPU();
  CheckDeltaRule(16, 48, 128, 128, 730, GdnHeadMapping::kTiled);  // Qwen3.5-35B-A3B-like (nv / nk = 3)
  CheckDeltaRule(2, 4, 16, 16, 740, GdnHeadMapping::kTiled);
  CheckDeltaRule(2, 6, 192, 64, 750, GdnHeadMapping::kTiled);     // dk > 128: state in global memory
}

// The flag reaches the kernel: with nv > nk the two mappings give different outputs on the GPU.
TEST(CudaGdn, GatedDeltaRuleMappingsDiffer) {
  INFX_REQUIRE_GPU();
  Rig rig;
  const int nk = 2, nv = 4, dk = 16, dv = 16;
  StateSpec spec = LinearSpec(2 * nk * dk + nv * dv, 4, nk, nv, dk, dv);
  BatchLayout layout = MakeLayout({{0, 3, 0}});
  const int64_t n = layout.n_tokens;
  auto q = rig.Act({n, nk, dk}, Rand(n * nk * dk, 760, -1, 1));
  auto k = rig.Act({n, nk, dk}, Rand(n * nk * dk, 761, -1, 1));
  auto v = rig.Act({n, nv, dv}, Rand(n * nv * dv, 762, -2, 2));
  auto g = rig.F32({n, nv}, Rand(n * nv, 763, -2, 0));
  auto beta = rig.F32({n, nv}, Rand(n * nv, 764, 0, 1));
  auto grouped = rig.Out({n, nv, dv});
  auto tiled = rig.Out({n, nv, dv});
  auto gs = rig.gpu.CreateState(spec);
  auto ts = rig.gpu.CreateState(spec);
  rig.gpu.GatedDeltaRule(q.gpu, k.gpu, v.gpu, g.gpu, beta.gpu, GdnHeadMapping::kGrouped, *gs, 0, layout, grouped.gpu);
  rig.gpu.GatedDeltaRule(q.gpu, k.gpu, v.gpu, g.gpu, beta.gpu, GdnHeadMapping::kTiled, *ts, 0, layout, tiled.gpu);
  std::vector<float> a = rig.Gpu(grouped.gpu), b = rig.Gpu(tiled.gpu);
  ASSERT_EQ(a.size(), b.size());
  // Value head 0 uses key head 0 in both mappings (equal); value head 1 uses key head 0 vs 1 (different).
  double diff0 = 0, diff1 = 0;
  for (int64_t t = 0; t < n; ++t)
    for (int c = 0; c < dv; ++c) {
      diff0 = std::max(diff0, std::abs(double(a[size_t((t * nv + 0) * dv + c)]) - b[size_t((t * nv + 0) * dv + c)]));
      diff1 = std::max(diff1, std::abs(double(a[size_t((t * nv + 1) * dv + c)]) - b[size_t((t * nv + 1) * dv + c)]));
    }
  EXPECT_EQ(diff0, 0.0);
  EXPECT_GT(diff1, 1e-2);
}

TEST(CudaMoe, RoutingMatchesTheOracle) {
  INFX_REQUIRE_GPU();
  Rig rig;
  struct Case {
    int64_t n, experts;
    int top_k;
    bool normalize;
  };
  // 512 / 128 / 60 / 8 experts take the register kernel (16 / 4 / 2 / 1 per lane), 1100 the general
  // one; the last case ties every logit (the lower expert id wins, as in the CPU's stable sort).
  for (Case c : {Case{9, 512, 10, true}, Case{9, 128, 8, false}, Case{7, 60, 4, true}, Case{5, 8, 2, true},
                 Case{3, 1100, 8, true}, Case{2, 96, 6, true}}) {
    std::vector<float> values = Rand(c.n * c.experts, 800 + c.experts, -4, 4);
    if (c.experts == 96) values.assign(values.size(), 0.5f);
    auto logits = rig.F32({c.n, c.experts}, values);
    auto w = rig.Out({c.n, c.top_k}, DType::kF32);
    auto ids_cpu = rig.I32({c.n, c.top_k}, std::vector<int32_t>(static_cast<size_t>(c.n * c.top_k), -1));
    rig.cpu.MoeRouting(logits.cpu, c.top_k, c.normalize, w.cpu, ids_cpu.cpu);
    rig.gpu.MoeRouting(logits.gpu, c.top_k, c.normalize, w.gpu, ids_cpu.gpu);
    EXPECT_EQ(rig.Gpu(ids_cpu.gpu), Rig::Cpu(ids_cpu.cpu)) << c.experts << " experts";
    ExpectClose(rig.Gpu(w.gpu), Rig::Cpu(w.cpu), 1e-5, 1e-5, "MoeRouting weights E=" + std::to_string(c.experts));
  }
}

TEST(CudaMoe, ExpertsMatchTheOracle) {
  INFX_REQUIRE_GPU();
  Rig rig;
  const int64_t n = 5, hidden = 2048, inter = 256, experts = 16, top_k = 4;
  std::vector<std::unique_ptr<HostBuffer>> keep;
  ExpertWeights cpu_w, gpu_w;
  float s_in = 1.0f / std::sqrt(static_cast<float>(hidden)), s_out = 1.0f / std::sqrt(static_cast<float>(inter));
  for (int64_t e = 0; e < experts; ++e) {
    Pair g = rig.Weight(DType::kBF16, {inter, hidden}, Rand(inter * hidden, 900 + 3 * e, -s_in, s_in));
    Pair u = rig.Weight(DType::kBF16, {inter, hidden}, Rand(inter * hidden, 901 + 3 * e, -s_in, s_in));
    Pair d = rig.Weight(DType::kBF16, {hidden, inter}, Rand(hidden * inter, 902 + 3 * e, -s_out, s_out));
    cpu_w.gate.push_back(g.cpu);
    cpu_w.up.push_back(u.cpu);
    cpu_w.down.push_back(d.cpu);
    gpu_w.gate.push_back(g.gpu);
    gpu_w.up.push_back(u.gpu);
    gpu_w.down.push_back(d.gpu);
  }
  auto x = rig.Act({n, hidden}, Rand(n * hidden, 950, -2, 2));
  std::vector<int32_t> ids = {0, 15, 3, 7, 1, 2, 3, 4, 15, 14, 13, 12, 5, 5 + 1, 9, 10, 0, 8, 15, 11};
  auto id = rig.I32({n, top_k}, ids);
  auto w = rig.F32({n, top_k}, Rand(n * top_k, 951, 0, 1));
  auto out = rig.Out({n, hidden});
  rig.cpu.MoeExperts(x.cpu, w.cpu, id.cpu, cpu_w, out.cpu);
  rig.gpu.MoeExperts(x.gpu, w.gpu, id.gpu, gpu_w, out.gpu);
  ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), 5e-3, 1.5e-2, "MoeExperts");
  // The second call reuses the cached expert table.
  rig.gpu.MoeExperts(x.gpu, w.gpu, id.gpu, gpu_w, out.gpu);
  ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), 5e-3, 1.5e-2, "MoeExperts again");
}

}  // namespace
}  // namespace infernix
