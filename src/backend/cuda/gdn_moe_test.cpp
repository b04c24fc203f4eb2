// CPU-vs-CUDA tests of the Gated DeltaNet ops (conv1d and the delta rule carry state across calls:
// prefill, decode, mixed batches) and of the mixture-of-experts ops, at Qwen3-Next-like shapes.
#include <algorithm>
#include <cmath>
#include <set>

#include "backend/cuda/test_util.h"
#include "quant/random_blocks.h"

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

// The decode conv of the product that makes its input (DeltaNet's in_proj_qkv, with in_proj_z beside it
// in the same launch), which the backend computes in that GEMV: the product, the conv's output and, through
// the next steps, the conv state against the CPU; after a prefill (unfused), with the norm before the
// product as the GEMV's prologue or not; bf16 or FP8 (f8_e4m3_b128) projection weights.
void CheckConvAfterItsProduct(bool norm_first, DType w_type, uint64_t seed) {
  Rig rig;
  const int nk = 2, nv = 4, dk = 64, dv = 64, hidden = 512;
  const int channels = 2 * nk * dk + nv * dv, kernel = 4;
  StateSpec spec = LinearSpec(channels, kernel, nk, nv, dk, dv);
  auto cs = rig.cpu.CreateState(spec);
  auto gs = rig.gpu.CreateState(spec);
  const float s_in = 1.0f / std::sqrt(static_cast<float>(hidden));
  std::vector<HostBuffer> packed;  // FP8: the blocks the weights were uploaded from
  auto projection = [&](int64_t rows, uint64_t sd) {
    if (w_type == DType::kBF16)
      return rig.Weight(DType::kBF16, {rows, hidden}, Rand(static_cast<size_t>(rows) * hidden, sd, -s_in, s_in));
    packed.push_back(RandomQuantBlocks(w_type, rows, hidden, sd, s_in));
    return rig.Packed(packed.back());
  };
  auto w_qkv = projection(channels, seed);
  auto w_z = projection(nv * dv, seed + 1);
  auto conv_w = rig.Weight(DType::kBF16, {channels, 1, kernel}, Rand(static_cast<size_t>(channels) * kernel, seed + 2, -0.5f, 0.5f));
  auto norm_w = rig.Weight(DType::kBF16, {hidden}, Rand(hidden, seed + 3, 0.5f, 1.5f));
  const std::vector<std::vector<std::array<int64_t, 3>>> steps = {
      {{0, 6, 0}, {1, 2, 0}}, {{0, 1, 6}, {1, 1, 2}}, {{0, 1, 7}}, {{1, 1, 3}, {0, 1, 8}, {2, 1, 0}}};
  for (size_t i = 0; i < steps.size(); ++i) {
    BatchLayout layout = MakeLayout(steps[i]);
    const int64_t n = layout.n_tokens;
    auto x = rig.Act({n, hidden}, Rand(n * hidden, seed + 10 + i, -2, 2));
    auto normed = rig.Out({n, hidden});
    auto mixed = rig.Out({n, channels});
    auto z = rig.Out({n, nv * dv});
    auto conv = rig.Out({n, channels});
    for (bool gpu : {false, true}) {
      Backend& be = gpu ? static_cast<Backend&>(rig.gpu) : static_cast<Backend&>(rig.cpu);
      auto pick = [&](const Pair& p) { return gpu ? p.gpu : p.cpu; };
      Tensor in = pick(x);
      if (norm_first) {
        be.RmsNorm(pick(x), pick(norm_w), 1e-6f, true, pick(normed));
        in = pick(normed);
      }
      be.MatMul(in, pick(w_qkv), pick(mixed));
      be.MatMul(in, pick(w_z), pick(z));
      be.CausalConv1d(pick(mixed), pick(conv_w), gpu ? *gs : *cs, 1, layout, pick(conv));
    }
    cs->Advance(layout);
    gs->Advance(layout);
    const std::string what = fmt::format("{} norm_first={} step {}", DTypeName(w_type), norm_first, i);
    ExpectClose(rig.Gpu(mixed.gpu), Rig::Cpu(mixed.cpu), 4e-3, 1.5e-2, "conv input " + what);
    ExpectClose(rig.Gpu(z.gpu), Rig::Cpu(z.cpu), 4e-3, 1.5e-2, "the product beside it " + what);
    ExpectClose(rig.Gpu(conv.gpu), Rig::Cpu(conv.cpu), 6e-3, 2e-2, "conv output " + what);
  }
}

TEST(CudaGdn, DecodeConvAfterItsProduct) {
  INFX_REQUIRE_GPU();
  for (DType w_type : {DType::kBF16, DType::kF8E4M3B128}) {
    CheckConvAfterItsProduct(false, w_type, 900);
    CheckConvAfterItsProduct(true, w_type, 950);
  }
}

// A decode step's gates, delta rule and gated norm, which the backend fuses into one kernel (the gates
// computed per head inside it, the norm by the last column block of each head): g, beta, the delta rule's
// output and the normalised output against the CPU, step after step (the state carries on), after a
// prefill that takes the unfused path; also with the norm not following (the fused kernel without it).
void CheckDecodeTail(int nk, int nv, int dk, int dv, GdnHeadMapping mapping, uint64_t seed) {
  Rig rig;
  StateSpec spec = LinearSpec(2 * nk * dk + nv * dv, 4, nk, nv, dk, dv);
  auto cs = rig.cpu.CreateState(spec);
  auto gs = rig.gpu.CreateState(spec);
  auto a_log = rig.Weight(DType::kBF16, {nv}, Rand(nv, seed, -1, 1));
  auto dt_bias = rig.Weight(DType::kF32, {nv}, Rand(nv, seed + 1, -1, 1));
  auto norm_w = rig.Weight(DType::kBF16, {dv}, Rand(dv, seed + 2, 0.5f, 1.5f));
  const std::vector<std::vector<std::array<int64_t, 3>>> steps = {
      {{0, 10, 0}, {1, 4, 0}, {2, 40, 0}},  // prefill: unfused
      {{0, 1, 10}, {1, 1, 4}, {2, 1, 40}},  // decode: fused
      {{0, 1, 11}, {1, 1, 5}, {2, 1, 41}},
      {{2, 1, 42}},
      {{1, 1, 6}, {0, 1, 12}},
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    BatchLayout layout = MakeLayout(steps[i]);
    const int64_t n = layout.n_tokens;
    const uint64_t sd = seed + 100 * (i + 1);
    auto q = rig.Act({n, nk, dk}, Rand(n * nk * dk, sd, -1, 1));
    auto k = rig.Act({n, nk, dk}, Rand(n * nk * dk, sd + 1, -1, 1));
    auto v = rig.Act({n, nv, dv}, Rand(n * nv * dv, sd + 2, -2, 2));
    auto a = rig.Act({n, nv}, Rand(n * nv, sd + 3, -4, 4));
    auto b = rig.Act({n, nv}, Rand(n * nv, sd + 4, -4, 4));
    auto z = rig.Act({n * nv, dv}, Rand(n * nv * dv, sd + 5, -3, 3));
    auto g = rig.Out({n, nv}, DType::kF32);
    auto beta = rig.Out({n, nv}, DType::kF32);
    auto core = rig.Out({n, nv, dv});
    auto normed = rig.Out({n * nv, dv});
    const bool with_norm = i != 3;
    for (bool gpu : {false, true}) {
      Backend& be = gpu ? static_cast<Backend&>(rig.gpu) : static_cast<Backend&>(rig.cpu);
      auto pick = [&](const Pair& p) { return gpu ? p.gpu : p.cpu; };
      be.GdnGates(pick(a), pick(b), pick(a_log), pick(dt_bias), pick(g), pick(beta));
      be.GatedDeltaRule(pick(q), pick(k), pick(v), pick(g), pick(beta), mapping, gpu ? *gs : *cs, 1, layout,
                        pick(core));
      if (with_norm) be.GatedRmsNorm(pick(core).Reshaped({n * nv, dv}), pick(z), pick(norm_w), 1e-6f, pick(normed));
    }
    cs->Advance(layout);
    gs->Advance(layout);
    const std::string what = fmt::format("nk={} nv={} dk={} dv={} step {}", nk, nv, dk, dv, i);
    ExpectClose(rig.Gpu(g.gpu), Rig::Cpu(g.cpu), 1e-5, 1e-5, "decode tail g " + what);
    ExpectClose(rig.Gpu(beta.gpu), Rig::Cpu(beta.cpu), 1e-5, 1e-5, "decode tail beta " + what);
    ExpectClose(rig.Gpu(core.gpu), Rig::Cpu(core.cpu), 5e-3, 2e-2, "decode tail delta rule " + what);
    if (with_norm) ExpectClose(rig.Gpu(normed.gpu), Rig::Cpu(normed.cpu), 8e-3, 3e-2, "decode tail norm " + what);
  }
}

TEST(CudaGdn, DecodeTailFusedMatchesTheOracle) {
  INFX_REQUIRE_GPU();
  CheckDecodeTail(16, 32, 128, 128, GdnHeadMapping::kGrouped, 770);  // Qwen3-Next
  CheckDecodeTail(16, 48, 128, 128, GdnHeadMapping::kTiled, 780);    // Qwen3.5-35B-A3B-like, llama.cpp order
  CheckDecodeTail(2, 4, 16, 16, GdnHeadMapping::kGrouped, 790);      // one column block per head
  CheckDecodeTail(2, 4, 64, 96, GdnHeadMapping::kGrouped, 800);      // a partial column block
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
