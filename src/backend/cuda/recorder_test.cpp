// CUDA graphs: a decode-shaped unit of work (upload ids, embed, norm, merged GEMVs, RoPE, attention,
// gather, logits, copy back) repeated with new data replays as a graph and gives bit-identical
// results to eager execution.
#include "backend/cuda/test_util.h"

namespace infernix {
namespace {

using cuda_test::MakeLayout;
using cuda_test::Rand;

struct Weights {
  HostBuffer embed, norm, wq, wk, wv, head, inv_freq;
};

Weights MakeWeights(int64_t vocab, int64_t h, int64_t hq, int64_t hkv, int64_t d) {
  auto fill = [](DType dt, Shape s, uint64_t seed, float scale) {
    HostBuffer b(dt, s);
    std::vector<float> v = Rand(static_cast<size_t>(s.numel()), seed, -scale, scale);
    for (size_t i = 0; i < v.size(); ++i) {
      if (dt == DType::kF32) b.view().as<float>()[i] = v[i];
      else b.view().as<uint16_t>()[i] = F32ToBf16(v[i]);
    }
    return b;
  };
  Weights w{fill(DType::kBF16, {vocab, h}, 1, 1.0f), fill(DType::kBF16, {h}, 2, 1.0f),
            fill(DType::kBF16, {hq * d, h}, 3, 0.05f), fill(DType::kBF16, {hkv * d, h}, 4, 0.05f),
            fill(DType::kBF16, {hkv * d, h}, 5, 0.05f), fill(DType::kBF16, {vocab, h}, 6, 0.05f),
            fill(DType::kF32, {d / 2}, 7, 0.5f)};
  return w;
}

// Runs `steps` decode steps of `batch` sequences; returns every step's logits.
std::vector<float> Decode(CudaBackend& be, const Weights& hw, int steps, int batch, cuda::RecorderStats* stats) {
  const int64_t vocab = hw.embed.view().dim(0), h = hw.embed.view().dim(1), d = 2 * hw.inv_freq.view().numel();
  const int64_t hq = hw.wq.view().dim(0) / d, hkv = hw.wk.view().dim(0) / d;
  Tensor embed = be.UploadWeight(hw.embed.view()), norm = be.UploadWeight(hw.norm.view());
  Tensor wq = be.UploadWeight(hw.wq.view()), wk = be.UploadWeight(hw.wk.view()), wv = be.UploadWeight(hw.wv.view());
  Tensor head = be.UploadWeight(hw.head.view()), inv_freq = be.UploadWeight(hw.inv_freq.view());
  StateSpec spec;
  spec.max_slots = batch;
  spec.max_context = 256;
  spec.n_attention_layers = 1;
  spec.n_kv_heads = static_cast<int>(hkv);
  spec.head_dim = static_cast<int>(d);
  auto state = be.CreateState(spec);
  std::vector<float> all;
  for (int s = 0; s < steps; ++s) {
    std::vector<std::array<int64_t, 3>> seqs;
    std::vector<int32_t> tokens, rows;
    for (int b = 0; b < batch; ++b) {
      seqs.push_back({b, 1, s});
      tokens.push_back(static_cast<int32_t>((s * 977 + b * 131) % vocab));
      rows.push_back(batch - 1 - b);
    }
    BatchLayout layout = MakeLayout(seqs);
    const int64_t n = batch;
    be.ResetScratch();
    Tensor ids = be.Scratch(DType::kI32, {n});
    be.CopyToBackend(tokens.data(), ids);
    Tensor x = be.Scratch(DType::kBF16, {n, h});
    be.Embedding(ids, embed, x);
    be.RmsNorm(x, norm, 1e-6f, false, x);
    Tensor q = be.Scratch(DType::kBF16, {n, hq, d}), k = be.Scratch(DType::kBF16, {n, hkv, d}),
           v = be.Scratch(DType::kBF16, {n, hkv, d});
    be.MatMul(x, wq, q.Reshaped({n, hq * d}));
    be.MatMul(x, wk, k.Reshaped({n, hkv * d}));
    be.MatMul(x, wv, v.Reshaped({n, hkv * d}));
    be.Rope(q, layout, inv_freq, 1.0f);
    be.Rope(k, layout, inv_freq, 1.0f);
    Tensor attn = be.Scratch(DType::kBF16, {n, hq, d});
    be.Attention(q, k, v, *state, 0, layout, 0.125f, attn);
    state->Advance(layout);
    Tensor picked = be.Scratch(DType::kBF16, {n, h});
    be.GatherRows(attn.Reshaped({n, h}), rows, picked);
    Tensor logits = be.Scratch(DType::kF32, {n, vocab});
    be.MatMul(picked, head, logits);
    std::vector<float> host(static_cast<size_t>(n * vocab));
    be.CopyToHost(logits, host.data());
    all.insert(all.end(), host.begin(), host.end());
  }
  if (stats != nullptr) *stats = be.recorder_stats();
  return all;
}

TEST(CudaGraphs, ReplayedDecodeStepsEqualEagerOnes) {
  INFX_REQUIRE_GPU();
  Weights w = MakeWeights(4096, 512, 8, 2, 64);  // hq * d == hidden, so attn reshapes to [n, h]
  for (int batch : {1, 3}) {
    CudaOptions eager_opts;
    eager_opts.graphs = false;
    CudaBackend eager(eager_opts), graphs;
    cuda::RecorderStats es, gs;
    std::vector<float> a = Decode(eager, w, 6, batch, &es);
    std::vector<float> b = Decode(graphs, w, 6, batch, &gs);
    EXPECT_EQ(a, b) << "batch " << batch;
    EXPECT_EQ(es.units_replayed, 0);
    EXPECT_GE(gs.units_captured, 1);
    EXPECT_GE(gs.units_replayed, 3) << "decode steps after the second should replay a graph";
    std::printf("[ metric ] graphs batch %d: %lld eager, %lld captured, %lld replayed units\n", batch,
                static_cast<long long>(gs.units_eager), static_cast<long long>(gs.units_captured),
                static_cast<long long>(gs.units_replayed));
  }
}

}  // namespace
}  // namespace infernix
