// GGUF files made by llama.cpp's converter and quantizer, run on the CPU backend:
//  - the BF16 files hold exactly the weights of HF checkpoints, so they must reproduce transformers'
//    logits (reference.safetensors) to the bound the safetensors models meet (1e-3 * max(1, max|ref|));
//  - the quantized files are compared with llama.cpp's own greedy runs (reference-llamacpp.json): the
//    greedy tokens for as long as llama.cpp's CPU and CUDA runs agree with each other, and the
//    first step's top-10 log-probabilities within a bound derived from the CPU-vs-CUDA difference.
// The repo carries g-qwen3-next-Q4_K_M (tests/fixtures/gguf); the other files are read from the shared
// reference folder ($INFERNIX_SHARED_DIR, default ../shared beside the source tree) when it is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "backend/cpu/cpu_backend.h"
#include "engine/generator.h"
#include "model/gguf_model.h"
#include "model/model.h"
#include "model_check.h"
#include "test_util.h"

namespace infernix {
namespace {

std::string SharedGgufDir() {
  const char* env = std::getenv("INFERNIX_SHARED_DIR");
  return std::string(env != nullptr ? env : INFERNIX_SHARED_DIR) + "/reference/gguf";
}

// The folder holding `file` of model `name`: the repo's fixtures first, then the shared folder.
std::string FindFile(const std::string& name, const std::string& file) {
  for (const std::string& dir : {testing::FixturesDir() + "/gguf/" + name, SharedGgufDir() + "/" + name})
    if (std::filesystem::exists(dir + "/" + file)) return dir;
  return "";
}

std::vector<float> LogSoftmax(const float* x, int64_t n) {
  double mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, static_cast<double>(x[i]));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - mx);
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<float>(x[i] - mx - std::log(sum));
  return out;
}

struct Loaded {
  std::unique_ptr<CpuBackend> backend = std::make_unique<CpuBackend>(2);
  std::unique_ptr<Model> model;
};

Loaded Load(const std::string& path) {
  Loaded l;
  l.model = LoadGgufModel(GgufFile::Open(path), *l.backend);
  return l;
}

// ---- BF16 files against transformers ----

class Bf16Gguf : public ::testing::TestWithParam<std::string> {};

TEST_P(Bf16Gguf, ReproducesTransformers) {
  const std::string name = GetParam(), file = name + "-BF16.gguf";
  std::string dir = FindFile(name, file);
  if (dir.empty()) GTEST_SKIP() << file << " is not in the repo and " << SharedGgufDir() << " is absent";
  Loaded l = Load(dir + "/" + file);
  testing::ExpectReproducesReference(*l.model, testing::Reference(testing::Reference::InDir{dir}), file);
}

INSTANTIATE_TEST_SUITE_P(Files, Bf16Gguf, ::testing::Values("g-qwen3", "g-qwen3-moe", "g-qwen3-next"),
                         [](const auto& info) { return testing::ParamName(info.param); });

// ---- quantized files against llama.cpp ----

struct LlamaRun {
  std::vector<int32_t> prompt, new_ids;
  std::vector<std::vector<std::pair<int32_t, double>>> steps;  // top-10 (id, logprob) per step
};

std::optional<LlamaRun> ParseRun(const nlohmann::json& j) {
  if (j["new_ids"].is_null() || j["steps"].is_null()) return std::nullopt;
  LlamaRun r;
  r.prompt = j["prompt_ids"].get<std::vector<int32_t>>();
  r.new_ids = j["new_ids"].get<std::vector<int32_t>>();
  for (const auto& step : j["steps"]) {
    std::vector<std::pair<int32_t, double>> top;
    for (const auto& c : step) top.emplace_back(c["id"].get<int32_t>(), c["logprob"].get<double>());
    r.steps.push_back(std::move(top));
  }
  return r;
}

class QuantizedGguf : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(QuantizedGguf, AgreesWithLlamaCpp) {
  const auto& [name, quant] = GetParam();
  const std::string file = name + "-" + quant + ".gguf";
  std::string dir = FindFile(name, file);
  if (dir.empty()) GTEST_SKIP() << file << " is not in the repo and " << SharedGgufDir() << " is absent";
  nlohmann::json ref = nlohmann::json::parse(std::ifstream(dir + "/reference-llamacpp.json"));
  const nlohmann::json& runs = ref["files"][file];
  Loaded l = Load(dir + "/" + file);
  const int64_t vocab = l.model->config().vocab_size;
  // llama.cpp's CPU-vs-CUDA spread of first-step log-probabilities over every file of this reference:
  // the measure of its self-agreement where a file has only one usable run.
  double global_spread = 0;
  for (const auto& [other_file, other] : ref["files"].items())
    for (size_t p = 0; other.contains("cuda") && p < other["cpu"].size(); ++p) {
      std::optional<LlamaRun> a = ParseRun(other["cpu"][p]), b = ParseRun(other["cuda"][p]);
      if (!a || !b) continue;
      std::map<int32_t, double> second(b->steps[0].begin(), b->steps[0].end());
      for (auto [id, lp] : a->steps[0])
        if (second.count(id)) global_spread = std::max(global_spread, std::abs(lp - second[id]));
    }
  int compared = 0;
  for (size_t p = 0; p < runs["cpu"].size(); ++p) {
    // Compare with the CPU run, or the CUDA run where llama.cpp's CPU run has no answer (it could not
    // serialise a broken UTF-8 piece).
    std::optional<LlamaRun> cpu = ParseRun(runs["cpu"][p]);
    std::optional<LlamaRun> cuda = runs.contains("cuda") ? ParseRun(runs["cuda"][p]) : std::nullopt;
    if (!cpu) std::swap(cpu, cuda);
    if (!cpu) continue;
    ++compared;
    // How far llama.cpp agrees with itself: greedy tokens, and the first step's top-10 log-probabilities.
    size_t agree = cpu->new_ids.size();
    double self_diff = global_spread;
    if (cuda) {
      agree = 0;
      while (agree < cpu->new_ids.size() && agree < cuda->new_ids.size() && cpu->new_ids[agree] == cuda->new_ids[agree])
        ++agree;
      self_diff = 0;
      std::map<int32_t, double> cuda_first(cuda->steps[0].begin(), cuda->steps[0].end());
      for (auto [id, lp] : cpu->steps[0])
        if (cuda_first.count(id)) self_diff = std::max(self_diff, std::abs(lp - cuda_first[id]));
    }
    GreedyOptions g;
    g.max_new_tokens = static_cast<int>(agree);
    std::vector<int32_t> got = GreedyGenerate(*l.model, cpu->prompt, g);
    size_t ours = 0;
    while (ours < got.size() && got[ours] == cpu->new_ids[ours]) ++ours;
    // The first step's log-probabilities, from a prefill of the prompt.
    std::vector<float> logits = PromptLogits(*l.model, cpu->prompt);
    std::vector<float> lp = LogSoftmax(logits.data() + (cpu->prompt.size() - 1) * static_cast<size_t>(vocab), vocab);
    double diff = 0;
    for (auto [id, expected] : cpu->steps[0]) diff = std::max(diff, std::abs(lp[static_cast<size_t>(id)] - expected));
    // llama.cpp rounds activations to 8-bit blocks in its quantized dot products and we compute in f32
    // from the dequantized weights, so the two can differ by more than its CPU and CUDA runs do (which
    // round alike). Bound: twice its CPU-vs-CUDA spread (the largest over the reference's files where
    // this file has one run), and at least 0.05.
    const double tol = std::max(2 * self_diff, 0.05);
    std::cout << "[ metric ] " << file << " prompt " << p << ": greedy tokens equal to llama.cpp CPU for " << ours
              << " of " << agree << " steps (" << (cuda ? "llama.cpp CPU = CUDA" : "one llama.cpp run") << " for " << agree
              << "); first-step top-10 logprob max |diff| " << diff << " (llama.cpp CPU vs CUDA: " << self_diff
              << (cuda ? "" : ", largest over the reference") << ")\n";
    EXPECT_LE(diff, tol);
    if (ours < agree) {
      // A divergence must be a near-tie for llama.cpp: our token within `tol` of its pick at that step.
      const auto& top = cpu->steps[ours];
      double ours_lp = -1e9;
      for (auto [id, v] : top)
        if (id == got[ours]) ours_lp = v;
      std::cout << "[ metric ]   diverges at step " << ours << ": llama.cpp's logprob of its token " << top[0].second
                << ", of ours " << ours_lp << "\n";
      EXPECT_LE(top[0].second - ours_lp, tol) << "step " << ours << " is not a near-tie for llama.cpp";
    }
  }
  EXPECT_GT(compared, 0) << "no usable llama.cpp run for " << file;
}

INSTANTIATE_TEST_SUITE_P(
    Files, QuantizedGguf,
    ::testing::Values(std::pair{"g-qwen3-next", "Q4_K_M"}, std::pair{"g-qwen3-next", "Q8_0"},
                      std::pair{"g-qwen3-moe", "Q4_K_M"}, std::pair{"g-qwen3", "Q8_0"}, std::pair{"g-qwen3", "Q4_0"},
                      std::pair{"g-qwen3", "Q3_K_M"}, std::pair{"g-qwen3", "Q5_K_M"}, std::pair{"g-qwen3", "Q6_K"}, std::pair{"qwen3-e2e", "Q8_0"}),
    [](const auto& info) { return testing::ParamName(info.param.first + "_" + info.param.second); });

}  // namespace
}  // namespace infernix
