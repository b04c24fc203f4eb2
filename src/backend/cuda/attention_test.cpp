// CPU-vs-CUDA tests of attention over the paged KV cache: a prefill, decode steps and a mixed batch
// (decode + continued chunk + fresh prompt) in sequence, for each kernel (flash, split-KV: on tensor
// cores, and on CUDA cores for head_dim not a multiple of 8) and head shape (GQA groups 1..16, head_dim
// 32..256, one not a multiple of 8), and a long-context decode.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "backend/cuda/check.h"
#include "backend/cuda/state.h"
#include "backend/cuda/test_util.h"
#include "quant/kv_f8.h"
#include "quant/random_blocks.h"

namespace infernix {
namespace {

using cuda_test::ExpectClose;
using cuda_test::ExpectSameBits;
using cuda_test::MakeLayout;
using cuda_test::Pair;
using cuda_test::Rand;
using cuda_test::Rig;

struct Heads {
  int hq, hkv, d;
};

const char* ModeName(CudaOptions::Attention a) {
  return a == CudaOptions::Attention::kFlash ? "flash" : a == CudaOptions::Attention::kSplit ? "split" : "auto";
}

// Sequence state of attention layers with these heads.
StateSpec Spec(Heads h, int max_slots, int64_t max_context, int layers,
               KvCacheType kv_type = KvCacheType::kActivation) {
  StateSpec spec;
  spec.kv_type = kv_type;
  spec.max_slots = max_slots;
  spec.max_context = max_context;
  spec.n_attention_layers = layers;
  spec.n_kv_heads = h.hkv;
  spec.head_dim = h.d;
  return spec;
}

// The rows a test appended to an FP8 cache, (slot, position) -> the bf16 key and value rows [hkv][d] the
// GPU stored; Expect compares the cache's codes and scales with the host's encoding of them
// (quant/kv_f8.h), bit for bit.
class CacheRows {
 public:
  void Add(const BatchLayout& layout, Heads h, const std::vector<float>& k, const std::vector<float>& v) {
    const size_t row = static_cast<size_t>(h.hkv * h.d);
    int64_t t = 0;
    for (const auto& s : layout.seqs)
      for (int64_t j = 0; j < s.n_tokens; ++j, ++t) {
        auto& r = rows_[{s.slot, s.pos_begin + j}];
        r.k.assign(k.begin() + static_cast<ptrdiff_t>(t * row), k.begin() + static_cast<ptrdiff_t>((t + 1) * row));
        r.v.assign(v.begin() + static_cast<ptrdiff_t>(t * row), v.begin() + static_cast<ptrdiff_t>((t + 1) * row));
      }
  }
  void Expect(Rig& rig, SequenceState& state, int layer, Heads h) const {
    rig.gpu.Synchronize();
    const cuda::KvCacheView kv = AsCudaState(state, &rig.gpu).Kv(layer);
    ASSERT_TRUE(kv.f8());
    const int64_t rows = static_cast<int64_t>(state.spec().max_slots) * kv.pages_per_slot * h.hkv * cuda::kPageSize;
    std::vector<uint8_t> kc(static_cast<size_t>(rows * h.d)), vc(kc.size());
    std::vector<float> ks(static_cast<size_t>(rows)), vs(ks.size());
    INFX_CUDA_CHECK(cudaMemcpy(kc.data(), kv.k_pages, kc.size(), cudaMemcpyDeviceToHost));
    INFX_CUDA_CHECK(cudaMemcpy(vc.data(), kv.v_pages, vc.size(), cudaMemcpyDeviceToHost));
    INFX_CUDA_CHECK(cudaMemcpy(ks.data(), kv.k_scale, ks.size() * sizeof(float), cudaMemcpyDeviceToHost));
    INFX_CUDA_CHECK(cudaMemcpy(vs.data(), kv.v_scale, vs.size() * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    std::vector<uint8_t> want(static_cast<size_t>(h.d));
    for (const auto& [key, r] : rows_) {
      const auto [slot, pos] = key;
      const int64_t page = static_cast<int64_t>(slot) * kv.pages_per_slot + pos / cuda::kPageSize;  // identity table
      for (int hh = 0; hh < h.hkv; ++hh) {
        const int64_t row = (page * h.hkv + hh) * cuda::kPageSize + pos % cuda::kPageSize;
        for (int which = 0; which < 2; ++which) {
          const float* x = (which == 0 ? r.k : r.v).data() + hh * h.d;
          const int e = quant::KvF8EncodeRow(x, h.d, want.data());
          const uint8_t* got = (which == 0 ? kc : vc).data() + row * h.d;
          const float scale = (which == 0 ? ks : vs)[static_cast<size_t>(row)];
          const bool same = std::equal(want.begin(), want.end(), got) && scale == std::ldexp(1.0f, e);
          if (!same && ++bad <= 5)
            ADD_FAILURE() << (which == 0 ? "key" : "value") << " row of slot " << slot << " pos " << pos << " head "
                          << hh << " differs from the host's encoding (scale " << scale << ", want 2^" << e << ")";
        }
      }
    }
    EXPECT_EQ(bad, 0);
    EXPECT_FALSE(rows_.empty());
  }

 private:
  struct Row {
    std::vector<float> k, v;
  };
  std::map<std::pair<int, int64_t>, Row> rows_;
};

// Runs the steps on both backends and compares every step's output; gated: then out *= sigmoid(gate), the
// gated attention's output gate (on the GPU the split kernels' combine multiplies as it writes).
void RunSteps(CudaOptions::Attention mode, Heads h, int64_t max_context,
              const std::vector<std::vector<std::array<int64_t, 3>>>& steps, uint64_t seed, bool gated = false,
              KvCacheType kv_type = KvCacheType::kActivation) {
  CudaOptions o;
  o.attention = mode;
  Rig rig(o);
  const StateSpec spec = Spec(h, 3, max_context, 2, kv_type);
  auto cs = rig.cpu.CreateState(spec);
  auto gs = rig.gpu.CreateState(spec);
  const float scale = 1.0f / std::sqrt(static_cast<float>(h.d));
  CacheRows rows;  // FP8: the rows each step leaves
  for (size_t i = 0; i < steps.size(); ++i) {
    BatchLayout layout = MakeLayout(steps[i]);
    const int64_t n = layout.n_tokens;
    auto q = rig.Act({n, h.hq, h.d}, Rand(n * h.hq * h.d, seed + 3 * i, -2, 2));
    auto k = rig.Act({n, h.hkv, h.d}, Rand(n * h.hkv * h.d, seed + 3 * i + 1, -2, 2));
    auto v = rig.Act({n, h.hkv, h.d}, Rand(n * h.hkv * h.d, seed + 3 * i + 2, -2, 2));
    auto out = rig.Out({n, h.hq, h.d});
    rig.cpu.Attention(q.cpu, k.cpu, v.cpu, *cs, 1, layout, scale, out.cpu);
    rig.gpu.Attention(q.gpu, k.gpu, v.gpu, *gs, 1, layout, scale, out.gpu);
    if (gated) {
      auto gate = rig.Act({n, h.hq * h.d}, Rand(n * h.hq * h.d, seed + 3 * i + 7, -4, 4));
      const Shape flat{n, h.hq * h.d};
      rig.cpu.SigmoidMul(out.cpu.Reshaped(flat), gate.cpu, out.cpu.Reshaped(flat));
      rig.gpu.SigmoidMul(out.gpu.Reshaped(flat), gate.gpu, out.gpu.Reshaped(flat));
    }
    cs->Advance(layout);
    gs->Advance(layout);
    if (kv_type == KvCacheType::kF8E4M3) rows.Add(layout, h, Rig::Cpu(k.cpu), Rig::Cpu(v.cpu));
    ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), 1e-2, 3e-2,
                fmt::format("attention {} hq={} hkv={} d={} gated={} fp8={} step {}", ModeName(mode), h.hq, h.hkv, h.d,
                            gated, kv_type == KvCacheType::kF8E4M3, i));
  }
  if (kv_type == KvCacheType::kF8E4M3) rows.Expect(rig, *gs, 1, h);
}

TEST(CudaAttention, PrefillDecodeAndMixedBatches) {
  INFX_REQUIRE_GPU();
  const std::vector<std::vector<std::array<int64_t, 3>>> steps = {
      {{0, 150, 0}},                         // prefill: two full pages and a partial one
      {{0, 1, 150}, {1, 70, 0}},             // decode + a fresh prompt
      {{0, 1, 151}, {1, 1, 70}, {2, 5, 0}},  // decode, decode, fresh
      {{1, 65, 71}, {0, 1, 152}},            // a chunk continuing mid-page, then a decode
  };
  uint64_t seed = 1000;
  for (Heads h :
       {Heads{32, 8, 128}, Heads{16, 2, 256}, Heads{4, 2, 64}, Heads{2, 1, 32}, Heads{8, 8, 80}, Heads{4, 2, 36}})
    for (auto mode : {CudaOptions::Attention::kFlash, CudaOptions::Attention::kSplit, CudaOptions::Attention::kAuto})
      RunSteps(mode, h, 512, steps, seed += 100);
}

// Qwen3-Next's gated attention (16 query heads of 256 over 2 KV heads) and a Qwen3-8B-like shape, with the
// output gate after the attention: joined to the split kernels' combine at decode.
TEST(CudaAttention, OutputGateAfterTheAttention) {
  INFX_REQUIRE_GPU();
  const std::vector<std::vector<std::array<int64_t, 3>>> steps = {
      {{0, 70, 0}}, {{0, 1, 70}}, {{0, 1, 71}, {1, 3, 0}}, {{0, 1, 72}, {1, 1, 3}}};
  uint64_t seed = 8000;
  for (Heads h : {Heads{16, 2, 256}, Heads{32, 8, 128}})
    for (auto mode : {CudaOptions::Attention::kSplit, CudaOptions::Attention::kAuto})
      RunSteps(mode, h, 512, steps, seed += 100, /*gated=*/true);
}

// Attention after the q/k norms and RoPE, as the models call them (on the GPU: one kernel prepares q, k and
// v and appends k and v to the cache, kv_cache.cu; at decode, when every sequence has one new token, the
// attention kernel itself prepares them and merges its splits, attention_decode_mma.cu). The prepared q and
// k (written back in place), the output (times the sigmoid of an output gate when gated) and the next
// steps (which read the cached rows) must match the CPU, for a decode split over the context and for one
// of a single split. discard: the caller discards q, k and v after the attention (Backend::Discard, as the
// models do), so their rows are not compared; the output and the next steps still are.
void RunPreparedSteps(Heads h, int max_slots, const std::vector<std::vector<std::array<int64_t, 3>>>& steps,
                      uint64_t seed, int64_t max_context = 1024, bool gated = false,
                      KvCacheType kv_type = KvCacheType::kActivation, bool discard = false) {
  Rig rig;
  const StateSpec spec = Spec(h, max_slots, max_context, 1, kv_type);
  const bool f8 = kv_type == KvCacheType::kF8E4M3;
  CacheRows rows;  // FP8: the rows each step leaves, from the GPU's prepared k and its v
  auto cs = rig.cpu.CreateState(spec);
  auto gs = rig.gpu.CreateState(spec);
  const float scale = 1.0f / std::sqrt(static_cast<float>(h.d));
  const int64_t half = h.d / 2 - 4;  // partial rotary
  std::vector<float> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) freq[static_cast<size_t>(i)] = std::pow(10000.0f, -static_cast<float>(i) / half);
  auto inv_freq = rig.Weight(DType::kF32, {half}, freq);
  auto qn = rig.Weight(DType::kBF16, {h.d}, Rand(h.d, seed, 0.5f, 1.5f));
  auto kn = rig.Weight(DType::kF32, {h.d}, Rand(h.d, seed + 1, -0.5f, 0.5f));
  for (size_t i = 0; i < steps.size(); ++i) {
    BatchLayout layout = MakeLayout(steps[i]);
    const int64_t n = layout.n_tokens;
    auto q = rig.Act({n, h.hq, h.d}, Rand(n * h.hq * h.d, seed + 3 * i + 2, -2, 2));
    auto k = rig.Act({n, h.hkv, h.d}, Rand(n * h.hkv * h.d, seed + 3 * i + 3, -2, 2));
    auto v = rig.Act({n, h.hkv, h.d}, Rand(n * h.hkv * h.d, seed + 3 * i + 4, -2, 2));
    auto out = rig.Out({n, h.hq, h.d});
    auto gate = rig.Act({n, h.hq * h.d}, Rand(n * h.hq * h.d, seed + 3 * i + 5, -4, 4));
    auto run = [&](Backend& be, SequenceState& st, Tensor Pair::*side) {
      Tensor qt = q.*side, kt = k.*side;
      be.RmsNorm(qt.Reshaped({n * h.hq, h.d}), qn.*side, 1e-6f, false, qt.Reshaped({n * h.hq, h.d}));
      be.RmsNorm(kt.Reshaped({n * h.hkv, h.d}), kn.*side, 1e-6f, true, kt.Reshaped({n * h.hkv, h.d}));
      be.Rope(qt, layout, inv_freq.*side, 1.0f);
      be.Rope(kt, layout, inv_freq.*side, 1.0f);
      be.Attention(qt, kt, v.*side, st, 0, layout, scale, out.*side);
      if (discard) {
        for (const Tensor* t : {&qt, &kt, &(v.*side)}) be.Discard(*t);
      }
      if (gated) {
        const Shape flat{n, h.hq * h.d};
        be.SigmoidMul((out.*side).Reshaped(flat), gate.*side, (out.*side).Reshaped(flat));
      }
      st.Advance(layout);
    };
    run(rig.cpu, *cs, &Pair::cpu);
    run(rig.gpu, *gs, &Pair::gpu);
    const std::string what =
        fmt::format("hq={} hkv={} d={} gated={} fp8={} step {} ({} tokens)", h.hq, h.hkv, h.d, gated, f8, i, n);
    if (!discard) {
      ExpectClose(rig.Gpu(q.gpu), Rig::Cpu(q.cpu), 4e-3, 1e-2, "prepared q " + what);
      ExpectClose(rig.Gpu(k.gpu), Rig::Cpu(k.cpu), 4e-3, 1e-2, "prepared k " + what);
    }
    // FP8: the CPU's f32 norm and RoPE may put a key on the other side of an E4M3 rounding boundary
    // than the GPU's bf16 ones, a step of 1/8 to 1/16 in that value.
    ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), f8 ? 2e-2 : 1e-2, f8 ? 1e-1 : 3e-2,
                "attention of prepared inputs " + what);
    if (f8 && !discard) rows.Add(layout, h, rig.Gpu(k.gpu), rig.Gpu(v.gpu));  // (discarded: k not prepared in place)
  }
  if (f8 && !discard) rows.Expect(rig, *gs, 0, h);
}

TEST(CudaAttention, PreparedInputsAndTheCacheRowsTheyLeave) {
  INFX_REQUIRE_GPU();
  // A prefill, then decode steps split over the context.
  RunPreparedSteps(Heads{32, 8, 128}, 3, {{{0, 40, 0}}, {{0, 1, 40}, {1, 1, 0}}, {{0, 1, 41}, {1, 1, 1}, {2, 1, 0}}},
                   2000);
  // Enough sequences for one split per (token, KV head), head_dim 64.
  std::vector<std::array<int64_t, 3>> first, second;
  for (int64_t s = 0; s < 48; ++s) {
    first.push_back({s, 1, 0});
    second.push_back({s, 1, 1});
  }
  RunPreparedSteps(Heads{16, 8, 64}, 48, {first, second}, 2100);
}

// The same steps with q, k and v discarded after each attention (the models' calls): the fused kernel then
// writes no prepared row back and its blocks sharing a group's query heads do not count each other out; the
// outputs, and the next steps through the cache rows, must still match the CPU (one split with shared query
// heads, a context over many splits, and the plain kernels at head_dim 256).
TEST(CudaAttention, PreparedDecodeWithDiscardedInputs) {
  INFX_REQUIRE_GPU();
  RunPreparedSteps(Heads{32, 8, 128}, 3, {{{0, 40, 0}}, {{0, 1, 40}, {1, 1, 0}}, {{0, 1, 41}, {1, 1, 1}, {2, 1, 0}}},
                   2050, 1024, false, KvCacheType::kActivation, /*discard=*/true);
  const std::vector<std::vector<std::array<int64_t, 3>>> steps = {
      {{0, 3000, 0}}, {{0, 1, 3000}}, {{0, 1, 3001}, {1, 1, 0}}, {{0, 1, 3002}, {1, 1, 1}}};
  RunPreparedSteps(Heads{32, 8, 128}, 2, steps, 2250, 4096, false, KvCacheType::kActivation, /*discard=*/true);
  RunPreparedSteps(Heads{16, 2, 256}, 2, steps, 2350, 4096, /*gated=*/true, KvCacheType::kActivation,
                   /*discard=*/true);
  RunPreparedSteps(Heads{8, 2, 64}, 2, steps, 2450, 4096, /*gated=*/true, KvCacheType::kF8E4M3, /*discard=*/true);
}

// Decode after a long prefill, so that the context spreads over many splits that the last one to finish
// merges (the fused kernel, up to head_dim 128): Qwen3-8B's heads, and a gated attention at head_dim 64
// (partial RoPE, output gate). Qwen3-Next's gated attention (head_dim 256) takes the unfused kernels, whose
// prep and combine then run over the same steps.
TEST(CudaAttention, PreparedDecodeMergesManySplits) {
  INFX_REQUIRE_GPU();
  const std::vector<std::vector<std::array<int64_t, 3>>> steps = {
      {{0, 3000, 0}}, {{0, 1, 3000}}, {{0, 1, 3001}, {1, 1, 0}}, {{0, 1, 3002}, {1, 1, 1}}};
  RunPreparedSteps(Heads{32, 8, 128}, 2, steps, 2200, 4096);
  RunPreparedSteps(Heads{16, 2, 256}, 2, steps, 2300, 4096, /*gated=*/true);
  RunPreparedSteps(Heads{8, 2, 64}, 2, steps, 2400, 4096, /*gated=*/true);
  // head_dim 80 in the kernel built for 128: the columns past head_dim in the merge and the output.
  RunPreparedSteps(Heads{8, 2, 80}, 2, steps, 2450, 4096);
}

// At 2-32 tokens the fused decode attention that a quantized product reads next rounds its output rows to int8
// for it as it writes them (DecodeAttentionFusion::xq, kGemvXInt8): in one split (the blocks sharing the query
// heads) and where the last split to finish merges (a long context), for 16- and 32-value scale groups. The
// product must equal, bit for bit, the same product of the same rows rounded by the product itself (after a
// bf16 product between them has flushed everything held); the output against the CPU is the tests' above.
TEST(CudaAttention, PreparedDecodeRoundsItsOutputForQuantizedProducts) {
  INFX_REQUIRE_GPU();
  uint64_t seed = 2700;
  for (Heads h : {Heads{32, 8, 128}, Heads{16, 8, 64}}) {
    for (int64_t prefix : {int64_t{40}, int64_t{3000}}) {
      const int slots = prefix > 1000 ? 3 : 32;
      Rig rig;
      auto gs = rig.gpu.CreateState(Spec(h, slots, 4096, 1));
      const float scale = 1.0f / std::sqrt(static_cast<float>(h.d));
      const int64_t half = h.d / 2, cols = int64_t{h.hq} * h.d, m = 520;
      std::vector<float> freq(static_cast<size_t>(half));
      for (int64_t i = 0; i < half; ++i)
        freq[static_cast<size_t>(i)] = std::pow(10000.0f, -static_cast<float>(i) / half);
      auto inv_freq = rig.Weight(DType::kF32, {half}, freq);
      auto qn = rig.Weight(DType::kBF16, {h.d}, Rand(h.d, seed++, 0.5f, 1.5f));
      auto kn = rig.Weight(DType::kBF16, {h.d}, Rand(h.d, seed++, 0.5f, 1.5f));
      auto wb = rig.Weight(DType::kBF16, {m, cols}, Rand(m * cols, seed++, -0.05f, 0.05f));
      std::vector<Tensor> wq;
      std::vector<DType> types = {DType::kQ4_K, DType::kQ6_K, DType::kQ8_0};
      std::vector<HostBuffer> packed;
      for (DType type : types) packed.push_back(RandomQuantBlocks(type, m, cols, seed++, 0.05f));
      for (const HostBuffer& p : packed) wq.push_back(rig.gpu.UploadWeight(p.view()));
      // The prefill of every sequence, then decode steps of 2, 3 and (with 32 sequences) 8, 16 and 32 tokens.
      std::vector<std::vector<std::array<int64_t, 3>>> steps(1);
      for (int s = 0; s < slots; ++s) steps[0].push_back({s, prefix, 0});
      std::vector<int64_t> pos(static_cast<size_t>(slots), prefix);
      for (int64_t n : {2, 3, 8, 16, 32, 2}) {  // 16, 32: the wide product (q8_0 at 32 tokens of 4,096: per group)
        if (n > slots) continue;
        std::vector<std::array<int64_t, 3>> step;
        for (int64_t s = 0; s < n; ++s) step.push_back({s, 1, pos[static_cast<size_t>(s)]++});
        steps.push_back(step);
      }
      for (size_t i = 0; i < steps.size(); ++i) {
        BatchLayout layout = MakeLayout(steps[i]);
        const int64_t n = layout.n_tokens;
        auto q = rig.Act({n, h.hq, h.d}, Rand(n * cols, seed++, -2, 2));
        auto k = rig.Act({n, h.hkv, h.d}, Rand(n * h.hkv * h.d, seed++, -2, 2));
        auto v = rig.Act({n, h.hkv, h.d}, Rand(n * h.hkv * h.d, seed++, -2, 2));
        auto out = rig.Out({n, h.hq, h.d});
        Backend& be = rig.gpu;
        be.RmsNorm(q.gpu.Reshaped({n * h.hq, h.d}), qn.gpu, 1e-6f, false, q.gpu.Reshaped({n * h.hq, h.d}));
        be.RmsNorm(k.gpu.Reshaped({n * h.hkv, h.d}), kn.gpu, 1e-6f, false, k.gpu.Reshaped({n * h.hkv, h.d}));
        be.Rope(q.gpu, layout, inv_freq.gpu, 1.0f);
        be.Rope(k.gpu, layout, inv_freq.gpu, 1.0f);
        be.Attention(q.gpu, k.gpu, v.gpu, *gs, 0, layout, scale, out.gpu);
        gs->Advance(layout);
        if (i == 0) continue;  // the prefill
        const size_t ti = i % types.size();
        const Tensor flat = out.gpu.Reshaped({n, cols});
        auto rounded = rig.Out({n, m}), between = rig.Out({n, m}), itself = rig.Out({n, m});
        be.MatMul(flat, wq[ti], rounded.gpu);  // x rounded by the attention
        be.MatMul(flat, wb.gpu, between.gpu);
        be.MatMul(flat, wq[ti], itself.gpu);  // x rounded by the product
        ExpectSameBits(rig.Gpu(rounded.gpu), rig.Gpu(itself.gpu),
                       fmt::format("{} hq={} d={} context {} step {} ({} tokens)", DTypeName(types[ti]), h.hq, h.d,
                                   prefix, i, n));
      }
    }
  }
}

// Contexts on both sides of DecodeAttentionFusion::one_split_pages (2 pages of 64 keys): 128 keys in one
// split that loads its second page after the first, then 129 and 130 spread over one-page splits that the
// last to finish merges, beside a sequence of one page.
TEST(CudaAttention, PreparedDecodeAroundTheOneSplitLimit) {
  INFX_REQUIRE_GPU();
  const std::vector<std::vector<std::array<int64_t, 3>>> steps = {
      {{0, 127, 0}}, {{0, 1, 127}}, {{0, 1, 128}}, {{0, 1, 129}, {1, 1, 0}}};
  RunPreparedSteps(Heads{32, 8, 128}, 2, steps, 2500);
  RunPreparedSteps(Heads{16, 8, 64}, 2, steps, 2600, 1024, /*gated=*/true);
}

TEST(CudaAttention, LongContextDecodeSplitsTheSequence) {
  INFX_REQUIRE_GPU();
  const std::vector<std::vector<std::array<int64_t, 3>>> steps = {
      {{0, 3000, 0}}, {{0, 1, 3000}}, {{0, 1, 3001}, {1, 1, 0}}};
  RunSteps(CudaOptions::Attention::kAuto, Heads{8, 2, 128}, 4096, steps, 77);
  // Many KV heads leave few splits (as many blocks as are resident): each split then walks several
  // double-buffered sub-tiles of 32 keys (CUDA cores, head_dim 36) or several KV pages through the
  // tensor-core kernel's ring of page buffers (head_dim 256 on a 132-SM H200: one block per SM, 8
  // splits of 6 pages at one token, 12 pages at two, so the ring of 3 wraps), and a partial last one.
  RunSteps(CudaOptions::Attention::kSplit, Heads{16, 16, 64}, 4096, steps, 78);
  RunSteps(CudaOptions::Attention::kSplit, Heads{16, 16, 256}, 4096, steps, 80);
  RunSteps(CudaOptions::Attention::kSplit, Heads{8, 8, 36}, 4096, steps, 79);
}

// An FP8 cache (StateSpec::kv_type): every kernel that reads it (flash, split-KV on tensor cores and on CUDA
// cores, the fused decode) against the CPU's attention over the same decoded values, and every kernel that
// writes it (the plain append, the preparation kernel, the fused decode's new key and value) against the
// host's encoder, bit for bit.
TEST(CudaAttention, Fp8CachePrefillDecodeAndMixedBatches) {
  INFX_REQUIRE_GPU();
  const std::vector<std::vector<std::array<int64_t, 3>>> steps = {
      {{0, 150, 0}}, {{0, 1, 150}, {1, 70, 0}}, {{0, 1, 151}, {1, 1, 70}, {2, 5, 0}}, {{1, 65, 71}, {0, 1, 152}}};
  uint64_t seed = 9000;
  // head_dim 40 and 36: not a multiple of 16, so the CUDA-core kernels read the FP8 pages.
  for (Heads h :
       {Heads{32, 8, 128}, Heads{16, 2, 256}, Heads{4, 2, 64}, Heads{8, 8, 80}, Heads{4, 2, 40}, Heads{4, 2, 36}})
    for (auto mode : {CudaOptions::Attention::kFlash, CudaOptions::Attention::kSplit, CudaOptions::Attention::kAuto})
      RunSteps(mode, h, 512, steps, seed += 100, false, KvCacheType::kF8E4M3);
  RunSteps(CudaOptions::Attention::kSplit, Heads{16, 16, 256}, 4096, {{{0, 3000, 0}}, {{0, 1, 3000}}}, 9900, false,
           KvCacheType::kF8E4M3);  // the ring of raw pages wraps
}

TEST(CudaAttention, Fp8CacheWithPreparedInputs) {
  INFX_REQUIRE_GPU();
  const std::vector<std::vector<std::array<int64_t, 3>>> steps = {
      {{0, 3000, 0}}, {{0, 1, 3000}}, {{0, 1, 3001}, {1, 1, 0}}, {{0, 1, 3002}, {1, 1, 1}}};
  RunPreparedSteps(Heads{32, 8, 128}, 2, steps, 9100, 4096, false, KvCacheType::kF8E4M3);
  RunPreparedSteps(Heads{16, 2, 256}, 2, steps, 9200, 4096, /*gated=*/true, KvCacheType::kF8E4M3);
  RunPreparedSteps(Heads{8, 2, 64}, 2, steps, 9300, 4096, /*gated=*/true, KvCacheType::kF8E4M3);
  RunPreparedSteps(Heads{32, 8, 128}, 2, {{{0, 127, 0}}, {{0, 1, 127}}, {{0, 1, 128}}, {{0, 1, 129}, {1, 1, 0}}}, 9400,
                   1024, false, KvCacheType::kF8E4M3);
}

}  // namespace
}  // namespace infernix
