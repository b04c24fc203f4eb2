// Checks of a model shared by the integration tests: its logits against a reference (transformers'
// reference.safetensors, or another run: the largest absolute difference, the largest reference
// magnitude, the rows whose argmax differs), and the error a broken model folder gives.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <iostream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "base/error.h"
#include "engine/generator.h"
#include "model/model.h"
#include "test_util.h"

namespace infernix::testing {

struct LogitComparison {
  double max_abs_diff = 0, max_abs_ref = 0;
  int64_t argmax_mismatches = 0;
  // The bound every model meets against transformers' f32 logits: 1e-3 * max(1, max |ref|).
  double Bound() const { return 1e-3 * std::max(1.0, max_abs_ref); }

  // Adds rows of `vocab` logits (`got` and `ref` of the same size) to the comparison.
  void Add(const std::vector<float>& got, const std::vector<float>& ref, int64_t vocab) {
    EXPECT_EQ(got.size(), ref.size());
    const int64_t rows = static_cast<int64_t>(std::min(got.size(), ref.size())) / vocab;
    for (int64_t r = 0; r < rows; ++r) {
      const float* g = got.data() + r * vocab;
      const float* e = ref.data() + r * vocab;
      if (Argmax(g, vocab) != Argmax(e, vocab)) ++argmax_mismatches;
      for (int64_t i = 0; i < vocab; ++i) {
        max_abs_diff = std::max(max_abs_diff, std::abs(static_cast<double>(g[i]) - e[i]));
        max_abs_ref = std::max(max_abs_ref, std::abs(static_cast<double>(e[i])));
      }
    }
  }
};

inline LogitComparison CompareLogits(const std::vector<float>& got, const std::vector<float>& ref, int64_t vocab) {
  LogitComparison c;
  c.Add(got, ref, vocab);
  return c;
}

// The logits of every prompt of `ref` (prompt.<i>.ids), against transformers' (prompt.<i>.logits), or
// against those `other` computes when given.
inline LogitComparison ComparePromptLogits(Model& model, const Reference& ref, Model* other = nullptr) {
  LogitComparison c;
  const int64_t vocab = model.config().vocab_size;
  for (int p = 0; ref.Has("prompt." + std::to_string(p) + ".ids"); ++p) {
    const std::string name = "prompt." + std::to_string(p);
    std::vector<int32_t> prompt = ref.Ids(name + ".ids");
    c.Add(PromptLogits(model, prompt),
          other != nullptr ? PromptLogits(*other, prompt) : ref.Floats(name + ".logits"), vocab);
  }
  return c;
}

// `model` reproduces `ref`: at every prompt the same argmax everywhere and the logits within the bound
// (each prompt against its own max |ref|), and greedy generation gives generate.new_ids. Prints one
// metric line per prompt, labelled `label`.
inline void ExpectReproducesReference(Model& model, const Reference& ref, const std::string& label) {
  const int64_t vocab = model.config().vocab_size;
  int prompts = 0;
  for (int p = 0; ref.Has("prompt." + std::to_string(p) + ".ids"); ++p, ++prompts) {
    const std::string name = "prompt." + std::to_string(p);
    std::vector<int32_t> prompt = ref.Ids(name + ".ids");
    LogitComparison c = CompareLogits(PromptLogits(model, prompt), ref.Floats(name + ".logits"), vocab);
    std::cout << "[ metric ] " << label << " prompt " << p << " (" << prompt.size() << " tokens): max |logit - ref| "
              << c.max_abs_diff << " (max |ref| " << c.max_abs_ref << "), argmax mismatches " << c.argmax_mismatches
              << "\n";
    EXPECT_EQ(c.argmax_mismatches, 0) << label << " prompt " << p;
    EXPECT_LE(c.max_abs_diff, c.Bound()) << label << " prompt " << p;
  }
  EXPECT_GT(prompts, 0) << label << ": the reference has no prompts";
  std::vector<int32_t> prompt = ref.Ids("generate.prompt_ids"), expected = ref.Ids("generate.new_ids");
  GreedyOptions g;
  g.max_new_tokens = static_cast<int>(expected.size());
  EXPECT_EQ(GreedyGenerate(model, prompt, g), expected) << label;
}

// `action` fails with an Error of `code` whose message holds every one of `parts`.
template <typename F>
void ExpectErrorFrom(F&& action, ErrorCode code, std::initializer_list<std::string> parts, const std::string& what) {
  try {
    action();
    ADD_FAILURE() << "expected an error " << what;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "'" << p << "' in: " << e.what();
  }
}

// LoadModel on folder `dir` fails with `code` and a message holding every one of `parts`.
inline void ExpectModelLoadError(const std::string& dir, ErrorCode code, std::initializer_list<std::string> parts) {
  DirFileSet files(dir);
  CpuBackend backend(1);
  ExpectErrorFrom([&] { LoadModel(files, backend); }, code, parts, "loading " + dir);
}

}  // namespace infernix::testing
