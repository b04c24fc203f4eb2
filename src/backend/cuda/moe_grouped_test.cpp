// CPU-vs-CUDA tests of MoeExperts by batch size: the grouped expert GEMMs (moe_grouped.cu) for many
// tokens (tile boundaries of 128 rows: groups of 1 to a few hundred pairs, experts no token chose, partial column
// tiles, every pair routed to one expert; bf16 and block-quantized experts), and bf16 experts for a
// few tokens (moe_gemv.cu's GEMVs up to 8, the f32 kernels of moe.cu above).
#include <algorithm>

#include <fmt/format.h>

#include "backend/cuda/kernels.h"
#include "backend/cuda/test_util.h"
#include "quant/random_blocks.h"

namespace infernix {
namespace {

using cuda_test::ExpectClose;
using cuda_test::Rand;
using cuda_test::Rig;

// ids: [n, top_k] expert per pair (distinct per token, as routing gives).
void CheckExperts(int64_t n, int64_t hidden, int64_t inter, int64_t experts, int64_t top_k,
                  const std::vector<int32_t>& ids, uint64_t seed, DType type = DType::kBF16) {
  Rig rig;
  ExpertWeights cpu_w, gpu_w;
  std::vector<HostBuffer> keep;
  keep.reserve(static_cast<size_t>(3 * experts));
  const float s_in = 1.0f / std::sqrt(static_cast<float>(hidden)), s_out = 1.0f / std::sqrt(static_cast<float>(inter));
  auto add = [&](std::vector<Tensor>& c, std::vector<Tensor>& g, int64_t rows, int64_t cols, float scale) {
    if (type == DType::kBF16) {
      auto w = rig.Weight(type, {rows, cols}, Rand(rows * cols, seed++, -scale, scale));
      c.push_back(w.cpu);
      g.push_back(w.gpu);
      return;
    }
    keep.push_back(RandomQuantBlocks(type, rows, cols, seed++, scale));
    c.push_back(rig.cpu.UploadWeight(keep.back().view()));
    g.push_back(rig.gpu.UploadWeight(keep.back().view()));
  };
  for (int64_t e = 0; e < experts; ++e) {
    add(cpu_w.gate, gpu_w.gate, inter, hidden, s_in);
    add(cpu_w.up, gpu_w.up, inter, hidden, s_in);
    add(cpu_w.down, gpu_w.down, hidden, inter, s_out);
  }
  auto x = rig.Act({n, hidden}, Rand(n * hidden, seed++, -2, 2));
  auto id = rig.I32({n, top_k}, ids);
  auto w = rig.F32({n, top_k}, Rand(n * top_k, seed++, 0, 1));
  auto out = rig.Out({n, hidden});
  rig.cpu.MoeExperts(x.cpu, w.cpu, id.cpu, cpu_w, out.cpu);
  rig.gpu.MoeExperts(x.gpu, w.gpu, id.gpu, gpu_w, out.gpu);
  const std::string what =
      fmt::format("{} MoeExperts n={} H={} I={} E={} k={}", DTypeName(type), n, hidden, inter, experts, top_k);
  // Same weights (block types: decoded to f32 on the CPU, to bf16 on the GPU); f32 sums in another
  // order, bf16 roundings of act and of each expert's output.
  ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), 5e-3, 1.5e-2, what);
  // Deterministic: the same call again gives the same bits (rows within a group come in atomic order).
  std::vector<float> first = rig.Gpu(out.gpu);
  rig.gpu.MoeExperts(x.gpu, w.gpu, id.gpu, gpu_w, out.gpu);
  EXPECT_EQ(rig.Gpu(out.gpu), first) << what << ": not deterministic";
}

// Distinct experts per token, spread unevenly: expert e gets about twice as many pairs as expert e + 1
// near the front, and the last few none.
std::vector<int32_t> SkewedIds(int64_t n, int64_t experts, int64_t top_k, uint64_t seed) {
  std::vector<float> r = Rand(static_cast<size_t>(n * top_k), seed, 0, 1);
  std::vector<int32_t> ids;
  const int64_t used = std::max<int64_t>(top_k, experts - 3);
  for (int64_t t = 0; t < n; ++t) {
    std::vector<int32_t> chosen;
    for (int64_t j = 0; j < top_k; ++j) {
      auto e = static_cast<int32_t>(static_cast<double>(used) * r[static_cast<size_t>(t * top_k + j)] *
                                    r[static_cast<size_t>(t * top_k + j)]);
      while (std::find(chosen.begin(), chosen.end(), e) != chosen.end()) e = static_cast<int32_t>((e + 1) % used);
      chosen.push_back(e);
    }
    ids.insert(ids.end(), chosen.begin(), chosen.end());
  }
  return ids;
}

TEST(CudaMoe, GroupedExpertsMatchTheOracle) {
  INFX_REQUIRE_GPU();
  // Qwen3-30B-A3B's expert shape (hidden 2048, intermediate 768), fewer experts.
  CheckExperts(300, 2048, 768, 24, 8, SkewedIds(300, 24, 8, 1), 3000);
  // Sizes that are not multiples of the column tiles (64 for gate/up, 128 for down).
  CheckExperts(70, 160, 96, 12, 4, SkewedIds(70, 12, 4, 2), 3100);
  // The smallest batch that takes the grouped path; top-10 of 32 (Qwen3-Next's top_k).
  CheckExperts(16, 1024, 512, 32, 10, SkewedIds(16, 32, 10, 3), 3200);
  // Every token's first pair on expert 5: one group of 200 rows (2 tiles of 128, the last partial).
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < 200; ++t) {
    const int32_t other = t % 15;
    ids.push_back(5);
    ids.push_back(other >= 5 ? other + 1 : other);
  }
  CheckExperts(200, 512, 256, 16, 2, ids, 3300);
}

// Block-quantized experts, decoded a sub-block at a time into the GEMMs' bf16 tiles. Q6_K with an
// intermediate size of 768 (3 super-blocks: rows not 16-byte aligned) is what Q4_K_M files of
// Qwen3-30B-A3B hold for some down projections.
TEST(CudaMoe, GroupedQuantizedExpertsMatchTheOracle) {
  INFX_REQUIRE_GPU();
  uint64_t seed = 4000;
  for (DType type : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,
                     DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS, DType::kF8E4M3B128}) {
    // More tokens than the decode kernels' groups take (kQuantMoeGroupsMaxTokens).
    constexpr int64_t n = cuda::kQuantMoeGroupsMaxTokens + 8;
    CheckExperts(n, 1024, 768, 8, 4, SkewedIds(n, 8, 4, 5), seed, type);
    seed += 100;
  }
}

TEST(CudaMoe, FewTokenBf16ExpertsMatchTheOracle) {
  INFX_REQUIRE_GPU();
  for (int64_t n : {1, 2, 5, 12}) CheckExperts(n, 2048, 768, 16, 8, SkewedIds(n, 16, 8, 6 + n), 5000 + 100 * n);
  CheckExperts(2, 1024, 512, 32, 10, SkewedIds(2, 32, 10, 7), 5900);
}

}  // namespace
}  // namespace infernix
