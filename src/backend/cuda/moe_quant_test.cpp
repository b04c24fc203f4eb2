// CPU-vs-CUDA test of the routed experts with block-quantized weights (moe_quant.cu), at the shapes of
// Qwen3-30B-A3B's experts (hidden 2048, intermediate 768) and a hidden size of 1024, for 5 tokens (the
// tensor-core kernels), 12 and 21 (the tensor-core kernels per group of 8 tokens, up to
// kQuantMoeGroupsMaxTokens) and 12 with the GEMVs turned off (the f32 kernels).
#include "backend/cuda/test_util.h"
#include "quant/random_blocks.h"

namespace infernix {
namespace {

using cuda_test::ExpectClose;
using cuda_test::Rand;
using cuda_test::Rig;

// shared: a shared expert of the same type and shape beside the routed ones (MoeExpertsWithShared), which the
// tensor-core kernels run as every token's last slot up to 8 tokens (else the ops' default composition).
void CheckQuantExperts(DType type, int64_t n, int64_t hidden, int64_t inter, uint64_t seed, bool shared = false,
                       bool gemv = true) {
  CudaOptions options;
  options.gemv = gemv;
  Rig rig(options);
  const int64_t experts = 16, top_k = 4;
  std::vector<HostBuffer> keep;
  ExpertWeights cpu_w, gpu_w;
  float s_in = 1.0f / std::sqrt(static_cast<float>(hidden)), s_out = 1.0f / std::sqrt(static_cast<float>(inter));
  auto add = [&](std::vector<Tensor>& c, std::vector<Tensor>& g, int64_t rows, int64_t cols, float scale) {
    keep.push_back(RandomQuantBlocks(type, rows, cols, seed++, scale));
    c.push_back(rig.cpu.UploadWeight(keep.back().view()));
    g.push_back(rig.gpu.UploadWeight(keep.back().view()));
  };
  keep.reserve(3 * experts + 3);  // the tensors point into keep's buffers
  for (int64_t e = 0; e < experts; ++e) {
    add(cpu_w.gate, gpu_w.gate, inter, hidden, s_in);
    add(cpu_w.up, gpu_w.up, inter, hidden, s_in);
    add(cpu_w.down, gpu_w.down, hidden, inter, s_out);
  }
  auto x = rig.Act({n, hidden}, Rand(n * hidden, seed++, -2, 2));
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n * top_k; ++i) ids.push_back(static_cast<int32_t>((i * 7 + i / top_k) % experts));
  auto id = rig.I32({n, top_k}, ids);
  auto w = rig.F32({n, top_k}, Rand(n * top_k, seed++, 0, 1));
  auto out = rig.Out({n, hidden});
  if (shared) {
    std::vector<Tensor> sc, sg;
    add(sc, sg, inter, hidden, s_in);
    add(sc, sg, inter, hidden, s_in);
    add(sc, sg, hidden, inter, s_out);
    auto logit = rig.F32({n, 1}, Rand(n, seed++, -3, 3));
    rig.cpu.MoeExpertsWithShared(x.cpu, w.cpu, id.cpu, cpu_w, SharedExpert{sc[0], sc[1], sc[2], logit.cpu}, out.cpu);
    rig.gpu.MoeExpertsWithShared(x.gpu, w.gpu, id.gpu, gpu_w, SharedExpert{sg[0], sg[1], sg[2], logit.gpu}, out.gpu);
  } else {
    rig.cpu.MoeExperts(x.cpu, w.cpu, id.cpu, cpu_w, out.cpu);
    rig.gpu.MoeExperts(x.gpu, w.gpu, id.gpu, gpu_w, out.gpu);
  }
  // Same decoded weights on both sides; f32 sums in another order, bf16 roundings of act and the output.
  // The tensor-core kernels (up to 8 tokens, shapes permitting) round x and act to int8 blocks for the
  // integer types, as the dense GEMV does (whose test checks the decoding against the rounded x to f32
  // precision): their bound is that rounding's, twice (x, then act), measured 1.6e-3 to 3.3e-2 (the random
  // Q4_1 / Q5_1 blocks share large offsets, so their products cancel more) on an H200.
  const bool int8_x = type != DType::kF8E4M3B128;
  ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), int8_x ? 5e-2 : 5e-3, int8_x ? 8e-2 : 1.5e-2,
              std::string(DTypeName(type)) + (shared ? " MoeExpertsWithShared" : " MoeExperts") + " n=" +
                  std::to_string(n) + " H=" + std::to_string(hidden) + " I=" + std::to_string(inter) +
                  (gemv ? "" : " (no GEMVs)"));
}

TEST(CudaMoe, QuantizedExpertsMatchTheOracle) {
  INFX_REQUIRE_GPU();
  uint64_t seed = 1200;
  for (DType type : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,
                     DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS, DType::kF8E4M3B128}) {
    CheckQuantExperts(type, 5, 2048, 768, seed);
    CheckQuantExperts(type, 1, 1024, 512, seed + 100);
    CheckQuantExperts(type, 12, 1024, 512, seed + 200);
    CheckQuantExperts(type, 12, 1024, 512, seed + 300, false, false);
    CheckQuantExperts(type, 21, 1024, 512, seed + 400);  // 8 + 8 + 5 (FP8 too: past kMoeGemvMaxTokens)
    seed += 1000;
  }
}

// The shared expert in the routed experts' tensor-core kernels (1 and 5 tokens; 12 and 21 per group of 8), and through
// the ops' default composition (12 tokens without the GEMVs), for a type of each family: 32-value groups,
// 16-value groups, K-quants, FP8.
TEST(CudaMoe, QuantizedExpertsWithTheSharedOne) {
  INFX_REQUIRE_GPU();
  uint64_t seed = 9200;
  for (DType type : {DType::kQ8_0, DType::kQ6_K, DType::kQ4_K, DType::kF8E4M3B128}) {
    CheckQuantExperts(type, 1, 2048, 512, seed, true);
    CheckQuantExperts(type, 5, 1024, 768, seed + 100, true);
    CheckQuantExperts(type, 12, 1024, 512, seed + 200, true);
    CheckQuantExperts(type, 12, 1024, 512, seed + 300, true, false);
    CheckQuantExperts(type, 21, 1024, 512, seed + 400, true);
    seed += 1000;
  }
}

}  // namespace
}  // namespace infernix
