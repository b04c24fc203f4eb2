// The models against transformers' outputs (tests/fixtures/models/*/reference.safetensors):
// at every position the same argmax and max |logit - ref| <= 1e-3 * max(1, max |ref|); greedy
// generation reproduces generate.new_ids and its step logits; decode equals prefill; batching several
// sequences at different positions in one forward call changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "backend/cpu/cpu_backend.h"
#include "engine/generator.h"
#include "model/model.h"
#include "model_check.h"
#include "test_util.h"

namespace infernix {
namespace {

using testing::ModelDir;
using testing::Reference;

using Comparison = testing::LogitComparison;
using testing::CompareLogits;

class TinyModel : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    files_ = std::make_unique<DirFileSet>(ModelDir(GetParam()));
    backend_ = std::make_unique<CpuBackend>(2);
    model_ = LoadModel(*files_, *backend_);
    ref_ = std::make_unique<Reference>(GetParam());
  }
  int64_t vocab() const { return model_->config().vocab_size; }

  std::unique_ptr<DirFileSet> files_;
  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Reference> ref_;
};

TEST_P(TinyModel, PromptLogitsMatchTransformers) {
  int checked = 0;
  for (int i = 0; ref_->Has("prompt." + std::to_string(i) + ".ids"); ++i, ++checked) {
    std::string p = "prompt." + std::to_string(i);
    std::vector<int32_t> ids = ref_->Ids(p + ".ids");
    Comparison c = CompareLogits(PromptLogits(*model_, ids), ref_->Floats(p + ".logits"), vocab());
    EXPECT_EQ(c.argmax_mismatches, 0) << p << " (length " << ids.size() << ")";
    EXPECT_LE(c.max_abs_diff, c.Bound()) << p << " (length " << ids.size() << ")";
    RecordProperty(p + ".max_abs_diff", std::to_string(c.max_abs_diff));
  }
  EXPECT_GE(checked, 4);
}

TEST_P(TinyModel, GreedyGenerationMatchesTransformers) {
  std::vector<int32_t> prompt = ref_->Ids("generate.prompt_ids");
  std::vector<int32_t> want = ref_->Ids("generate.new_ids");
  std::vector<float> step_logits;
  GreedyOptions g;
  g.max_new_tokens = static_cast<int>(want.size());
  g.on_step = [&](const std::vector<float>& l, int32_t) { step_logits.insert(step_logits.end(), l.begin(), l.end()); };
  EXPECT_EQ(GreedyGenerate(*model_, prompt, g), want);
  Comparison c = CompareLogits(step_logits, ref_->Floats("generate.step_logits"), vocab());
  EXPECT_EQ(c.argmax_mismatches, 0);
  EXPECT_LE(c.max_abs_diff, c.Bound());
}

// Decoding token by token gives the logits of a prefill of the whole sequence. The decode steps read the
// logits where the backend leaves them (Model::Forward's span), and spoil them after: the caller may change
// them, and the next pass must not depend on it.
TEST_P(TinyModel, DecodeEqualsPrefill) {
  std::vector<int32_t> ids = ref_->Ids("prompt.2.ids");  // 64 tokens in every fixture
  ASSERT_GE(ids.size(), 10u);
  std::vector<float> prefill = PromptLogits(*model_, ids);
  auto state = backend_->CreateState(model_->MakeStateSpec(1, static_cast<int64_t>(ids.size())));
  std::vector<float> decoded, logits;
  // A prefill chunk of 5, then one token at a time.
  model_->Forward(ForwardBatch::Single({ids.begin(), ids.begin() + 5}, 0, 0, true), *state, logits);
  decoded = logits;
  for (size_t i = 5; i < ids.size(); ++i) {
    std::span<float> step = model_->Forward(ForwardBatch::Single({ids[i]}, 0, static_cast<int64_t>(i), true), *state);
    ASSERT_EQ(step.size(), static_cast<size_t>(vocab()));
    decoded.insert(decoded.end(), step.begin(), step.end());
    std::fill(step.begin(), step.end(), std::nanf(""));
  }
  // A pass that wants no logit rows returns none.
  auto other = backend_->CreateState(model_->MakeStateSpec(1, 4));
  ForwardBatch none = ForwardBatch::Single({ids[0]}, 0, 0, false);
  none.logit_rows.clear();
  EXPECT_TRUE(model_->Forward(none, *other).empty());
  Comparison c = CompareLogits(decoded, prefill, vocab());
  EXPECT_EQ(c.argmax_mismatches, 0);
  EXPECT_LE(c.max_abs_diff, 1e-4 * std::max(1.0, c.max_abs_ref));
}

// Three sequences at different positions in one flattened forward call (a decode token, a prefill
// continuation chunk and a fresh prompt) give the same logits as each run alone.
TEST_P(TinyModel, BatchedSequencesMatchSeparateRuns) {
  std::vector<int32_t> a = ref_->Ids("prompt.2.ids"), b = ref_->Ids("prompt.1.ids");
  int64_t v = vocab();
  auto state = backend_->CreateState(model_->MakeStateSpec(3, 128));
  std::vector<float> logits;
  // Warm up slots 0 and 1 with prefixes.
  model_->Forward(ForwardBatch::Single({a.begin(), a.begin() + 20}, 0, 0, false), *state, logits);
  model_->Forward(ForwardBatch::Single({b.begin(), b.begin() + 2}, 1, 0, false), *state, logits);
  ForwardBatch batch;
  batch.tokens.push_back(a[20]);                                   // slot 0: decode at position 20
  batch.tokens.insert(batch.tokens.end(), b.begin() + 2, b.end());  // slot 1: chunk from position 2
  batch.tokens.insert(batch.tokens.end(), a.begin(), a.begin() + 7);  // slot 2: fresh prompt
  int64_t nb = static_cast<int64_t>(b.size()) - 2;
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
  Comparison c = CompareLogits(logits, expected, v);
  EXPECT_EQ(c.argmax_mismatches, 0);
  EXPECT_LE(c.max_abs_diff, 1e-4 * std::max(1.0, c.max_abs_ref));
  EXPECT_EQ(state->SlotLength(0), 21);
  EXPECT_EQ(state->SlotLength(1), static_cast<int64_t>(b.size()));
  EXPECT_EQ(state->SlotLength(2), 7);
}

// ForwardGreedy picks each logit row's argmax over the sampleable ids (Backend::PickGreedy), and
// LastLogits reads the rows Forward would have returned: two states run the same passes, one each way.
TEST_P(TinyModel, ForwardGreedyPicksWhatForwardsLogitsSay) {
  std::vector<int32_t> a = ref_->Ids("prompt.2.ids"), b = ref_->Ids("prompt.1.ids");
  const int64_t v = vocab();
  for (const int64_t sampleable : {v, v - 7}) {
    auto by_logits = backend_->CreateState(model_->MakeStateSpec(2, 128));
    auto by_picks = backend_->CreateState(model_->MakeStateSpec(2, 128));
    std::vector<int32_t> last = {a[0], b[0]};
    for (int64_t step = 0; step < 4; ++step) {
      // Two sequences, one token each (a decode step), and on the first step a prompt chunk's last row.
      ForwardBatch batch;
      if (step == 0) {
        batch.tokens.assign(a.begin(), a.begin() + 6);
        batch.tokens.push_back(b[0]);
        batch.seqs = {{0, 0, 6, 0}, {1, 6, 1, 0}};
        batch.logit_rows = {5, 6};
      } else {
        batch.tokens = last;
        batch.seqs = {{0, 0, 1, 5 + step}, {1, 1, 1, step}};
        batch.logit_rows = {0, 1};
      }
      std::vector<float> logits;
      model_->Forward(batch, *by_logits, logits);
      const std::vector<int32_t> want = PickGreedyRows(logits, 2, v, sampleable);
      const std::vector<int32_t> got = model_->ForwardGreedy(batch, *by_picks, sampleable);
      ASSERT_EQ(got, want) << "step " << step << ", sampleable " << sampleable;
      ASSERT_GE(got[0], 0);
      ASSERT_GE(got[1], 0);
      std::span<const float> read = model_->LastLogits();
      EXPECT_TRUE(std::equal(read.begin(), read.end(), logits.begin(), logits.end())) << "step " << step;
      last = got;
    }
  }
  // A pass without logit rows picks nothing.
  auto other = backend_->CreateState(model_->MakeStateSpec(1, 4));
  ForwardBatch none = ForwardBatch::Single({a[0]}, 0, 0, false);
  none.logit_rows.clear();
  EXPECT_TRUE(model_->ForwardGreedy(none, *other, v).empty());
}

// Pipelined greedy decode (Model::QueuePick with a feed: each pass queued before the picks of the one
// before are taken, its ids taken from them) picks what passes with the same ids uploaded pick, also when
// the feed reorders the rows (the sequences swap places in the batch).
TEST_P(TinyModel, QueuedGreedyPassesFedFromThePicksBeforeThemPickAsForwardGreedy) {
  std::vector<int32_t> a = ref_->Ids("prompt.2.ids"), b = ref_->Ids("prompt.1.ids");
  const int64_t v = vocab();
  // The reference passes on a backend of their own: a backend's queued picks are taken in order.
  CpuBackend reference_backend(2);
  auto reference = LoadModel(*files_, reference_backend);
  auto by_ids = reference_backend.CreateState(reference->MakeStateSpec(2, 128));
  auto fed = backend_->CreateState(model_->MakeStateSpec(2, 128));
  ForwardBatch first;
  first.tokens = {a[0], a[1], b[0]};
  first.seqs = {{0, 0, 2, 0}, {1, 2, 1, 0}};
  first.logit_rows = {1, 2};
  std::vector<int32_t> last = reference->ForwardGreedy(first, *by_ids, v);  // [seq 0, seq 1]
  model_->QueuePick(first, *fed, v);
  for (int64_t step = 0; step < 5; ++step) {
    const bool swapped = step % 2 == 0;  // rows of the pass before: seq 0 in row 0 after an unswapped one
    const bool before_swapped = step > 0 && !swapped;
    ForwardBatch batch;
    std::vector<int32_t> feed;
    for (int seq : swapped ? std::vector<int>{1, 0} : std::vector<int>{0, 1}) {
      const auto i = static_cast<int64_t>(batch.tokens.size());
      batch.tokens.push_back(last[static_cast<size_t>(seq)]);
      batch.seqs.push_back({seq, i, 1, (seq == 0 ? 2 : 1) + step});
      batch.logit_rows.push_back(static_cast<int32_t>(i));
      feed.push_back(before_swapped ? 1 - seq : seq);
    }
    const std::vector<int32_t> want = reference->ForwardGreedy(batch, *by_ids, v);
    model_->QueuePick(batch, *fed, v, {}, feed);
    std::vector<int32_t> before = model_->TakePick();  // the pass before this one
    if (before_swapped) std::swap(before[0], before[1]);
    ASSERT_EQ(before, last) << "step " << step;
    last = want;
    if (swapped) std::swap(last[0], last[1]);  // back to [seq 0, seq 1]
    ASSERT_GE(want[0], 0);
    ASSERT_GE(want[1], 0);
  }
  std::vector<int32_t> final_picks = model_->TakePick();
  std::swap(final_picks[0], final_picks[1]);  // the last step (4) was swapped
  EXPECT_EQ(final_picks, last);
}

// The thread count does not change a single bit of the output.
TEST_P(TinyModel, DeterministicAcrossThreadCounts) {
  std::vector<int32_t> ids = ref_->Ids("prompt.2.ids");
  std::vector<float> two = PromptLogits(*model_, ids);
  CpuBackend one_thread(1);
  auto model1 = LoadModel(*files_, one_thread);
  EXPECT_EQ(PromptLogits(*model1, ids), two);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TinyModel,
                         ::testing::ValuesIn(testing::kTinyModels),
                         [](const auto& info) { return testing::ParamName(info.param); });

// The real-vocabulary e2e models reproduce the greedy ids of their reference chats.
class E2eModel : public ::testing::TestWithParam<std::string> {};

TEST_P(E2eModel, ReproducesReferenceChat) {
  DirFileSet files(ModelDir(GetParam()));
  CpuBackend backend(2);
  auto model = LoadModel(files, backend);
  std::ifstream in(ModelDir(GetParam()) + "/reference-chat.json");
  nlohmann::json chats = nlohmann::json::parse(in);
  ASSERT_EQ(chats.size(), 2u);
  for (const auto& chat : chats) {
    std::vector<int32_t> prompt = chat["prompt_ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> want = chat["new_ids"].get<std::vector<int32_t>>();
    GreedyOptions g;
    g.max_new_tokens = static_cast<int>(want.size());
    EXPECT_EQ(GreedyGenerate(*model, prompt, g), want);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, E2eModel, ::testing::Values("qwen3-e2e", "qwen3-next-e2e"),
                         [](const auto& info) { return testing::ParamName(info.param); });

}  // namespace
}  // namespace infernix
