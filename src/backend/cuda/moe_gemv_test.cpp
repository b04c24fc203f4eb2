// CPU-vs-CUDA tests of the bf16 experts at decode (moe_gemv.cu): the routed experts alone and with the
// shared expert folded in beside them (MoeExpertsWithShared), at Qwen3-Next's expert shapes (hidden 2048,
// intermediate 512, top 10) and Qwen3-30B-A3B's intermediate 768, for 1 to 15 tokens; and the cases that
// fall back to the ops' default composition (a shared expert of another size, 16 tokens, fusion off).
#include <algorithm>
#include <numeric>

#include "backend/cuda/test_util.h"
#include "quant/random_blocks.h"

#include <fmt/format.h>

namespace infernix {
namespace {

using cuda_test::ExpectClose;
using cuda_test::Pair;
using cuda_test::Rand;
using cuda_test::Rig;

struct ExpertSet {
  ExpertWeights cpu, gpu;
};

struct SharedSet {
  Pair gate, up, down;
};

ExpertSet MakeExperts(Rig& rig, int64_t experts, int64_t hidden, int64_t inter, uint64_t seed) {
  ExpertSet s;
  const float s_in = 1.0f / std::sqrt(static_cast<float>(hidden)), s_out = 1.0f / std::sqrt(static_cast<float>(inter));
  for (int64_t e = 0; e < experts; ++e) {
    Pair g = rig.Weight(DType::kBF16, {inter, hidden}, Rand(inter * hidden, seed + 3 * e, -s_in, s_in));
    Pair u = rig.Weight(DType::kBF16, {inter, hidden}, Rand(inter * hidden, seed + 3 * e + 1, -s_in, s_in));
    Pair d = rig.Weight(DType::kBF16, {hidden, inter}, Rand(hidden * inter, seed + 3 * e + 2, -s_out, s_out));
    s.cpu.gate.push_back(g.cpu);
    s.cpu.up.push_back(u.cpu);
    s.cpu.down.push_back(d.cpu);
    s.gpu.gate.push_back(g.gpu);
    s.gpu.up.push_back(u.gpu);
    s.gpu.down.push_back(d.gpu);
  }
  return s;
}

SharedSet MakeShared(Rig& rig, int64_t hidden, int64_t inter, uint64_t seed) {
  const float s_in = 1.0f / std::sqrt(static_cast<float>(hidden)), s_out = 1.0f / std::sqrt(static_cast<float>(inter));
  return SharedSet{rig.Weight(DType::kBF16, {inter, hidden}, Rand(inter * hidden, seed, -s_in, s_in)),
                   rig.Weight(DType::kBF16, {inter, hidden}, Rand(inter * hidden, seed + 1, -s_in, s_in)),
                   rig.Weight(DType::kBF16, {hidden, inter}, Rand(hidden * inter, seed + 2, -s_out, s_out))};
}

// top_k distinct experts per token, in a seeded order.
std::vector<int32_t> RandomIds(int64_t n, int64_t experts, int64_t top_k, uint64_t seed) {
  std::vector<int32_t> ids;
  std::mt19937_64 rng(seed);
  for (int64_t t = 0; t < n; ++t) {
    std::vector<int32_t> all(static_cast<size_t>(experts));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    ids.insert(ids.end(), all.begin(), all.begin() + top_k);
  }
  return ids;
}

// One MoE layer's experts on both backends: out = routed (+ shared), compared with the CPU; then the same
// call again (the captured graph replays it), which must give the same bits.
void CheckExperts(Rig& rig, const ExpertSet& ex, const SharedSet* shared, int64_t n, int64_t hidden, int64_t top_k,
                  uint64_t seed, const std::string& what) {
  const int64_t experts = static_cast<int64_t>(ex.cpu.gate.size());
  auto x = rig.Act({n, hidden}, Rand(n * hidden, seed, -2, 2));
  auto id = rig.I32({n, top_k}, RandomIds(n, experts, top_k, seed + 1));
  auto w = rig.F32({n, top_k}, Rand(n * top_k, seed + 2, 0, 1));
  auto logit = rig.F32({n, 1}, Rand(n, seed + 3, -3, 3));
  auto out = rig.Out({n, hidden});
  auto run = [&] {
    if (shared == nullptr) {
      rig.cpu.MoeExperts(x.cpu, w.cpu, id.cpu, ex.cpu, out.cpu);
      rig.gpu.MoeExperts(x.gpu, w.gpu, id.gpu, ex.gpu, out.gpu);
    } else {
      rig.cpu.MoeExpertsWithShared(x.cpu, w.cpu, id.cpu, ex.cpu,
                                   SharedExpert{shared->gate.cpu, shared->up.cpu, shared->down.cpu, logit.cpu},
                                   out.cpu);
      rig.gpu.MoeExpertsWithShared(x.gpu, w.gpu, id.gpu, ex.gpu,
                                   SharedExpert{shared->gate.gpu, shared->up.gpu, shared->down.gpu, logit.gpu},
                                   out.gpu);
    }
  };
  run();
  const std::vector<float> first = rig.Gpu(out.gpu);
  // act is rounded to bf16 once (with the routing weight folded in), the output once; f32 sums otherwise.
  ExpectClose(first, Rig::Cpu(out.cpu), 5e-3, 1.5e-2, what + " n=" + std::to_string(n));
  run();
  EXPECT_EQ(rig.Gpu(out.gpu), first) << what << " n=" << n << ": a second run differs";
}

TEST(CudaMoeGemv, RoutedExpertsAtDecode) {
  INFX_REQUIRE_GPU();
  Rig rig;
  const ExpertSet next = MakeExperts(rig, 64, 2048, 512, 3000);
  for (int64_t n : {1, 2, 3, 8, 15}) CheckExperts(rig, next, nullptr, n, 2048, 10, 3100 + n, "routed, I=512");
  // Intermediate 768: 24 steps of 32 values per expert in the down pass.
  const ExpertSet moe30 = MakeExperts(rig, 16, 1024, 768, 3200);
  for (int64_t n : {1, 5}) CheckExperts(rig, moe30, nullptr, n, 1024, 8, 3300 + n, "routed, I=768");
  // The tiny fixtures' shapes (hidden 128, intermediate 64, 8 experts, top 2): 4 steps of k, 8 warps.
  const ExpertSet tiny = MakeExperts(rig, 8, 128, 64, 3400);
  for (int64_t n : {1, 2, 3, 5, 8, 11}) CheckExperts(rig, tiny, nullptr, n, 128, 2, 3500 + n, "routed, tiny");
}

TEST(CudaMoeGemv, SharedExpertBesideTheRoutedOnes) {
  INFX_REQUIRE_GPU();
  Rig rig;
  const ExpertSet ex = MakeExperts(rig, 64, 2048, 512, 4000);
  const SharedSet shared = MakeShared(rig, 2048, 512, 4500);
  // 12 tokens: the shared expert's tiles take them as two groups (8 and 4).
  for (int64_t n : {1, 2, 4, 8, 12}) CheckExperts(rig, ex, &shared, n, 2048, 10, 4100 + n, "with shared");
  // 16 tokens: the grouped GEMM and the shared expert through the ops (the default composition).
  CheckExperts(rig, ex, &shared, 16, 2048, 10, 4200, "with shared, fallback");
  // A shared expert of another size cannot be folded in: the default composition.
  const SharedSet wide = MakeShared(rig, 2048, 1024, 4600);
  CheckExperts(rig, ex, &wide, 2, 2048, 10, 4300, "with a wider shared expert");
  // The tiny fixtures' shapes with a shared expert as wide as the routed ones.
  const ExpertSet tiny = MakeExperts(rig, 8, 128, 64, 4700);
  const SharedSet tiny_shared = MakeShared(rig, 128, 64, 4800);
  for (int64_t n : {1, 2, 3, 8, 11}) CheckExperts(rig, tiny, &tiny_shared, n, 128, 2, 4900 + n, "with shared, tiny");
}

// A token's experts give the same bits alone and in a batch (docs/cuda.md): the down kernel runs 16 warps at
// 1-2 tokens and 8 from 3 that hold two of the 16 partial sums each (moe_gemv.cu), at Qwen3-Next's shapes.
TEST(CudaMoeGemv, ATokensExpertsDoNotDependOnItsBatch) {
  INFX_REQUIRE_GPU();
  Rig rig;
  const int64_t hidden = 2048, top_k = 10, n_max = 3;
  const ExpertSet ex = MakeExperts(rig, 64, hidden, 512, 5000);
  const SharedSet shared = MakeShared(rig, hidden, 512, 5500);
  const std::vector<float> xv = Rand(n_max * hidden, 5100, -2, 2), wv = Rand(n_max * top_k, 5101, 0, 1),
                           lv = Rand(n_max, 5102, -3, 3);
  const std::vector<int32_t> iv = RandomIds(n_max, 64, top_k, 5103);
  for (bool with_shared : {false, true}) {
    std::vector<float> alone;
    for (int64_t n = 1; n <= n_max; ++n) {
      auto x = rig.Act({n, hidden}, std::vector<float>(xv.begin(), xv.begin() + n * hidden));
      auto id = rig.I32({n, top_k}, std::vector<int32_t>(iv.begin(), iv.begin() + n * top_k));
      auto w = rig.F32({n, top_k}, std::vector<float>(wv.begin(), wv.begin() + n * top_k));
      auto logit = rig.F32({n, 1}, std::vector<float>(lv.begin(), lv.begin() + n));
      auto out = rig.Out({n, hidden});
      if (with_shared) {
        rig.gpu.MoeExpertsWithShared(x.gpu, w.gpu, id.gpu, ex.gpu,
                                     SharedExpert{shared.gate.gpu, shared.up.gpu, shared.down.gpu, logit.gpu}, out.gpu);
      } else {
        rig.gpu.MoeExperts(x.gpu, w.gpu, id.gpu, ex.gpu, out.gpu);
      }
      std::vector<float> got = rig.Gpu(out.gpu);
      got.resize(static_cast<size_t>(hidden));  // token 0's row
      if (n == 1) {
        alone = got;
      } else {
        EXPECT_EQ(got, alone) << "token 0 among " << n << (with_shared ? ", with the shared expert" : "");
      }
    }
  }
}

// The residual add after the experts and the RMSNorm of the sum (the next layer's input norm), which the
// backend makes the down kernel's epilogue: the sum and the normalised rows against the CPU, with the
// norm in place and not, with and without the shared expert; the same ops with fusion off as well.
void CheckResidualAndNorm(const CudaOptions& options, int64_t n, bool with_shared, bool norm_in_place, uint64_t seed) {
  Rig rig(options);
  const int64_t hidden = 1024, inter = 256, top_k = 4;
  const ExpertSet ex = MakeExperts(rig, 16, hidden, inter, seed);
  const SharedSet shared = MakeShared(rig, hidden, inter, seed + 500);
  auto x = rig.Act({n, hidden}, Rand(n * hidden, seed + 1, -2, 2));
  auto id = rig.I32({n, top_k}, RandomIds(n, 16, top_k, seed + 2));
  auto w = rig.F32({n, top_k}, Rand(n * top_k, seed + 3, 0, 1));
  auto logit = rig.F32({n, 1}, Rand(n, seed + 4, -3, 3));
  auto norm_w = rig.Weight(DType::kBF16, {hidden}, Rand(hidden, seed + 5, -0.5f, 0.5f));
  auto residual = rig.Act({n, hidden}, Rand(n * hidden, seed + 6, -4, 4));
  auto out = rig.Out({n, hidden});
  auto normed = rig.Out({n, hidden});
  for (int round = 0; round < 3; ++round) {  // the same tensors: later rounds replay the captured graph
    if (round > 0) rig.Set(residual, Rand(n * hidden, seed + 6 + round, -4, 4));
    for (bool gpu : {false, true}) {
      Backend& be = gpu ? static_cast<Backend&>(rig.gpu) : static_cast<Backend&>(rig.cpu);
      auto pick = [&](const Pair& p) { return gpu ? p.gpu : p.cpu; };
      const ExpertWeights& e = gpu ? ex.gpu : ex.cpu;
      if (with_shared) {
        be.MoeExpertsWithShared(pick(x), pick(w), pick(id), e,
                                SharedExpert{pick(shared.gate), pick(shared.up), pick(shared.down), pick(logit)},
                                pick(out));
      } else {
        be.MoeExperts(pick(x), pick(w), pick(id), e, pick(out));
      }
      be.Add(pick(residual), pick(out), pick(residual));
      // Qwen3-Next's norms scale by 1 + w.
      be.RmsNorm(pick(residual), pick(norm_w), 1e-6f, true, norm_in_place ? pick(residual) : pick(normed));
    }
    const std::string what = fmt::format("n={} shared={} in_place={} fuse={} round {}", n, with_shared, norm_in_place,
                                         options.fuse, round);
    if (!norm_in_place) {
      ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), 5e-3, 1.5e-2, "experts before the add " + what);
      ExpectClose(rig.Gpu(normed.gpu), Rig::Cpu(normed.cpu), 8e-3, 3e-2, "norm of the sum " + what);
    }
    ExpectClose(rig.Gpu(residual.gpu), Rig::Cpu(residual.cpu), 5e-3, 1.5e-2,
                (norm_in_place ? "norm of the sum, in place " : "residual sum ") + what);
  }
}

TEST(CudaMoeGemv, ResidualAndNormAfterTheExperts) {
  INFX_REQUIRE_GPU();
  uint64_t seed = 6000;
  for (int64_t n : {1, 3, 8}) {
    for (bool with_shared : {false, true}) {
      CheckResidualAndNorm(CudaOptions{}, n, with_shared, false, seed += 10);
      CheckResidualAndNorm(CudaOptions{}, n, with_shared, true, seed += 10);
    }
  }
  CudaOptions unfused;
  unfused.fuse = false;
  CheckResidualAndNorm(unfused, 2, true, false, seed + 10);
}

// The router's decode GEMV (with the shared expert's gate beside it) and the routing after it, which the
// backend fuses (the GEMV's last block routes the tokens): the same ids and weights as the unfused ops on
// the GPU (the same logits, bit for bit), and logits and weights within f32 rounding of the CPU's; bf16 or
// FP8 (f8_e4m3_b128) router weights.
TEST(CudaMoeGemv, RoutingAfterTheRouterGemv) {
  INFX_REQUIRE_GPU();
  CudaOptions unfused;
  unfused.fuse = false;
  for (DType w_type : {DType::kBF16, DType::kF8E4M3B128}) {
    for (int64_t experts : {512, 128, 60, 8}) {
      for (int64_t n : {1, 3, 8}) {
        const int64_t hidden = 2048, top_k = experts == 60 ? 4 : experts == 8 ? 2 : 10;
        const uint64_t seed = 7000 + static_cast<uint64_t>(experts) * 10 + static_cast<uint64_t>(n);
        std::vector<std::vector<float>> got_ids, got_w;
        for (const CudaOptions& o : {CudaOptions{}, unfused}) {
          Rig rig(o);
          const float s_in = 4.0f / std::sqrt(static_cast<float>(hidden));
          std::vector<HostBuffer> packed;  // FP8: the blocks the weights were uploaded from
          auto weight = [&](int64_t rows, uint64_t sd) {
            if (w_type == DType::kBF16)
              return rig.Weight(DType::kBF16, {rows, hidden}, Rand(rows * hidden, sd, -s_in, s_in));
            packed.push_back(RandomQuantBlocks(w_type, rows, hidden, sd, s_in));
            return rig.Packed(packed.back());
          };
          auto router = weight(experts, seed);
          auto gate_w = weight(1, seed + 1);
          auto x = rig.Act({n, hidden}, Rand(n * hidden, seed + 2, -2, 2));
          auto logits = rig.Out({n, experts}, DType::kF32);
          auto gate = rig.Out({n, 1}, DType::kF32);
          auto w = rig.Out({n, top_k}, DType::kF32);
          auto ids = rig.I32({n, top_k}, std::vector<int32_t>(static_cast<size_t>(n * top_k), -1));
          for (bool gpu : {false, true}) {
            Backend& be = gpu ? static_cast<Backend&>(rig.gpu) : static_cast<Backend&>(rig.cpu);
            auto pick = [&](const Pair& p) { return gpu ? p.gpu : p.cpu; };
            be.MatMul(pick(x), pick(router), pick(logits));
            be.MatMul(pick(x), pick(gate_w), pick(gate));
            be.MoeRouting(pick(logits), static_cast<int>(top_k), true, pick(w), pick(ids));
          }
          const std::string what = fmt::format("{} E={} n={} fuse={}", DTypeName(w_type), experts, n, o.fuse);
          ExpectClose(rig.Gpu(logits.gpu), Rig::Cpu(logits.cpu), 1e-4, 1e-3, "router logits " + what);
          ExpectClose(rig.Gpu(gate.gpu), Rig::Cpu(gate.cpu), 1e-4, 1e-3, "shared gate logit " + what);
          got_ids.push_back(rig.Gpu(ids.gpu));
          got_w.push_back(rig.Gpu(w.gpu));
          // Where the CPU chose the same experts (near-ties of its slightly different logits may not), the same
          // weights up to rounding.
          if (got_ids.back() == Rig::Cpu(ids.cpu))
            ExpectClose(got_w.back(), Rig::Cpu(w.cpu), 1e-4, 1e-3, "routing weights " + what);
        }
        EXPECT_EQ(got_ids[0], got_ids[1])
            << DTypeName(w_type) << " E=" << experts << " n=" << n << ": fused and unfused routing differ";
        EXPECT_EQ(got_w[0], got_w[1]) << DTypeName(w_type) << " E=" << experts << " n=" << n;
      }
    }
  }
}

// Layers of router, routing and experts (shared one folded in) queued back to back, each layer's output the
// next one's input, at shapes small enough that several layers' kernels are resident at once (the down
// kernel may then start while the previous layer's still runs, and must not take that layer's routing for
// its own: kernels.h, LaunchMoeGemv's sync): the same bits as the same layers with the host waiting for
// each before queuing the next.
TEST(CudaMoeGemv, ConsecutiveLayersReadTheirOwnRouting) {
  INFX_REQUIRE_GPU();
  const int64_t hidden = 256, inter = 64, experts = 16, top_k = 4, layers = 6;
  for (int64_t n : {1, 3}) {
    Rig rig;
    const float s_in = 4.0f / std::sqrt(static_cast<float>(hidden));
    std::vector<ExpertSet> ex;
    std::vector<SharedSet> shared;
    std::vector<Pair> router, gate_w;
    for (int64_t l = 0; l < layers; ++l) {
      const uint64_t seed = 9000 + static_cast<uint64_t>(l) * 100;
      ex.push_back(MakeExperts(rig, experts, hidden, inter, seed));
      shared.push_back(MakeShared(rig, hidden, inter, seed + 50));
      router.push_back(rig.Weight(DType::kBF16, {experts, hidden}, Rand(experts * hidden, seed + 60, -s_in, s_in)));
      gate_w.push_back(rig.Weight(DType::kBF16, {1, hidden}, Rand(hidden, seed + 61, -s_in, s_in)));
    }
    std::vector<Pair> xs{rig.Act({n, hidden}, Rand(n * hidden, 9999 + static_cast<uint64_t>(n), -2, 2))};
    for (int64_t l = 0; l < layers; ++l) xs.push_back(rig.Out({n, hidden}));
    auto logits = rig.Out({n, experts}, DType::kF32);
    auto gate = rig.Out({n, 1}, DType::kF32);
    auto w = rig.Out({n, top_k}, DType::kF32);
    auto ids = rig.I32({n, top_k}, std::vector<int32_t>(static_cast<size_t>(n * top_k), 0));
    std::vector<std::vector<float>> runs;
    for (bool wait_each : {false, true}) {
      for (int64_t l = 0; l < layers; ++l) {
        const size_t i = static_cast<size_t>(l);
        rig.gpu.MatMul(xs[i].gpu, router[i].gpu, logits.gpu);
        rig.gpu.MatMul(xs[i].gpu, gate_w[i].gpu, gate.gpu);
        rig.gpu.MoeRouting(logits.gpu, static_cast<int>(top_k), true, w.gpu, ids.gpu);
        rig.gpu.MoeExpertsWithShared(
            xs[i].gpu, w.gpu, ids.gpu, ex[i].gpu,
            SharedExpert{shared[i].gate.gpu, shared[i].up.gpu, shared[i].down.gpu, gate.gpu}, xs[i + 1].gpu);
        if (wait_each) (void)rig.Gpu(xs[i + 1].gpu);
      }
      runs.push_back(rig.Gpu(xs.back().gpu));
    }
    EXPECT_EQ(runs[0], runs[1]) << "n=" << n << ": the layers queued at once differ from the layers one by one";
  }
}

TEST(CudaMoeGemv, SharedExpertWithoutFusion) {
  INFX_REQUIRE_GPU();
  CudaOptions options;
  options.fuse = false;
  Rig rig(options);
  const ExpertSet ex = MakeExperts(rig, 16, 1024, 256, 5000);
  const SharedSet shared = MakeShared(rig, 1024, 256, 5500);
  CheckExperts(rig, ex, &shared, 1, 1024, 4, 5100, "with shared, fusion off");
}

}  // namespace
}  // namespace infernix
