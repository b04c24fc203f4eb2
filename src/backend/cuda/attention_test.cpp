// CPU-vs-CUDA tests of attention over the paged KV cache: a prefill, decode steps and a mixed batch
// (decode + continued chunk + fresh prompt) in sequence, for each kernel (flash, split-KV) and head
// shape (GQA groups 1..16, head_dim 32..256, one not a multiple of 8), and a long-context decode.
#include "backend/cuda/test_util.h"

#include <fmt/format.h>

namespace infernix {
namespace {

using cuda_test::ExpectClose;
using cuda_test::MakeLayout;
using cuda_test::Rand;
using cuda_test::Rig;

struct Heads {
  int hq, hkv, d;
};

const char* ModeName(CudaOptions::Attention a) {
  return a == CudaOptions::Attention::kFlash ? "flash" : a == CudaOptions::Attention::kSplit ? "split" : "auto";
}

// Runs the steps on both backends and compares every step's output.
void RunSteps(CudaOptions::Attention mode, Heads h, int64_t max_context,
              const std::vector<std::vector<std::array<int64_t, 3>>>& steps, uint64_t seed) {
  CudaOptions o;
  o.attention = mode;
  Rig rig(o);
  StateSpec spec;
  spec.max_slots = 3;
  spec.max_context = max_context;
  spec.n_attention_layers = 2;
  spec.n_kv_heads = h.hkv;
  spec.head_dim = h.d;
  auto cs = rig.cpu.CreateState(spec);
  auto gs = rig.gpu.CreateState(spec);
  const float scale = 1.0f / std::sqrt(static_cast<float>(h.d));
  for (size_t i = 0; i < steps.size(); ++i) {
    BatchLayout layout = MakeLayout(steps[i]);
    const int64_t n = layout.n_tokens;
    auto q = rig.Act({n, h.hq, h.d}, Rand(n * h.hq * h.d, seed + 3 * i, -2, 2));
    auto k = rig.Act({n, h.hkv, h.d}, Rand(n * h.hkv * h.d, seed + 3 * i + 1, -2, 2));
    auto v = rig.Act({n, h.hkv, h.d}, Rand(n * h.hkv * h.d, seed + 3 * i + 2, -2, 2));
    auto out = rig.Out({n, h.hq, h.d});
    rig.cpu.Attention(q.cpu, k.cpu, v.cpu, *cs, 1, layout, scale, out.cpu);
    rig.gpu.Attention(q.gpu, k.gpu, v.gpu, *gs, 1, layout, scale, out.gpu);
    cs->Advance(layout);
    gs->Advance(layout);
    ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), 1e-2, 3e-2,
                fmt::format("attention {} hq={} hkv={} d={} step {}", ModeName(mode), h.hq, h.hkv, h.d, i));
  }
}

TEST(CudaAttention, PrefillDecodeAndMixedBatches) {
  INFX_REQUIRE_GPU();
  const std::vector<std::vector<std::array<int64_t, 3>>> steps = {
      {{0, 150, 0}},                            // prefill: two full pages and a partial one
      {{0, 1, 150}, {1, 70, 0}},                // decode + a fresh prompt
      {{0, 1, 151}, {1, 1, 70}, {2, 5, 0}},     // decode, decode, fresh
      {{1, 65, 71}, {0, 1, 152}},               // a chunk continuing mid-page, then a decode
  };
  uint64_t seed = 1000;
  for (Heads h : {Heads{32, 8, 128}, Heads{16, 2, 256}, Heads{4, 2, 64}, Heads{2, 1, 32}, Heads{8, 8, 80},
                  Heads{4, 2, 36}})
    for (auto mode : {CudaOptions::Attention::kFlash, CudaOptions::Attention::kSplit, CudaOptions::Attention::kAuto})
      RunSteps(mode, h, 512, steps, seed += 100);
}

TEST(CudaAttention, LongContextDecodeSplitsTheSequence) {
  INFX_REQUIRE_GPU();
  const std::vector<std::vector<std::array<int64_t, 3>>> steps = {
      {{0, 3000, 0}}, {{0, 1, 3000}}, {{0, 1, 3001}, {1, 1, 0}}};
  RunSteps(CudaOptions::Attention::kAuto, Heads{8, 2, 128}, 4096, steps, 77);
  // Many KV heads leave few splits (2 x SMs blocks in all): each split then walks several
  // double-buffered sub-tiles of 32 keys, and a partial last one (16-byte and scalar K/V loads).
  RunSteps(CudaOptions::Attention::kSplit, Heads{16, 16, 64}, 4096, steps, 78);
  RunSteps(CudaOptions::Attention::kSplit, Heads{8, 8, 36}, 4096, steps, 79);
}

}  // namespace
}  // namespace infernix
