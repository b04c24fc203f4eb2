// The fixture models on the CUDA backend (bf16 activations) against transformers' references and the
// CPU backend. Tolerance (docs/cuda.md, "Accuracy"): the bound B = kLogitTolerance * max(1, max |ref|);
// at positions whose reference top-2 logit gap exceeds B ("decisive"), the same argmax at >=
// kMinDecisiveAgreement of them; over all positions >= kMinAgreement; logits within kMaxRelL2
// relative L2 error. Greedy decoding,
// teacher-forced with the CPU's tokens, picks the CPU's token at every step where the CPU's top-2 gap
// exceeds B. Near-ties of these random tiny models flip under bf16 rounding: a CPU run that rounds
// every activation to bf16 shows the same agreement (93-98%) as the GPU. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/f8_layout.h"
#include "engine/backend_factory.h"
#include "engine/generator.h"
#include "formats/gguf.h"
#include "model/dummy_weights.h"
#include "model/gguf_model.h"
#include "model/model.h"
#include "test_util.h"

namespace infernix {
namespace {

using testing::ModelDir;
using testing::Reference;

constexpr double kLogitTolerance = 5e-2;
constexpr double kMinAgreement = 0.90;
constexpr double kMinDecisiveAgreement = 0.97;  // MoE router flips move a few decisive positions
constexpr double kMaxRelL2 = 0.1;

std::unique_ptr<Backend> Gpu(bool graphs = true, bool fuse = true) {
  BackendOptions o;
  o.name = "cuda";
  o.cuda_graphs = graphs;
  o.cuda_fuse = fuse;
  return CreateBackend(o);
}

#define REQUIRE_GPU()                                                          \
  do {                                                                         \
    std::string why = CudaUnavailable();                                       \
    if (!why.empty()) GTEST_SKIP() << "no usable GPU: " << why;                \
  } while (0)

double TopGap(const float* l, int64_t vocab);

struct Stats {
  int64_t rows = 0, argmax_same = 0, decisive = 0, decisive_same = 0;
  double max_abs_diff = 0, max_abs_ref = 0, diff2 = 0, ref2 = 0;
  std::vector<double> gaps;  // reference top-2 gap per row
  std::vector<bool> same;
  double Bound() const { return kLogitTolerance * std::max(1.0, max_abs_ref); }
  double Agreement() const { return rows == 0 ? 1.0 : static_cast<double>(argmax_same) / static_cast<double>(rows); }
  double RelL2() const { return std::sqrt(diff2 / std::max(1e-30, ref2)); }
  void Finish() {
    decisive = decisive_same = 0;
    for (size_t i = 0; i < gaps.size(); ++i)
      if (gaps[i] > Bound()) {
        ++decisive;
        decisive_same += same[i];
      }
  }
  double DecisiveAgreement() const {
    return decisive == 0 ? 1.0 : static_cast<double>(decisive_same) / static_cast<double>(decisive);
  }
};

void Accumulate(Stats& s, const std::vector<float>& got, const std::vector<float>& ref, int64_t vocab) {
  ASSERT_EQ(got.size(), ref.size());
  for (int64_t r = 0; r < static_cast<int64_t>(got.size()) / vocab; ++r) {
    const float* g = got.data() + r * vocab;
    const float* e = ref.data() + r * vocab;
    ++s.rows;
    bool same = Argmax(g, vocab) == Argmax(e, vocab);
    s.argmax_same += same;
    s.same.push_back(same);
    s.gaps.push_back(TopGap(e, vocab));
    for (int64_t i = 0; i < vocab; ++i) {
      double d = static_cast<double>(g[i]) - e[i];
      s.max_abs_diff = std::max(s.max_abs_diff, std::fabs(d));
      s.max_abs_ref = std::max(s.max_abs_ref, std::fabs(static_cast<double>(e[i])));
      s.diff2 += d * d;
      s.ref2 += static_cast<double>(e[i]) * e[i];
    }
  }
}

// Finishes s and prints it as a metric line.
void PrintStats(Stats& s, const std::string& what) {
  s.Finish();
  std::printf("[ metric ] %-40s argmax %.4f (%lld rows), decisive %.4f (%lld)  rel_l2 %.4f  max|diff| %.4f  "
              "bound %.4f  max|ref| %.2f\n",
              what.c_str(), s.Agreement(), static_cast<long long>(s.rows), s.DecisiveAgreement(),
              static_cast<long long>(s.decisive), s.RelL2(), s.max_abs_diff, s.Bound(), s.max_abs_ref);
}

void ExpectWithinTolerance(Stats& s, const std::string& what) {
  PrintStats(s, what);
  EXPECT_GE(s.DecisiveAgreement(), kMinDecisiveAgreement) << what;
  EXPECT_GE(s.Agreement(), kMinAgreement) << what;
  EXPECT_LE(s.RelL2(), kMaxRelL2) << what;
}

// Top-1 minus top-2 logit.
double TopGap(const float* l, int64_t vocab) {
  float a = -INFINITY, b = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) {
    if (l[i] > a) {
      b = a;
      a = l[i];
    } else if (l[i] > b) {
      b = l[i];
    }
  }
  return static_cast<double>(a) - b;
}

// Greedy on the CPU, then the GPU teacher-forced on the CPU's tokens: the GPU's argmax must be the
// CPU's token wherever the CPU's top-2 gap exceeds the bound. Returns the number of steps checked.
// `stats`, when set, also collects the GPU's step logits against the CPU's.
int CheckGreedyAgainstCpu(Model& cpu, Model& gpu, const std::vector<int32_t>& prompt, int new_tokens,
                          const std::string& what, Stats* stats = nullptr,
                          KvCacheType kv_type = KvCacheType::kActivation) {
  const int64_t vocab = cpu.config().vocab_size;
  std::vector<std::vector<float>> cpu_logits;
  GreedyOptions g;
  g.max_new_tokens = new_tokens;
  g.kv_cache_type = kv_type;
  g.on_step = [&](const std::vector<float>& l, int32_t) { cpu_logits.push_back(l); };
  std::vector<int32_t> tokens = GreedyGenerate(cpu, prompt, g);
  auto state =
      gpu.backend().CreateState(gpu.MakeStateSpec(1, static_cast<int64_t>(prompt.size()) + new_tokens, kv_type));
  std::vector<float> logits;
  std::vector<int32_t> step = prompt;
  int64_t pos = 0;
  int checked = 0, same = 0;
  double bound = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    gpu.Forward(ForwardBatch::Single(step, 0, pos, false), *state, logits);
    pos += static_cast<int64_t>(step.size());
    double max_ref = 0;
    for (float v : cpu_logits[i]) max_ref = std::max(max_ref, std::fabs(static_cast<double>(v)));
    bound = kLogitTolerance * std::max(1.0, max_ref);
    int32_t got = Argmax(logits.data(), vocab);
    same += got == tokens[i];
    if (stats != nullptr) Accumulate(*stats, logits, cpu_logits[i], vocab);
    if (TopGap(cpu_logits[i].data(), vocab) > bound) {
      ++checked;
      EXPECT_EQ(got, tokens[i]) << what << ": step " << i << " (CPU top-2 gap "
                                << TopGap(cpu_logits[i].data(), vocab) << " > bound " << bound << ")";
    }
    step.assign(1, tokens[i]);
  }
  std::printf("[ metric ] %-44s greedy: %d/%zu steps same token, %d steps above the gap bound\n", what.c_str(), same,
              tokens.size(), checked);
  return checked;
}

int CheckGreedyAgainstCpu(const FileSet& files, Model& gpu, const std::vector<int32_t>& prompt, int new_tokens,
                          const std::string& what) {
  CpuBackend cpu_backend(0);
  auto cpu = LoadModel(files, cpu_backend);
  return CheckGreedyAgainstCpu(*cpu, gpu, prompt, new_tokens, what);
}

class GpuTinyModel : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    REQUIRE_GPU();
    files_ = std::make_unique<DirFileSet>(ModelDir(GetParam()));
    backend_ = Gpu();
    model_ = LoadModel(*files_, *backend_);
    ref_ = std::make_unique<Reference>(GetParam());
  }
  int64_t vocab() const { return model_->config().vocab_size; }

  // The model on two more backends: one that verifies each replayed decode step (it queues the step's ops
  // and checks that they make the unit a replay would have launched) and one without graphs.
  struct ReplayRig {
    std::unique_ptr<Backend> verifying_backend, eager_backend;
    std::unique_ptr<Model> verifying, eager;
  };
  ReplayRig MakeReplayRig() {
    BackendOptions o;
    o.name = "cuda";
    o.cuda_verify_replay = true;
    ReplayRig r;
    r.verifying_backend = CreateBackend(o);
    r.eager_backend = Gpu(/*graphs=*/false);
    r.verifying = LoadModel(*files_, *r.verifying_backend);
    r.eager = LoadModel(*files_, *r.eager_backend);
    return r;
  }

  // Runs of `steps` decode steps of three shapes on one state of `m` (both slots, slot 0, slot 1, both
  // again) after prompts of 6 and 3 tokens in slots 0 and 1. step(state, batch) runs a step and returns
  // each row's next token, or nothing to continue the prompts' tokens.
  using DecodeStep = std::function<std::vector<int32_t>(SequenceState&, const ForwardBatch&)>;
  void DecodeShapes(Model& m, int steps, const DecodeStep& step) {
    const std::vector<int32_t> prompt[2] = {ref_->Ids("prompt.2.ids"), ref_->Ids("prompt.1.ids")};
    auto state = m.backend().CreateState(m.MakeStateSpec(2, 64));
    int64_t pos[2] = {6, 3};
    std::vector<float> logits;
    for (int slot = 0; slot < 2; ++slot) {
      const std::vector<int32_t>& p = prompt[slot];
      m.Forward(ForwardBatch::Single({p.begin(), p.begin() + pos[slot]}, slot, 0, false), *state, logits);
    }
    int32_t next[2] = {prompt[0][6], prompt[1][3]};
    for (int shape : {0, 1, 2, 0}) {
      for (int i = 0; i < steps; ++i) {
        ForwardBatch batch;
        std::vector<int> slots;
        for (int slot = 0; slot < 2; ++slot) {
          if (shape != 0 && shape != slot + 1) continue;
          const int32_t row = static_cast<int32_t>(batch.tokens.size());
          batch.tokens.push_back(next[slot]);
          batch.seqs.push_back(BatchSeq{slot, row, 1, pos[slot]++});
          batch.logit_rows.push_back(row);
          slots.push_back(slot);
        }
        const std::vector<int32_t> picked = step(*state, batch);
        for (size_t r = 0; r < slots.size(); ++r) {
          const std::vector<int32_t>& p = prompt[slots[r]];
          next[slots[r]] = r < picked.size() ? picked[r] : p[static_cast<size_t>(pos[slots[r]]) % p.size()];
        }
      }
    }
  }

  std::unique_ptr<DirFileSet> files_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Reference> ref_;
};

TEST_P(GpuTinyModel, PromptLogitsMatchTransformers) {
  Stats s;
  for (int i = 0; ref_->Has("prompt." + std::to_string(i) + ".ids"); ++i) {
    std::string p = "prompt." + std::to_string(i);
    Accumulate(s, PromptLogits(*model_, ref_->Ids(p + ".ids")), ref_->Floats(p + ".logits"), vocab());
  }
  EXPECT_GE(s.rows, 48);  // every fixture has several prompts (the FP8 ones 48 or more positions)
  ExpectWithinTolerance(s, GetParam() + " prompts");
}

TEST_P(GpuTinyModel, GreedyGenerationFollowsTheCpu) {
  std::vector<int32_t> prompt = ref_->Ids("generate.prompt_ids");
  CheckGreedyAgainstCpu(*files_, *model_, prompt, 24, GetParam());
  // Against transformers' own step logits too.
  std::vector<int32_t> want = ref_->Ids("generate.new_ids");
  std::vector<float> step_logits;
  GreedyOptions g;
  g.max_new_tokens = static_cast<int>(want.size());
  g.on_step = [&](const std::vector<float>& l, int32_t) { step_logits.insert(step_logits.end(), l.begin(), l.end()); };
  std::vector<int32_t> got = GreedyGenerate(*model_, prompt, g);
  size_t agree = 0;
  while (agree < got.size() && got[agree] == want[agree]) ++agree;
  std::vector<float> ref = ref_->Floats("generate.step_logits");
  ref.resize(std::min(ref.size(), static_cast<size_t>(agree) * static_cast<size_t>(vocab())));
  step_logits.resize(ref.size());
  Stats s;
  Accumulate(s, step_logits, ref, vocab());
  std::printf("[ metric ] %-44s free-running greedy: first %zu of %zu tokens equal transformers'\n", GetParam().c_str(),
              agree, want.size());
  if (s.rows > 0) ExpectWithinTolerance(s, GetParam() + " greedy steps");
}

// An FP8 KV cache (--kv-cache-dtype fp8): the GPU's prompt logits (prefill) and greedy steps (decode)
// against the CPU's with the same cache, i.e. the same decoded keys and values, within the bf16 cache's
// tolerance; and what FP8 keys and values cost against transformers' logits (a full-precision cache).
TEST_P(GpuTinyModel, Fp8KvCacheFollowsTheCpu) {
  CpuBackend cpu_backend(0);
  auto cpu = LoadModel(*files_, cpu_backend);
  Stats vs_cpu, vs_ref;
  for (int i = 0; ref_->Has("prompt." + std::to_string(i) + ".ids"); ++i) {
    const std::string p = "prompt." + std::to_string(i);
    const std::vector<int32_t> ids = ref_->Ids(p + ".ids");
    const std::vector<float> logits = PromptLogits(*model_, ids, KvCacheType::kF8E4M3);
    Accumulate(vs_cpu, logits, PromptLogits(*cpu, ids, KvCacheType::kF8E4M3), vocab());
    Accumulate(vs_ref, logits, ref_->Floats(p + ".logits"), vocab());
  }
  ExpectWithinTolerance(vs_cpu, GetParam() + " fp8 KV prompts vs CPU");
  // Against full precision the random tiny MoE models move most (router flips: qwen3-moe-tiny's argmax
  // agreed at 0.885 of all positions, every decisive one equal); the decisive positions must hold.
  PrintStats(vs_ref, GetParam() + " fp8 KV prompts vs transformers");
  EXPECT_GE(vs_ref.DecisiveAgreement(), kMinDecisiveAgreement) << GetParam();
  // The greedy steps: the GPU's token wherever the CPU's top-2 gap exceeds the bound (checked inside).
  Stats steps;
  EXPECT_GT(CheckGreedyAgainstCpu(*cpu, *model_, ref_->Ids("generate.prompt_ids"), 24, GetParam() + " fp8 KV", &steps,
                                  KvCacheType::kF8E4M3),
            0);
  PrintStats(steps, GetParam() + " fp8 KV greedy steps vs CPU");
  EXPECT_GE(steps.DecisiveAgreement(), kMinDecisiveAgreement) << GetParam();
}

// Token-by-token decoding reproduces a prefill of the whole sequence (different kernels: split-KV
// attention and GEMV for decode, flash attention and cuBLASLt for prefill). The decode steps read the
// logits from the backend's page-locked buffer (Model::Forward's span) and spoil them after: the next
// pass must not depend on what the caller did with them.
TEST_P(GpuTinyModel, DecodeMatchesPrefill) {
  std::vector<int32_t> ids = ref_->Ids("prompt.2.ids");
  std::vector<float> prefill = PromptLogits(*model_, ids);
  auto state = backend_->CreateState(model_->MakeStateSpec(1, static_cast<int64_t>(ids.size())));
  std::vector<float> decoded, logits;
  model_->Forward(ForwardBatch::Single({ids.begin(), ids.begin() + 5}, 0, 0, true), *state, logits);
  decoded = logits;
  for (size_t i = 5; i < ids.size(); ++i) {
    std::span<float> step = model_->Forward(ForwardBatch::Single({ids[i]}, 0, static_cast<int64_t>(i), true), *state);
    ASSERT_EQ(step.size(), static_cast<size_t>(vocab()));
    decoded.insert(decoded.end(), step.begin(), step.end());
    std::fill(step.begin(), step.end(), std::nanf(""));
  }
  Stats s;
  Accumulate(s, decoded, prefill, vocab());
  ExpectWithinTolerance(s, GetParam() + " decode vs prefill");
}

// A decode token, a continued chunk and a fresh prompt in one forward pass.
TEST_P(GpuTinyModel, BatchedSequencesMatchSeparateRuns) {
  std::vector<int32_t> a = ref_->Ids("prompt.2.ids"), b = ref_->Ids("prompt.1.ids");
  const int64_t v = vocab();
  auto state = backend_->CreateState(model_->MakeStateSpec(3, 128));
  std::vector<float> logits;
  model_->Forward(ForwardBatch::Single({a.begin(), a.begin() + 20}, 0, 0, false), *state, logits);
  model_->Forward(ForwardBatch::Single({b.begin(), b.begin() + 2}, 1, 0, false), *state, logits);
  ForwardBatch batch;
  batch.tokens.push_back(a[20]);
  batch.tokens.insert(batch.tokens.end(), b.begin() + 2, b.end());
  batch.tokens.insert(batch.tokens.end(), a.begin(), a.begin() + 7);
  const int64_t nb = static_cast<int64_t>(b.size()) - 2;
  batch.seqs = {{0, 0, 1, 20}, {1, 1, nb, 2}, {2, 1 + nb, 7, 0}};
  for (int32_t r = 0; r < static_cast<int32_t>(batch.tokens.size()); ++r) batch.logit_rows.push_back(r);
  model_->Forward(batch, *state, logits);
  std::vector<float> expected;
  std::vector<float> full_a = PromptLogits(*model_, {a.begin(), a.begin() + 21});
  expected.insert(expected.end(), full_a.end() - v, full_a.end());
  std::vector<float> full_b = PromptLogits(*model_, b);
  expected.insert(expected.end(), full_b.begin() + 2 * v, full_b.end());
  std::vector<float> fresh = PromptLogits(*model_, {a.begin(), a.begin() + 7});
  expected.insert(expected.end(), fresh.begin(), fresh.end());
  Stats s;
  Accumulate(s, logits, expected, v);
  // Rows off by more than the bound, by name: one such row is a router flip (a MoE model's expert choice
  // under rounding noise), every row a batching bug.
  for (int64_t r = 0; r < static_cast<int64_t>(batch.tokens.size()); ++r) {
    double d = 0;
    for (int64_t i = 0; i < v; ++i) d = std::max(d, std::fabs(static_cast<double>(logits[r * v + i]) - expected[r * v + i]));
    if (d > s.Bound())
      std::printf("[ metric ] %s batched row %lld: max|diff| %.4f, ref top-2 gap %.4f\n", GetParam().c_str(),
                  static_cast<long long>(r), d, TopGap(expected.data() + r * v, v));
  }
  ExpectWithinTolerance(s, GetParam() + " batched vs separate");
}

// CUDA graphs replay decode steps bit for bit.
TEST_P(GpuTinyModel, GraphsChangeNothing) {
  auto eager_backend = Gpu(/*graphs=*/false);
  auto eager = LoadModel(*files_, *eager_backend);
  std::vector<int32_t> prompt = ref_->Ids("generate.prompt_ids");
  std::vector<float> a, b;
  GreedyOptions g;
  g.max_new_tokens = 10;
  g.on_step = [&](const std::vector<float>& l, int32_t) { a.insert(a.end(), l.begin(), l.end()); };
  std::vector<int32_t> ta = GreedyGenerate(*model_, prompt, g);
  g.on_step = [&](const std::vector<float>& l, int32_t) { b.insert(b.end(), l.begin(), l.end()); };
  std::vector<int32_t> tb = GreedyGenerate(*eager, prompt, g);
  EXPECT_EQ(ta, tb);
  EXPECT_TRUE(a == b) << "graph replay changed the logits";
}

// Decode steps replayed without their ops queued again (Backend::ReplayForward) launch the graph those ops
// make (a backend that verifies queues them and checks each step) and give the logits, bit for bit, of a
// backend without graphs; through runs of steps of three shapes on one state (two slots, either alone).
TEST_P(GpuTinyModel, ReplayedDecodeStepsAreTheQueuedOnes) {
  ReplayRig rig = MakeReplayRig();
  auto& verifying_backend = rig.verifying_backend;
  auto& verifying = rig.verifying;
  auto& eager = rig.eager;
  constexpr int kRun = 5;  // steps per shape: the first two are queued (run once, then captured)
  auto run = [&](Model& m) {
    std::vector<float> all, logits;
    DecodeShapes(m, kRun, [&](SequenceState& state, const ForwardBatch& batch) {
      m.Forward(batch, state, logits);
      all.insert(all.end(), logits.begin(), logits.end());
      return std::vector<int32_t>{};
    });
    return all;
  };
  const std::optional<BackendCounters> before = ReadBackendCounters(*backend_);
  const std::vector<float> replayed = run(*model_);
  const std::optional<BackendCounters> after = ReadBackendCounters(*backend_);
  const std::vector<float> verified = run(*verifying);  // throws where a replay would have been wrong
  const std::optional<BackendCounters> checked = ReadBackendCounters(*verifying_backend);
  const std::vector<float> plain = run(*eager);
  ASSERT_TRUE(before && after && checked);
  // Per run of a shape, every step from the third on (the first runs eagerly, the second is captured; the
  // last run's shape has a graph already, so its second step replays too).
  const int64_t replays = after->forwards_replayed - before->forwards_replayed;
  std::printf("[ metric ] %-40s %lld of %d decode steps replayed without their ops queued\n", GetParam().c_str(),
              static_cast<long long>(replays), 4 * kRun);
  EXPECT_GE(replays, 4 * (kRun - 2));
  EXPECT_EQ(checked->forwards_replayed, 0);
  EXPECT_TRUE(replayed == plain) << "a replayed decode step changed the logits";
  EXPECT_TRUE(verified == plain);
}

// Greedy picks (Model::ForwardGreedy) through queued, captured and replayed decode steps, each step's
// picks fed back as the next tokens, are the picks of the logits a backend without graphs gives (and a
// backend that verifies each replay finds none wrong).
TEST_P(GpuTinyModel, GreedyPicksOfReplayedStepsAreTheLogitsPicks) {
  ReplayRig rig = MakeReplayRig();
  const int64_t vocab = model_->config().vocab_size, sampleable = vocab - 3;
  constexpr int kRun = 5;
  auto run = [&](Model& m, bool picks) {
    std::vector<int32_t> all;
    std::vector<float> logits;
    DecodeShapes(m, kRun, [&](SequenceState& state, const ForwardBatch& batch) {
      const int64_t rows = static_cast<int64_t>(batch.logit_rows.size());
      std::vector<int32_t> got;
      if (picks) {
        got = m.ForwardGreedy(batch, state, sampleable);
      } else {
        m.Forward(batch, state, logits);
        got = PickGreedyRows(logits, rows, vocab, sampleable);
      }
      EXPECT_EQ(static_cast<int64_t>(got.size()), rows);
      all.insert(all.end(), got.begin(), got.end());
      for (int32_t& id : got) {
        EXPECT_GE(id, 0);
        id = std::max(id, 0);
      }
      return got;
    });
    return all;
  };
  const std::vector<int32_t> expected = run(*rig.eager, false);
  EXPECT_EQ(run(*model_, true), expected);
  EXPECT_EQ(run(*rig.verifying, true), expected);  // throws where a replay would have been wrong
}

// Pipelined decode (Model::QueuePick: each step queued before the picks of the one before are read, its ids
// fed from them on the device; on the CUDA backend consecutive steps alternate between two recorded units,
// one per staging buffer) picks what steps with uploaded ids pick on a backend without graphs, through
// captures and replays, a verifying backend, and a change of batch (slot 0 leaves: the feed takes row 1 of
// the step before). Greedy picks, and top-k draws (a uniform of its own for each step and row), whose
// unpipelined reference is the host's draw (pick.h's PickRows) from the logits read back.
TEST_P(GpuTinyModel, PipelinedGreedyStepsPickAsUnpipelinedOnes) {
  ReplayRig rig = MakeReplayRig();
  const int64_t sampleable = vocab() - 3;
  const std::vector<int32_t> prompt[2] = {ref_->Ids("prompt.2.ids"), ref_->Ids("prompt.1.ids")};
  constexpr int kBoth = 8;
  auto draws_of = [](int step, size_t rows, bool drawn) {
    std::vector<TokenDraw> draws;
    for (size_t r = 0; drawn && r < rows; ++r) {
      TokenDraw d;
      d.greedy = false;
      d.rule.inv_temp = 1.0f / 0.8f;
      d.rule.top_k = 20;
      d.rule.top_p = 0.9;
      d.u = std::fmod(0.618034 * step + 0.29 * static_cast<double>(r) + 0.1, 1.0);
      draws.push_back(d);
    }
    return draws;
  };
  auto run = [&](Model& m, bool pipelined, int alone = 6, bool drawn = false) {
    auto state = m.backend().CreateState(m.MakeStateSpec(2, 64));
    int64_t pos[2] = {6, 3};
    std::vector<int32_t> last;  // the picks of the step before, in its row order
    for (int slot = 0; slot < 2; ++slot) {
      const std::vector<int32_t>& p = prompt[slot];
      const std::vector<int32_t> got =
          m.ForwardGreedy(ForwardBatch::Single({p.begin(), p.begin() + pos[slot]}, slot, 0, false), *state, sampleable);
      last.push_back(got.at(0));
    }
    std::vector<int32_t> all;
    bool queued = false;
    for (int step = 0; step < kBoth + alone; ++step) {
      const bool both = step < kBoth;
      ForwardBatch batch;
      std::vector<int32_t> feed;
      for (int slot = both ? 0 : 1; slot < 2; ++slot) {
        const int32_t row = static_cast<int32_t>(batch.tokens.size());
        const int32_t from = both || step > kBoth ? row : 1;  // the first step alone continues row 1
        batch.tokens.push_back(last.at(static_cast<size_t>(from)));
        batch.seqs.push_back(BatchSeq{slot, row, 1, pos[slot]++});
        batch.logit_rows.push_back(row);
        feed.push_back(from);
      }
      const std::vector<TokenDraw> draws = draws_of(step, batch.logit_rows.size(), drawn);
      if (!pipelined) {
        if (drawn) {
          const std::span<const float> logits = m.Forward(batch, *state);
          last = PickRows(logits, static_cast<int64_t>(draws.size()), vocab(), sampleable, draws);
        } else {
          last = m.ForwardGreedy(batch, *state, sampleable);
        }
        all.insert(all.end(), last.begin(), last.end());
        continue;
      }
      // The first step's ids are uploaded (the prompts' picks were taken); the others are fed.
      std::span<const int32_t> fed;
      if (step > 0) fed = feed;
      m.QueuePick(batch, *state, sampleable, draws, fed);
      if (queued) {
        const std::vector<int32_t> before = m.TakePick();
        all.insert(all.end(), before.begin(), before.end());
      }
      queued = true;
      last.assign(batch.logit_rows.size(), -7);  // a pipelined step must not read them
    }
    if (queued) {
      const std::vector<int32_t> before = m.TakePick();
      all.insert(all.end(), before.begin(), before.end());
    }
    return all;
  };
  for (const bool drawn : {false, true}) {
    SCOPED_TRACE(drawn ? "draws" : "greedy");
    const std::vector<int32_t> expected = run(*rig.eager, false, 6, drawn);
    ASSERT_EQ(expected.size(), static_cast<size_t>(2 * kBoth + 6));
    for (int32_t id : expected) EXPECT_GE(id, 0);
    EXPECT_EQ(run(*model_, true, 6, drawn), expected);
    EXPECT_EQ(run(*model_, true, 6, drawn), expected);         // the units recorded by the run before, replayed
    EXPECT_EQ(run(*rig.verifying, true, 6, drawn), expected);  // throws where a replay would have been wrong
    // Runs of one shape after another: a run's first step (ids uploaded) follows fed steps on both staging
    // buffers, and its second may replay the fed unit recorded on the other buffer by the run before.
    const std::vector<int32_t> both = run(*rig.eager, false, 0, drawn);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(run(*model_, true, 0, drawn), both) << "run " << i;
    if (drawn) {  // draws, not the greedy picks
      const std::vector<int32_t> greedy = run(*rig.eager, false, 6, false);
      EXPECT_NE(expected, greedy);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GpuTinyModel,
                         ::testing::ValuesIn(testing::kTinyModels),
                         [](const auto& info) { return testing::ParamName(info.param); });

// FP8 checkpoints (weights repacked to f8_e4m3_b128 at load, run by the quantized kernels) against
// transformers' logits from the dequantized weights.
INSTANTIATE_TEST_SUITE_P(Fp8Fixtures, GpuTinyModel, ::testing::Values("qwen3-tiny-fp8", "qwen3-next-tiny-fp8"),
                         [](const auto& info) { return testing::ParamName(info.param); });

// The real-vocabulary e2e models: greedy chats follow the CPU wherever its choice is clear.
class GpuE2eModel : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuE2eModel, ReferenceChatsFollowTheCpu) {
  REQUIRE_GPU();
  DirFileSet files(ModelDir(GetParam()));
  auto backend = Gpu();
  auto model = LoadModel(files, *backend);
  std::ifstream in(ModelDir(GetParam()) + "/reference-chat.json");
  nlohmann::json chats = nlohmann::json::parse(in);
  int i = 0;
  for (const auto& chat : chats) {
    std::vector<int32_t> prompt = chat["prompt_ids"].get<std::vector<int32_t>>();
    int n = static_cast<int>(chat["new_ids"].size());
    CheckGreedyAgainstCpu(files, *model, prompt, n, GetParam() + " chat " + std::to_string(i++));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GpuE2eModel, ::testing::Values("qwen3-e2e", "qwen3-next-e2e"),
                         [](const auto& info) { return testing::ParamName(info.param); });

}  // namespace
}  // namespace infernix

namespace infernix {
namespace {

// A GGUF file made by llama.cpp's quantizer (Q3_K_M: Q3_K, Q4_K, Q5_K and Q6_K tensors) on the GPU
// against the same file on the CPU, within the tolerance above.
TEST(GpuGguf, QuantizedFileFollowsTheCpu) {
  REQUIRE_GPU();
  const std::string path = testing::FixturesDir() + "/gguf/g-qwen3/g-qwen3-Q3_K_M.gguf";
  std::shared_ptr<const GgufFile> file = GgufFile::Open(path);
  CpuBackend cpu_backend(4);
  std::unique_ptr<Backend> gpu_backend = Gpu();
  auto cpu = LoadGgufModel(file, cpu_backend);
  auto gpu = LoadGgufModel(file, *gpu_backend);
  const int64_t vocab = cpu->config().vocab_size;
  Stats s;
  for (int n : {1, 9, 70}) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < n; ++i) prompt.push_back(static_cast<int32_t>((i * 7919 + 13) % vocab));
    Accumulate(s, PromptLogits(*gpu, prompt), PromptLogits(*cpu, prompt), vocab);
  }
  ExpectWithinTolerance(s, "g-qwen3-Q3_K_M.gguf GPU vs CPU");
}

// The qwen3-next-tiny config with the shared expert as wide as the routed ones, so that the CUDA backend
// runs it in the routed experts' kernels at decode (moe_gemv.cu; the fixtures' shared experts are wider,
// which takes the unfused path), on the same dummy weights on both backends, against the GPU with fusion off
// (the shared expert through the ops): greedy decoding follows the CPU at decisive steps, and the step
// logits stay within the fixtures' L2 tolerance on both paths.
TEST(GpuDummyHybrid, SharedExpertInTheRoutedKernelsFollowsTheCpu) {
  REQUIRE_GPU();
  DirFileSet files(ModelDir("qwen3-next-tiny"));
  ModelConfig c = LoadModelConfig(files);
  ASSERT_GT(c.shared_expert_intermediate_size, 0);
  c.shared_expert_intermediate_size = c.moe_intermediate_size;
  CpuBackend cpu_backend(0);
  auto cpu = LoadModelWithDummyWeights(c, cpu_backend, 7);
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 12; ++i) prompt.push_back((i * 7919 + 13) % static_cast<int32_t>(c.vocab_size));
  Stats fused, unfused;
  for (bool fuse : {true, false}) {
    auto gpu_backend = Gpu(true, fuse);
    auto gpu = LoadModelWithDummyWeights(c, *gpu_backend, 7);
    const std::string what = fuse ? "folded shared expert" : "unfused";
    CheckGreedyAgainstCpu(*cpu, *gpu, prompt, 32, "qwen3-next-tiny dummy, " + what, fuse ? &fused : &unfused);
    Stats& s = fuse ? fused : unfused;
    PrintStats(s, "dummy next, " + what);
    // Not the overall argmax agreement: this dummy model's steps are full of near-ties, which bf16
    // rounding flips on either path (measured: 0.84 folded, 0.88 unfused over 32 steps, while every
    // decisive step agreed).
    EXPECT_GE(s.DecisiveAgreement(), kMinDecisiveAgreement) << what;
    EXPECT_LE(s.RelL2(), kMaxRelL2) << what;
  }
  // Folding the shared expert in changes where the GPU rounds, not what it computes: no further from the
  // CPU than the unfused path, up to rounding noise (measured: rel. L2 0.041 folded, 0.064 unfused).
  EXPECT_LE(fused.RelL2(), 1.5 * unfused.RelL2() + 0.01);
}

// Dummy weights the CUDA backend makes in device memory (Backend::MakeDummyWeight) hold the bytes the
// host fill writes (tensor/dummy_values.h, tensor/dummy_blocks.h): bf16 (odd sizes for the grid-stride
// tail) and random blocks of every type the backend computes with (sizes that end in a partial 8-byte
// word; scales sqrt(3 / k) that make the K-quants' f16 fields subnormal); small and norm tensors stay on
// the host. FP8 weights are compared in the device layout they take on the GPU.
TEST(GpuDummyWeights, MadeOnTheGpuEqualTheHostFill) {
  REQUIRE_GPU();
  std::unique_ptr<Backend> gpu = Gpu();
  ModelConfig c;
  auto expect_same = [&](DummyWeightSource& src, const std::string& name, const Shape& shape, DType dtype) {
    std::optional<Tensor> t = src.MakeOnBackend(name, shape, *gpu);
    ASSERT_TRUE(t.has_value()) << name << " " << DTypeName(dtype);
    ASSERT_EQ(t->dtype, dtype);
    ASSERT_TRUE(t->shape == shape);
    const Tensor host = src.Get(name, shape);
    ASSERT_EQ(host.dtype, dtype);
    std::vector<uint8_t> device(t->size_bytes());
    gpu->CopyToHost(*t, device.data());
    const auto* h = static_cast<const uint8_t*>(host.data);
    // FP8 weights end in the device layout (backend/cuda/f8_layout.h).
    std::vector<uint8_t> reordered;
    if (dtype == DType::kF8E4M3B128) {
      reordered = cuda::F8DeviceRows(h, shape[0], shape[1]);
      h = reordered.data();
    }
    const auto diff = std::mismatch(device.begin(), device.end(), h);
    const size_t at = static_cast<size_t>(diff.first - device.begin());
    const size_t block = IsBlockQuantized(dtype) ? DTypeBlockBytes(dtype) : 2;
    EXPECT_EQ(at, device.size()) << name << " " << DTypeName(dtype) << ": byte " << at << " of " << device.size()
                                 << " (byte " << at % block << " of block " << at / block << ") is "
                                 << int{device[std::min(at, device.size() - 1)]} << " on the GPU, "
                                 << int{h[std::min(at, device.size() - 1)]} << " on the host";
  };
  DummyWeightSource bf16(c, 42);
  expect_same(bf16, "model.layers.0.mlp.down_proj.weight", {1000, 1031}, DType::kBF16);
  expect_same(bf16, "model.embed_tokens.weight", {4099, 256}, DType::kBF16);
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K,
                  DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS, DType::kF8E4M3B128}) {
    // 9 blocks per row and an odd number of rows: an odd number of blocks, so the tensor ends inside an
    // 8-byte word unless the block size in bytes is a multiple of 8.
    const int64_t k = 9 * DTypeBlockSize(t), rows = ((int64_t{1} << 19) / k + 1) | 1;
    DummyWeightSource q(c, 42, t);
    expect_same(q, "model.layers.0.mlp.down_proj.weight", {rows, k}, t);
  }
  EXPECT_FALSE(bf16.MakeOnBackend("model.layers.0.mlp.down_proj.weight", {64, 1024}, *gpu).has_value());
  EXPECT_FALSE(bf16.MakeOnBackend("model.norm.weight", {1 << 20}, *gpu).has_value());
}

}  // namespace
}  // namespace infernix
