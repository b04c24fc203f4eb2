// CPU-vs-CUDA tests of the Gated DeltaNet prefill kernels: the chunked delta rule (gdn_chunked.cu, taken
// when a batch's longest sequence has kGdnChunkedMinTokens tokens or more) and the parallel causal
// conv1d (gdn.cu, from kConvParallelMinTokens on). Each test runs a schedule of batches on one state:
// prompts of many lengths (partial chunks, exact chunks, one token), batches that mix lengths, decode
// steps on the recurrent kernels, and prefills that continue from the state those left. Outputs and the
// states themselves are compared after every step; a failure names the worst element (sequence, token,
// head, column) and prints each sequence's errors per chunk of 64 tokens.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "backend/cuda/state.h"
#include "backend/cuda/test_util.h"

namespace infernix {
namespace {

using cuda_test::ExpectClose;
using cuda_test::LinearSpec;
using cuda_test::MakeLayout;
using cuda_test::Rand;
using cuda_test::Rig;

// Output tolerances of the existing GDN tests (bf16 outputs against the f32 oracle: bf16 rounding alone
// gives rel_l2 ~1.7e-3). The states are f32 on both sides and differ by rounding order only: a host
// emulation of these kernels against a double-precision recurrence measured rel_l2 ~2e-7 and rel_max
// ~1e-6 (1,000-token scale effects and the GPU's expf are well inside the bounds below), while a wrong
// decay at a chunk boundary (|g| ~ 0.05 per token in the slow-decay runs) errs by percents.
constexpr double kOutL2 = 5e-3, kOutMax = 2e-2;
constexpr double kStateL2 = 2e-4, kStateMax = 2e-3;

struct GdnDims {
  int nk, nv, dk, dv;
  GdnHeadMapping mapping;
};

std::string Name(const GdnDims& d) {
  return fmt::format("nk={} nv={} dk={} dv={} {}", d.nk, d.nv, d.dk, d.dv,
                     d.mapping == GdnHeadMapping::kTiled ? "tiled" : "grouped");
}

// A batch: (slot, n_tokens) per sequence; positions continue each slot's length.
using Batch = std::vector<std::pair<int, int64_t>>;

BatchLayout Place(const Batch& batch, std::map<int, int64_t>& lengths) {
  std::vector<std::array<int64_t, 3>> seqs;
  for (auto [slot, n] : batch) seqs.push_back({slot, n, lengths[slot]});
  for (auto [slot, n] : batch) lengths[slot] += n;
  return MakeLayout(seqs);
}

std::string Describe(const Batch& batch) {
  std::string s;
  for (auto [slot, n] : batch) s += fmt::format("{}slot {}: {}", s.empty() ? "" : ", ", slot, n);
  return "{" + s + "}";
}

// Errors of got against want over [begin, end).
struct Err {
  double diff2 = 0, ref2 = 0, max_diff = 0, max_ref = 0;
  size_t worst = 0;
  int64_t bad = 0;
  void Add(const std::vector<float>& got, const std::vector<float>& want, size_t begin, size_t end) {
    if (begin < end && max_diff == 0 && worst < begin) worst = begin;
    for (size_t i = begin; i < end; ++i) {
      if (!std::isfinite(got[i])) ++bad;
      const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
      if (!(d <= max_diff)) {
        max_diff = d;
        worst = i;
      }
      diff2 += d * d;
      ref2 += static_cast<double>(want[i]) * want[i];
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
    }
  }
  double L2() const { return std::sqrt(diff2) / std::max(1e-30, std::sqrt(ref2)); }
  double Max() const { return max_diff / std::max(1e-30, max_ref); }
};

// out [n_tokens, heads, width]: the summary check, and on failure where the error sits.
void ExpectRowsClose(const std::vector<float>& got, const std::vector<float>& want, const BatchLayout& layout,
                     int heads, int width, double rel_l2, double rel_max, const std::string& what) {
  ExpectClose(got, want, rel_l2, rel_max, what);
  Err all;
  all.Add(got, want, 0, got.size());
  if (all.bad == 0 && all.L2() <= rel_l2 && all.Max() <= rel_max) return;
  const size_t row = static_cast<size_t>(heads) * width;
  for (size_t s = 0; s < layout.seqs.size(); ++s) {
    const BatchSeq& q = layout.seqs[s];
    if (q.n_tokens == 0) continue;
    Err e;
    e.Add(got, want, static_cast<size_t>(q.token_begin) * row, static_cast<size_t>(q.token_begin + q.n_tokens) * row);
    const size_t w = e.worst, t = w / row;
    std::string msg = fmt::format(
        "  {}: seq {} (slot {}, {} tokens from position {}): rel_l2 {:.3e} rel_max {:.3e} non-finite {}; worst "
        "|err| {:.4g} at token {} head {} col {} (got {:.6g}, want {:.6g})",
        what, s, q.slot, q.n_tokens, q.pos_begin, e.L2(), e.Max(), e.bad, e.max_diff,
        static_cast<int64_t>(t) - q.token_begin, (w % row) / width, w % width, got[w], want[w]);
    std::string chunks;
    for (int64_t c0 = 0; c0 < q.n_tokens; c0 += 64) {
      Err c;
      c.Add(got, want, static_cast<size_t>(q.token_begin + c0) * row,
            static_cast<size_t>(q.token_begin + std::min(q.n_tokens, c0 + 64)) * row);
      chunks += fmt::format(" {:.2e}/{:.2e}", c.max_diff, c.max_ref);
    }
    ADD_FAILURE() << msg << "\n    max |err| / max |want| per 64-token chunk:" << chunks;
  }
}

// Every slot's recurrent state of layer `layer`, GPU against CPU; on failure where the error sits.
void ExpectStatesClose(Rig& rig, SequenceState& cpu_state, SequenceState& gpu_state, int layer, const GdnDims& d,
                       const std::string& what) {
  auto& cs = static_cast<CpuState&>(cpu_state);
  auto& gs = static_cast<CudaState&>(gpu_state);
  const int64_t per_slot = static_cast<int64_t>(d.nv) * d.dk * d.dv;
  for (int slot = 0; slot < cpu_state.spec().max_slots; ++slot) {
    std::vector<float> got(static_cast<size_t>(per_slot));
    rig.gpu.CopyToHost(Tensor{gs.Recurrent(layer) + slot * gs.RecurrentSlotStride(), DType::kF32, {per_slot}},
                       got.data());
    const float* c = cs.Recurrent(layer, slot);
    std::vector<float> want(c, c + per_slot);
    Err e;
    e.Add(got, want, 0, got.size());
    const std::string name = fmt::format("{} state of slot {}", what, slot);
    std::printf("[ metric ] %-48s rel_l2 %.3e  rel_max %.3e\n", name.c_str(), e.L2(), e.Max());
    const size_t w = e.worst;
    EXPECT_TRUE(e.bad == 0 && e.L2() <= kStateL2 && e.Max() <= kStateMax)
        << name << ": rel_l2 " << e.L2() << " (limit " << kStateL2 << "), rel_max " << e.Max() << " (limit "
        << kStateMax << "), non-finite " << e.bad << "; worst |err| " << e.max_diff << " at head " << w / (d.dk * d.dv)
        << " row " << (w / d.dv) % d.dk << " col " << w % d.dv << " (got " << got[w] << ", want " << want[w]
        << ", max |want| " << e.max_ref << ")";
  }
}

struct Gates {
  float g_lo, g_hi;  // g = log(decay) per token
};

// Runs the batches through GatedDeltaRule on both backends (layer 1 of the state) and compares outputs
// and states after each.
void RunDeltaRule(const GdnDims& d, const std::vector<Batch>& batches, Gates gates, uint64_t seed, int slots) {
  Rig rig;
  StateSpec spec = LinearSpec(2 * d.nk * d.dk + d.nv * d.dv, 4, d.nk, d.nv, d.dk, d.dv, slots, 1 << 14);
  auto cs = rig.cpu.CreateState(spec);
  auto gs = rig.gpu.CreateState(spec);
  std::map<int, int64_t> lengths;
  for (size_t step = 0; step < batches.size(); ++step) {
    BatchLayout layout = Place(batches[step], lengths);
    const int64_t n = layout.n_tokens;
    const uint64_t sd = seed + 10 * step;
    auto q = rig.Act({n, d.nk, d.dk}, Rand(n * d.nk * d.dk, sd, -1, 1));
    auto k = rig.Act({n, d.nk, d.dk}, Rand(n * d.nk * d.dk, sd + 1, -1, 1));
    auto v = rig.Act({n, d.nv, d.dv}, Rand(n * d.nv * d.dv, sd + 2, -2, 2));
    auto g = rig.F32({n, d.nv}, Rand(n * d.nv, sd + 3, gates.g_lo, gates.g_hi));
    auto beta = rig.F32({n, d.nv}, Rand(n * d.nv, sd + 4, 0, 1));
    auto out = rig.Out({n, d.nv, d.dv});
    rig.cpu.GatedDeltaRule(q.cpu, k.cpu, v.cpu, g.cpu, beta.cpu, d.mapping, *cs, 1, layout, out.cpu);
    rig.gpu.GatedDeltaRule(q.gpu, k.gpu, v.gpu, g.gpu, beta.gpu, d.mapping, *gs, 1, layout, out.gpu);
    cs->Advance(layout);
    gs->Advance(layout);
    const std::string what =
        fmt::format("GDN {} g [{}, {}] step {} {}", Name(d), gates.g_lo, gates.g_hi, step, Describe(batches[step]));
    ExpectRowsClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), layout, d.nv, d.dv, kOutL2, kOutMax, what);
    ExpectStatesClose(rig, *cs, *gs, 1, d, what);
  }
}

// Slow decays carry the state across many chunks (a wrong inter-chunk term shows); fast ones are the
// existing tests' range.
constexpr Gates kSlow{-0.05f, 0.0f}, kFast{-2.0f, 0.0f};

// Prompts alone (slots 0..5: 1, 63, 64, 65, 200, 1000 tokens), decode steps on all, then a mixed batch
// continuing every slot (lengths below and above a chunk, and single tokens), then decode again.
std::vector<Batch> FullSchedule() {
  return {{{0, 1}},
          {{1, 63}},
          {{2, 64}},
          {{3, 65}},
          {{4, 200}},
          {{5, 1000}},
          {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}},
          {{5, 1}, {4, 1}, {3, 1}, {2, 1}, {1, 1}, {0, 1}},
          {{0, 130}, {1, 1}, {2, 64}, {3, 7}, {4, 65}, {5, 33}},
          {{3, 1}, {5, 1}},
          {{3, 300}, {0, 2}}};
}

TEST(CudaGdnPrefill, ChunkedDeltaRuleQwen3NextShapes) {
  INFX_REQUIRE_GPU();
  RunDeltaRule({16, 32, 128, 128, GdnHeadMapping::kGrouped}, FullSchedule(), kSlow, 1000, 6);
}

TEST(CudaGdnPrefill, ChunkedDeltaRuleFastDecay) {
  INFX_REQUIRE_GPU();
  RunDeltaRule({16, 32, 128, 128, GdnHeadMapping::kGrouped},
               {{{0, 200}, {1, 65}}, {{0, 1}, {1, 1}}, {{1, 100}, {0, 40}, {2, 1}}}, kFast, 1100, 3);
}

TEST(CudaGdnPrefill, ChunkedDeltaRuleTiledHeads) {
  INFX_REQUIRE_GPU();
  const std::vector<Batch> schedule = {
      {{0, 200}, {1, 65}, {2, 1}}, {{0, 1}, {1, 1}, {2, 1}}, {{2, 129}, {0, 64}}, {{1, 1}}};
  RunDeltaRule({16, 32, 128, 128, GdnHeadMapping::kTiled}, schedule, kSlow, 1200, 3);
  RunDeltaRule({16, 48, 128, 128, GdnHeadMapping::kTiled}, schedule, kSlow, 1300, 3);  // Qwen3.5-35B-A3B-like
  RunDeltaRule({16, 48, 128, 128, GdnHeadMapping::kGrouped}, schedule, kSlow, 1400, 3);
}

// Small and odd head sizes (dk not a multiple of 4, dv not of 32), and dk > 128, which falls back to the
// recurrent kernel.
TEST(CudaGdnPrefill, ChunkedDeltaRuleSmallDims) {
  INFX_REQUIRE_GPU();
  const std::vector<Batch> schedule = {
      {{0, 63}, {1, 1}, {2, 64}}, {{0, 1}, {1, 1}, {2, 1}}, {{2, 65}, {0, 200}, {1, 2}}, {{1, 130}}};
  for (GdnDims d : {GdnDims{2, 4, 16, 16, GdnHeadMapping::kGrouped}, GdnDims{2, 4, 16, 16, GdnHeadMapping::kTiled},
                    GdnDims{2, 4, 32, 64, GdnHeadMapping::kGrouped}, GdnDims{4, 8, 64, 32, GdnHeadMapping::kTiled},
                    GdnDims{1, 3, 37, 20, GdnHeadMapping::kGrouped}, GdnDims{2, 2, 128, 100, GdnHeadMapping::kGrouped},
                    GdnDims{2, 2, 192, 64, GdnHeadMapping::kGrouped}}) {
    RunDeltaRule(d, schedule, kSlow, 1500 + static_cast<uint64_t>(d.dk + d.dv), 3);
    RunDeltaRule(d, schedule, kFast, 1600 + static_cast<uint64_t>(d.dk + d.dv), 3);
  }
}

// The chunked and the recurrent kernels on the GPU, same inputs: one 300-token call against calls of
// kGdnChunkedMinTokens - 1 tokens (recurrent). A disagreement here with the oracle tests passing would
// point at the oracle comparison; both failing points at the chunked kernels.
TEST(CudaGdnPrefill, ChunkedEqualsRecurrentOnTheGpu) {
  INFX_REQUIRE_GPU();
  const GdnDims d{16, 32, 128, 128, GdnHeadMapping::kGrouped};
  Rig rig;
  StateSpec spec = LinearSpec(2 * d.nk * d.dk + d.nv * d.dv, 4, d.nk, d.nv, d.dk, d.dv, 2, 1 << 14);
  auto chunked = rig.gpu.CreateState(spec);
  auto recurrent = rig.gpu.CreateState(spec);
  const int64_t n = 300, piece = cuda::kGdnChunkedMinTokens - 1;
  const std::vector<float> qv = Rand(n * d.nk * d.dk, 1700, -1, 1), kv = Rand(n * d.nk * d.dk, 1701, -1, 1);
  const std::vector<float> vv = Rand(n * d.nv * d.dv, 1702, -2, 2), gv = Rand(n * d.nv, 1703, -0.05f, 0);
  const std::vector<float> bv = Rand(n * d.nv, 1704, 0, 1);
  auto q = rig.Act({n, d.nk, d.dk}, qv);
  auto k = rig.Act({n, d.nk, d.dk}, kv);
  auto v = rig.Act({n, d.nv, d.dv}, vv);
  auto g = rig.F32({n, d.nv}, gv);
  auto beta = rig.F32({n, d.nv}, bv);
  auto out = rig.Out({n, d.nv, d.dv});
  BatchLayout whole = MakeLayout({{1, n, 0}});
  rig.gpu.GatedDeltaRule(q.gpu, k.gpu, v.gpu, g.gpu, beta.gpu, d.mapping, *chunked, 0, whole, out.gpu);
  std::vector<float> want(static_cast<size_t>(n * d.nv * d.dv));
  for (int64_t t0 = 0; t0 < n; t0 += piece) {
    const int64_t m = std::min(piece, n - t0);
    auto slice = [&](const std::vector<float>& all, int64_t row) {
      return std::vector<float>(all.begin() + t0 * row, all.begin() + (t0 + m) * row);
    };
    auto pq = rig.Act({m, d.nk, d.dk}, slice(qv, d.nk * d.dk));
    auto pk = rig.Act({m, d.nk, d.dk}, slice(kv, d.nk * d.dk));
    auto pv = rig.Act({m, d.nv, d.dv}, slice(vv, d.nv * d.dv));
    auto pg = rig.F32({m, d.nv}, slice(gv, d.nv));
    auto pb = rig.F32({m, d.nv}, slice(bv, d.nv));
    auto po = rig.Out({m, d.nv, d.dv});
    BatchLayout layout = MakeLayout({{1, m, t0}});
    rig.gpu.GatedDeltaRule(pq.gpu, pk.gpu, pv.gpu, pg.gpu, pb.gpu, d.mapping, *recurrent, 0, layout, po.gpu);
    std::vector<float> part = rig.Gpu(po.gpu);
    std::copy(part.begin(), part.end(), want.begin() + t0 * d.nv * d.dv);
  }
  ExpectRowsClose(rig.Gpu(out.gpu), want, whole, d.nv, d.dv, kOutL2, kOutMax, "GDN chunked vs recurrent (GPU)");
  const int64_t per_slot = static_cast<int64_t>(d.nv) * d.dk * d.dv;
  auto read = [&](SequenceState& s) {
    auto& cs = static_cast<CudaState&>(s);
    std::vector<float> h(static_cast<size_t>(per_slot));
    rig.gpu.CopyToHost(Tensor{cs.Recurrent(0) + cs.RecurrentSlotStride(), DType::kF32, {per_slot}}, h.data());
    return h;
  };
  ExpectClose(read(*chunked), read(*recurrent), kStateL2, kStateMax, "GDN chunked vs recurrent state (GPU)");
}

// CausalConv1d with long inputs (the parallel kernel) mixed with sequences shorter than the window,
// decode steps (the per-channel kernel) and continuations; outputs and the saved windows are compared.
void RunConv(int kernel, uint64_t seed) {
  Rig rig;
  const int channels = 2 * 16 * 128 + 32 * 128;  // Qwen3-Next: 2 * key_dim + value_dim
  StateSpec spec = LinearSpec(channels, kernel, 16, 32, 128, 128, 3, 1 << 14);
  auto cs = rig.cpu.CreateState(spec);
  auto gs = rig.gpu.CreateState(spec);
  auto w =
      rig.Weight(DType::kBF16, {channels, 1, kernel}, Rand(static_cast<size_t>(channels) * kernel, seed, -0.5f, 0.5f));
  const std::vector<Batch> batches = {
      {{0, 100}, {1, 2}, {2, 17}},  // a sequence shorter than the window among long ones
      {{0, 1}, {1, 1}, {2, 1}},     // decode (per-channel kernel)
      {{1, 1}, {0, 40}, {2, 1}},    // slot 1 still within its first window; continuations
      {{2, 16}},                    // exactly the threshold
      {{1, 300}, {0, 3}},
      {{2, 15}, {0, 1}},  // below the threshold: the per-channel kernel
  };
  std::map<int, int64_t> lengths;
  const int64_t keep = kernel - 1;
  for (size_t step = 0; step < batches.size(); ++step) {
    BatchLayout layout = Place(batches[step], lengths);
    const int64_t n = layout.n_tokens;
    auto x = rig.Act({n, channels}, Rand(n * channels, seed + 10 + step, -2, 2));
    auto out = rig.Out({n, channels});
    rig.cpu.CausalConv1d(x.cpu, w.cpu, *cs, 1, layout, out.cpu);
    rig.gpu.CausalConv1d(x.gpu, w.gpu, *gs, 1, layout, out.gpu);
    cs->Advance(layout);
    gs->Advance(layout);
    const std::string what = fmt::format("CausalConv1d K={} step {} {}", kernel, step, Describe(batches[step]));
    ExpectRowsClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), layout, 1, channels, 4e-3, 1e-2, what);
    // The windows are copies of bf16 inputs (or the old window): equal.
    auto& cst = static_cast<CpuState&>(*cs);
    auto& gst = static_cast<CudaState&>(*gs);
    for (int slot = 0; slot < spec.max_slots && keep > 0; ++slot) {
      std::vector<float> got(static_cast<size_t>(keep * channels));
      rig.gpu.CopyToHost(Tensor{gst.Conv(1) + slot * gst.ConvSlotStride(), DType::kF32, {keep, channels}}, got.data());
      const float* c = cst.Conv(1, slot);
      int64_t mismatches = 0, first = -1;
      for (int64_t i = 0; i < keep * channels; ++i) {
        if (got[static_cast<size_t>(i)] != c[i]) {
          if (first < 0) first = i;
          ++mismatches;
        }
      }
      EXPECT_EQ(mismatches, 0) << what << ": conv state of slot " << slot << " differs in " << mismatches
                               << " values; first at window row " << first / channels << " channel " << first % channels
                               << " (got " << got[static_cast<size_t>(first)] << ", want " << c[first] << ")";
    }
  }
}

TEST(CudaGdnPrefill, CausalConv1dParallel) {
  INFX_REQUIRE_GPU();
  RunConv(4, 2000);
  RunConv(2, 2100);
  RunConv(3, 2200);
}

}  // namespace
}  // namespace infernix
