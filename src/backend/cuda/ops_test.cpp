// CPU-vs-CUDA tests of the elementwise, norm, RoPE, copy and sampling ops at model-sized shapes.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "backend/cuda/f8_layout.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/test_util.h"
#include "quant/random_blocks.h"
#include "tensor/dummy_blocks.h"
#include "tensor/dummy_values.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

namespace infernix {
namespace {

using cuda_test::ExpectClose;
using cuda_test::Rand;
using cuda_test::Rig;

// bf16 outputs of f32 math: one rounding (2^-9 relative) on top of the oracle.
constexpr double kBf16L2 = 4e-3, kBf16Max = 8e-3;

// Rows of whole 16-byte chunks (2,048 and 5,128 wide: 256 and 641 chunks of the 1,024 a block takes per
// pass) take the vector path, others (100 wide) the element loop.
TEST(CudaOps, EmbeddingCopiesRowsExactly) {
  INFX_REQUIRE_GPU();
  for (int64_t h : {2048, 5128, 100}) {
    Rig rig;
    const int64_t vocab = 8192;
    auto table = rig.Weight(DType::kBF16, {vocab, h}, Rand(vocab * h, 1));
    std::vector<int32_t> ids = {0, 8191, 17, 17, 4096, 1, 5000};
    auto id = rig.I32({7}, ids);
    auto out = rig.Out({7, h});
    rig.cpu.Embedding(id.cpu, table.cpu, out.cpu);
    rig.gpu.Embedding(id.gpu, table.gpu, out.gpu);
    EXPECT_EQ(rig.Gpu(out.gpu), Rig::Cpu(out.cpu)) << "h " << h;
  }
}

TEST(CudaOps, RmsNormBothConventionsAndShapes) {
  INFX_REQUIRE_GPU();
  Rig rig;
  struct Case {
    int64_t rows, d;
    DType w_dtype;
    bool unit_offset;
  };
  for (Case c : {Case{7, 4096, DType::kBF16, false}, Case{5, 2048, DType::kBF16, true}, Case{64 * 8, 128, DType::kBF16, false},
                 Case{3, 100, DType::kF32, true}, Case{1, 5120, DType::kF32, false}}) {
    auto x = rig.Act({c.rows, c.d}, Rand(c.rows * c.d, c.d + c.rows, -3, 3));
    auto w = rig.Weight(c.w_dtype, {c.d}, Rand(c.d, 7 + c.d, 0.5f, 1.5f));
    auto out = rig.Out({c.rows, c.d});
    rig.cpu.RmsNorm(x.cpu, w.cpu, 1e-6f, c.unit_offset, out.cpu);
    rig.gpu.RmsNorm(x.gpu, w.gpu, 1e-6f, c.unit_offset, out.gpu);
    ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), kBf16L2, kBf16Max,
                "RmsNorm " + std::to_string(c.rows) + "x" + std::to_string(c.d) + (c.unit_offset ? " 1+w" : " w"));
  }
  // In place (q/k norm).
  auto x = rig.Act({256, 128}, Rand(256 * 128, 99, -2, 2));
  auto w = rig.Weight(DType::kBF16, {128}, Rand(128, 98, -0.2f, 0.2f));
  rig.cpu.RmsNorm(x.cpu, w.cpu, 1e-6f, true, x.cpu);
  rig.gpu.RmsNorm(x.gpu, w.gpu, 1e-6f, true, x.gpu);
  ExpectClose(rig.Gpu(x.gpu), Rig::Cpu(x.cpu), kBf16L2, kBf16Max, "RmsNorm in place");
}

TEST(CudaOps, GatedRmsNorm) {
  INFX_REQUIRE_GPU();
  Rig rig;
  for (int64_t d : {128, 16, 36}) {
    const int64_t rows = 7 * 32;
    auto x = rig.Act({rows, d}, Rand(rows * d, 3 + d, -2, 2));
    auto z = rig.Act({rows, d}, Rand(rows * d, 4 + d, -4, 4));
    auto w = rig.Weight(DType::kBF16, {d}, Rand(d, 5 + d, 0.5f, 1.5f));
    auto out = rig.Out({rows, d});
    rig.cpu.GatedRmsNorm(x.cpu, z.cpu, w.cpu, 1e-6f, out.cpu);
    rig.gpu.GatedRmsNorm(x.gpu, z.gpu, w.gpu, 1e-6f, out.gpu);
    ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), kBf16L2, kBf16Max, "GatedRmsNorm d=" + std::to_string(d));
  }
}

TEST(CudaOps, ElementwiseOps) {
  INFX_REQUIRE_GPU();
  Rig rig;
  for (int64_t n : {int64_t{7} * 12288, int64_t{1001}, int64_t{3}}) {
    auto a = rig.Act({n}, Rand(n, 10 + n, -6, 6));
    auto b = rig.Act({n}, Rand(n, 11 + n, -6, 6));
    std::string sz = " n=" + std::to_string(n);
    for (int op = 0; op < 3; ++op) {
      auto out = rig.Out({n});
      if (op == 0) {
        rig.cpu.Add(a.cpu, b.cpu, out.cpu);
        rig.gpu.Add(a.gpu, b.gpu, out.gpu);
      } else if (op == 1) {
        rig.cpu.SiluMul(a.cpu, b.cpu, out.cpu);
        rig.gpu.SiluMul(a.gpu, b.gpu, out.gpu);
      } else {
        rig.cpu.SigmoidMul(a.cpu, b.cpu, out.cpu);
        rig.gpu.SigmoidMul(a.gpu, b.gpu, out.gpu);
      }
      ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), kBf16L2, kBf16Max,
                  std::string(op == 0 ? "Add" : op == 1 ? "SiluMul" : "SigmoidMul") + sz);
    }
    // Aliased output (the models write gate = silu(gate) * up, hidden += x).
    rig.cpu.SiluMul(a.cpu, b.cpu, a.cpu);
    rig.gpu.SiluMul(a.gpu, b.gpu, a.gpu);
    ExpectClose(rig.Gpu(a.gpu), Rig::Cpu(a.cpu), kBf16L2, kBf16Max, "SiluMul in place" + sz);
  }
}

TEST(CudaOps, AddSigmoidGated) {
  INFX_REQUIRE_GPU();
  Rig rig;
  const int64_t n = 9, h = 2048;
  auto acc = rig.Act({n, h}, Rand(n * h, 20, -2, 2));
  auto x = rig.Act({n, h}, Rand(n * h, 21, -2, 2));
  auto gate = rig.F32({n, 1}, Rand(n, 22, -5, 5));
  rig.cpu.AddSigmoidGated(acc.cpu, x.cpu, gate.cpu);
  rig.gpu.AddSigmoidGated(acc.gpu, x.gpu, gate.gpu);
  ExpectClose(rig.Gpu(acc.gpu), Rig::Cpu(acc.cpu), kBf16L2, kBf16Max, "AddSigmoidGated");
}

TEST(CudaOps, SliceColumnsAndGatherRowsAreExact) {
  INFX_REQUIRE_GPU();
  Rig rig;
  const int64_t rows = 7 * 16, cols = 256;
  auto x = rig.Act({rows, cols}, Rand(rows * cols, 30));
  for (int64_t begin : {int64_t{0}, int64_t{128}, int64_t{3}}) {
    auto out = rig.Out({rows, 125});
    rig.cpu.SliceColumns(x.cpu, begin, out.cpu);
    rig.gpu.SliceColumns(x.gpu, begin, out.gpu);
    EXPECT_EQ(rig.Gpu(out.gpu), Rig::Cpu(out.cpu)) << "begin " << begin;
  }
  auto big = rig.Act({20, 4096}, Rand(20 * 4096, 31));
  std::vector<int32_t> pick = {19, 0, 5, 5};
  auto out = rig.Out({4, 4096});
  rig.cpu.GatherRows(big.cpu, pick, out.cpu);
  rig.gpu.GatherRows(big.gpu, pick, out.gpu);
  EXPECT_EQ(rig.Gpu(out.gpu), Rig::Cpu(out.cpu));
  auto f32 = rig.F32({6, 3}, Rand(18, 32));  // odd row bytes: the 4-byte path
  auto out32 = rig.Out({2, 3}, DType::kF32);
  rig.cpu.GatherRows(f32.cpu, {5, 1}, out32.cpu);
  rig.gpu.GatherRows(f32.gpu, {5, 1}, out32.gpu);
  EXPECT_EQ(rig.Gpu(out32.gpu), Rig::Cpu(out32.cpu));
}

TEST(CudaOps, RopeFullAndPartialAtLargePositions) {
  INFX_REQUIRE_GPU();
  Rig rig;
  struct Case {
    int64_t heads, d, half;
    double theta;
    float scale;
  };
  for (Case c : {Case{32, 128, 64, 1e6, 1.0f}, Case{16, 256, 32, 1e7, 1.0f}, Case{4, 64, 8, 1e4, 1.2f}}) {
    BatchLayout layout = cuda_test::MakeLayout({{0, 5, 0}, {1, 1, 40000}, {2, 3, 4093}});
    const int64_t n = layout.n_tokens;
    std::vector<float> inv(static_cast<size_t>(c.half));
    for (int64_t i = 0; i < c.half; ++i)
      inv[static_cast<size_t>(i)] = static_cast<float>(1.0 / std::pow(c.theta, 2.0 * i / (2.0 * c.half)));
    auto inv_freq = rig.F32({c.half}, inv);
    auto x = rig.Act({n, c.heads, c.d}, Rand(n * c.heads * c.d, 40 + c.d, -2, 2));
    rig.cpu.Rope(x.cpu, layout, inv_freq.cpu, c.scale);
    rig.gpu.Rope(x.gpu, layout, inv_freq.gpu, c.scale);
    ExpectClose(rig.Gpu(x.gpu), Rig::Cpu(x.cpu), kBf16L2, 1.5e-2, "Rope d=" + std::to_string(c.d) + " rotary " +
                                                                     std::to_string(2 * c.half));
  }
}

// Greedy picks on the device equal pick.h's on the host: ties across the blocks a row is split over,
// the best value in the padding past `sampleable`, NaN or +inf among the sampleable ids (and a NaN in the
// padding, which does not count), a row of -inf, the first and the last sampleable id; then as a
// backend's PickGreedy (only the ids read back), for more rows than one launch takes.
TEST(CudaSampling, GreedyPicksEqualTheHostPicks) {
  INFX_REQUIRE_GPU();
  Rig rig;
  const int64_t vocab = 151936, sampleable = vocab - 267, rows = 9;
  std::vector<float> logits = Rand(rows * vocab, 51, -20, 20);
  float* r = logits.data();
  r[100] = r[vocab - 300] = 30.0f;                      // row 0: a tie in the first and the last block
  r[vocab + sampleable] = 90.0f;                        // row 1: the largest is padding
  r[vocab + 5000] = 40.0f;
  r[2 * vocab + 77] = std::nanf("");                    // row 2: NaN
  r[3 * vocab + sampleable - 1] = INFINITY;             // row 3: +inf at the last sampleable id
  std::fill(r + 4 * vocab, r + 5 * vocab, -INFINITY);   // row 4: only -inf
  r[5 * vocab + vocab - 1] = std::nanf("");             // row 5: NaN in the padding only
  r[5 * vocab] = 35.0f;
  r[6 * vocab + sampleable - 1] = 35.0f;                // row 6: the last sampleable id
  r[7 * vocab + 3] = -INFINITY;                         // row 7: one -inf among finite values
  for (int64_t i = 0; i < vocab; ++i) r[8 * vocab + i] = 1.0f;  // row 8: all equal: id 0
  const std::vector<int32_t> want = PickGreedyRows(logits, rows, vocab, sampleable);
  EXPECT_EQ(want, (std::vector<int32_t>{100, 5000, -1, -1, -1, 0, static_cast<int32_t>(sampleable - 1), want[7], 0}));
  auto l = rig.F32({rows, vocab}, logits);
  auto ids = rig.gpu.Scratch(DType::kI32, {rows});
  rig.gpu.PickRowsOnDevice(l.gpu, sampleable, nullptr, ids);
  EXPECT_EQ(rig.GpuIds(ids), want);
  EXPECT_EQ(rig.gpu.PickGreedy(l.gpu, sampleable), want);
  // Token ids fed from those picks (pipelined greedy steps: FeedPickedTokens, the FeedTokens kernel), rows
  // without a pick as 0, read back and read by an Embedding.
  const std::vector<int32_t> map = {8, 0, 2, 6, 1, 4, 0};
  const std::vector<int32_t> fed_want = FeedFromPicks(want, map);
  const int64_t n = static_cast<int64_t>(map.size()), h = 64;
  auto fed = rig.gpu.Scratch(DType::kI32, {n});
  rig.gpu.FeedPickedTokens(map, fed);
  EXPECT_EQ(rig.GpuIds(fed), fed_want);
  auto table = rig.Weight(DType::kBF16, {vocab, h}, Rand(vocab * h, 53));
  auto id = rig.I32({n}, fed_want);
  auto out = rig.Out({n, h});
  rig.cpu.Embedding(id.cpu, table.cpu, out.cpu);
  auto fed_out = rig.gpu.Scratch(out.gpu.dtype, out.gpu.shape);
  auto fed_ids = rig.gpu.Scratch(DType::kI32, {n});
  rig.gpu.FeedPickedTokens(map, fed_ids);
  rig.gpu.Embedding(fed_ids, table.gpu, fed_out);
  EXPECT_EQ(rig.Gpu(fed_out), Rig::Cpu(out.cpu));
  EXPECT_EQ(rig.GpuIds(fed_ids), fed_want);
  // More rows than a launch takes (kGreedyMaxRows), in small rows.
  const int64_t many = cuda::kGreedyMaxRows + 37, cols = 300;
  std::vector<float> small = Rand(many * cols, 52, -5, 5);
  for (int64_t i = 0; i < many; i += 7) small[static_cast<size_t>(i * cols + (i % cols))] = 9.0f;
  auto s = rig.F32({many, cols}, small);
  EXPECT_EQ(rig.gpu.PickGreedy(s.gpu, cols - 1), PickGreedyRows(small, many, cols, cols - 1));
}

// A draw of varied settings for row r (CudaSampling's draw tests).
TokenDraw RandomDraw(int64_t r, std::mt19937_64& rng) {
  auto uniform = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  TokenDraw d;
  d.greedy = r % 11 == 5;
  const double temps[] = {0.05, 0.3, 0.6, 0.7, 1.0, 1.5};
  d.rule.inv_temp = static_cast<float>(1.0 / temps[rng() % 6]);
  d.rule.top_k = r % 9 == 0 ? kMaxPickTopK : 1 + static_cast<int64_t>(rng() % kMaxPickTopK);
  d.rule.top_p = r % 3 == 0 ? 1.0 : 0.5 + 0.5 * uniform();
  d.rule.min_p = r % 4 == 1 ? 0.2 * uniform() : 0.0;
  d.u = r % 13 == 0 ? 0.0 : r % 13 == 1 ? 1.0 - 0x1.0p-53 : uniform();
  return d;
}

// The backend's picks with draws, as the model queues them.
std::vector<int32_t> DevicePicks(Rig& rig, const Tensor& logits, int64_t sampleable,
                                 const std::vector<TokenDraw>& draws) {
  rig.gpu.StageDraws(draws);
  rig.gpu.QueuePick(logits, sampleable, draws);
  return rig.gpu.TakePick();
}

// Top-k draws on the device (StageDraws, QueuePick, TakePick: the DrawKernel) equal pick.h's PickRows, the
// engine's sampler's own draws, to the token: temperatures, top_k from 1 to kMaxPickTopK, top-p and min-p,
// uniforms near 0 and 1, greedy rows among drawn ones; ties across the blocks a row is split over and at the
// k-th place, the best value in the padding, NaN or +inf, only -inf, fewer finite values than top_k; a
// vocabulary of Qwen3.5's size.
TEST(CudaSampling, DrawsEqualTheHostDraws) {
  INFX_REQUIRE_GPU();
  Rig rig;
  std::mt19937_64 rng(77);
  for (const int64_t vocab : {int64_t{151936}, int64_t{248320}}) {
    const int64_t sampleable = vocab - 267, rows = 48;
    std::vector<float> logits = Rand(rows * vocab, 61 + vocab, -12, 12);
    std::vector<TokenDraw> draws;
    for (int64_t r = 0; r < rows; ++r) {
      float* row = logits.data() + r * vocab;
      for (int j = 0; j < 8; ++j) row[(r * 7919 + j * 15331) % sampleable] = 14.0f + static_cast<float>(j % 4);
      draws.push_back(RandomDraw(r, rng));
    }
    float* x = logits.data();
    std::fill(x, x + vocab, 1.0f);                                      // row 0: all equal: the k lowest ids
    x[vocab + 100] = x[vocab + vocab - 400] = x[vocab + 9000] = 20.0f;  // row 1: ties in the first and last block
    x[2 * vocab + sampleable] = 90.0f;                                  // row 2: the largest is padding
    x[3 * vocab + 77] = std::nanf("");                                  // row 3: NaN
    x[4 * vocab + sampleable - 1] = INFINITY;                           // row 4: +inf
    std::fill(x + 5 * vocab, x + 6 * vocab, -INFINITY);                 // row 5: only -inf
    std::fill(x + 6 * vocab, x + 7 * vocab, -INFINITY);                 // row 6: three finite values
    x[6 * vocab + 5] = 1.0f, x[6 * vocab + 70000] = 2.0f, x[6 * vocab + sampleable - 1] = 1.5f;
    for (int64_t i = 0; i < sampleable; i += 4000) x[7 * vocab + i] = 17.0f;  // row 7: 38 ties at the top
    draws[7].rule.top_k = 20;
    draws[6].rule.top_k = 20;
    draws[0].greedy = false;
    const std::vector<int32_t> want = PickRows(logits, rows, vocab, sampleable, draws);
    EXPECT_EQ(want[3], -1);
    EXPECT_EQ(want[4], -1);
    EXPECT_EQ(want[5], -1);
    EXPECT_NE(want[2], static_cast<int32_t>(sampleable));
    auto l = rig.F32({rows, vocab}, logits);
    EXPECT_EQ(DevicePicks(rig, l.gpu, sampleable, draws), want) << "vocabulary " << vocab;
    // Many uniforms over one row of Qwen's recommended settings: every draw the same token as the host's.
    if (vocab == 151936) {
      const int64_t same = 256;
      std::vector<float> repeated;
      std::vector<TokenDraw> many;
      for (int64_t r = 0; r < same; ++r) {
        repeated.insert(repeated.end(), logits.begin() + 8 * vocab, logits.begin() + 9 * vocab);
        TokenDraw d;
        d.greedy = false;
        d.rule.inv_temp = static_cast<float>(1.0 / 0.6);
        d.rule.top_k = 20;
        d.rule.top_p = 0.95;
        d.u = (static_cast<double>(r) + 0.5) / same;
        many.push_back(d);
      }
      const std::vector<int32_t> many_want = PickRows(repeated, same, vocab, sampleable, many);
      EXPECT_GT(std::set<int32_t>(many_want.begin(), many_want.end()).size(), 3u);
      auto rep = rig.F32({same, vocab}, repeated);
      EXPECT_EQ(DevicePicks(rig, rep.gpu, sampleable, many), many_want);
    }
  }
}

// More rows than a launch of the draw kernel takes (kGreedyMaxRows), in small rows.
TEST(CudaSampling, DrawsOfMoreRowsThanALaunchTakes) {
  INFX_REQUIRE_GPU();
  Rig rig;
  std::mt19937_64 rng(78);
  const int64_t many = cuda::kGreedyMaxRows + 37, cols = 300;
  std::vector<float> small = Rand(many * cols, 62, -5, 5);
  std::vector<TokenDraw> draws;
  for (int64_t r = 0; r < many; ++r) draws.push_back(RandomDraw(r, rng));
  auto s = rig.F32({many, cols}, small);
  EXPECT_EQ(DevicePicks(rig, s.gpu, cols - 1, draws), PickRows(small, many, cols, cols - 1, draws));
}

TEST(CudaSampling, ArgmaxTopKLogSumExp) {
  INFX_REQUIRE_GPU();
  Rig rig;
  const int64_t rows = 3, vocab = 151936;
  std::vector<float> logits = Rand(rows * vocab, 50, -20, 20);
  logits[100] = logits[200] = 30.0f;                 // row 0: a tie, lower index wins
  logits[vocab + vocab - 1] = 40.0f;                 // row 1: the last index
  for (int64_t i = 0; i < 50; ++i) logits[2 * vocab + 7 * i] = 25.0f;  // row 2: 50-way tie
  auto l = rig.F32({rows, vocab}, logits);
  const int k = 40;
  auto ids = rig.gpu.Scratch(DType::kI32, {rows});
  auto top_v = rig.gpu.Scratch(DType::kF32, {rows, k});
  auto top_i = rig.gpu.Scratch(DType::kI32, {rows, k});
  auto lse = rig.gpu.Scratch(DType::kF32, {rows});
  rig.gpu.PickRowsOnDevice(l.gpu, vocab, nullptr, ids);
  rig.gpu.TopKRows(l.gpu, k, top_v, top_i);
  rig.gpu.LogSumExpRows(l.gpu, lse);
  std::vector<float> got_ids = rig.Gpu(ids), got_v = rig.Gpu(top_v), got_i = rig.Gpu(top_i), got_lse = rig.Gpu(lse);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * vocab;
    std::vector<int32_t> order(static_cast<size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    EXPECT_EQ(static_cast<int32_t>(got_ids[static_cast<size_t>(r)]), order[0]) << "row " << r;
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(static_cast<int32_t>(got_i[static_cast<size_t>(r * k + j)]), order[static_cast<size_t>(j)])
          << "row " << r << " rank " << j;
      EXPECT_EQ(got_v[static_cast<size_t>(r * k + j)], row[order[static_cast<size_t>(j)]]);
    }
    double mx = *std::max_element(row, row + vocab), sum = 0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - mx);
    EXPECT_NEAR(got_lse[static_cast<size_t>(r)], mx + std::log(sum), 1e-4 * std::fabs(mx + std::log(sum)));
  }
}

// Dummy weights made in device memory hold the host fill's bytes (tensor/dummy_values.h,
// tensor/dummy_blocks.h): the fill kernels alone on one block of each kind, then through the backend.
std::string Hex(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", p[i]);
  return s;
}

TEST(CudaOps, DummyBlocksEqualTheHostFill) {
  INFX_REQUIRE_GPU();
  Rig rig;
  const uint64_t seed = 12345;
  for (DType t : {DType::kQ8_0, DType::kQ4_1, DType::kQ4_K, DType::kF8E4M3B128}) {
    const size_t block = DTypeBlockBytes(t), bytes = 3 * block;
    const DummyBlockScheme b = DummyBlockSchemeOf(t, 0.5f);
    void* dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, bytes), cudaSuccess);
    cuda::LaunchDummyBlocks(nullptr, dev, bytes, block, seed, cuda::DummyBlockFields{b.fp8 ? 1 : 0, b.d_at, b.min_at, b.d});
    std::vector<uint8_t> got(bytes);
    ASSERT_EQ(cudaMemcpy(got.data(), dev, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(dev);
    HostBuffer want = RandomQuantBlocks(t, 3, DTypeBlockSize(t), seed, 0.5f);
    const auto* w = static_cast<const uint8_t*>(want.view().data);
    const float d0 = b.d * DummyBlockFactor(seed, 0);
    EXPECT_EQ(Hex(got.data(), bytes), Hex(w, bytes))
        << DTypeName(t) << ": the kernels alone (d " << b.d << ", block 0's scale " << d0 << ", f16 "
        << fmt::format("{:04x}", F32ToF16(d0)) << ")";
    std::optional<Tensor> made = rig.gpu.MakeDummyWeight(t, {3, DTypeBlockSize(t)}, seed, 0.5f);
    ASSERT_TRUE(made.has_value());
    std::vector<uint8_t> via(bytes);
    rig.gpu.CopyToHost(*made, via.data());
    // FP8 weights end in the device layout (f8_layout.h), the rest as the host holds them.
    const std::vector<uint8_t> want_device =
        t == DType::kF8E4M3B128 ? cuda::F8DeviceRows(w, 3, DTypeBlockSize(t)) : std::vector<uint8_t>(w, w + bytes);
    EXPECT_EQ(Hex(via.data(), bytes), Hex(want_device.data(), bytes)) << DTypeName(t) << ": through MakeDummyWeight";
  }
}

// FP8 weights reach the GPU reordered into the device layout every FP8 kernel reads (f8_layout.h): each
// row's codes, then its block scales. Rows of 1, 5 and 520 blocks (the last takes more than the default
// 48 KB of shared memory per block), a 3-D tensor of experts among them.
TEST(CudaOps, Fp8WeightsTakeTheDeviceLayout) {
  INFX_REQUIRE_GPU();
  Rig rig;
  for (const Shape& shape : {Shape{3, 128}, Shape{4, 7, 640}, Shape{2, 520 * 128}}) {
    const int64_t k = shape[shape.ndim - 1], rows = shape.numel() / k;
    HostBuffer host = RandomQuantBlocks(DType::kF8E4M3B128, rows, k, 7, 0.5f);
    const auto* h = static_cast<const uint8_t*>(host.view().data);
    const Tensor up = rig.gpu.UploadWeight(Tensor{host.view().data, DType::kF8E4M3B128, shape});
    std::vector<uint8_t> got(up.size_bytes());
    rig.gpu.CopyToHost(up, got.data());
    const std::vector<uint8_t> want = cuda::F8DeviceRows(h, rows, k);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(got == want) << shape.ToString() << ": first difference at byte "
                             << std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin();
    // The layout itself, at one place: row 1's block 0 scale sits after the row's k codes.
    EXPECT_EQ(0, std::memcmp(want.data() + cuda::F8RowBytes(k) + k, h + cuda::F8RowBytes(k), 4));
    EXPECT_EQ(0, std::memcmp(want.data() + cuda::F8RowBytes(k), h + cuda::F8RowBytes(k) + 4, 128));
  }
}

}  // namespace
}  // namespace infernix
