// Loading real model folders and broken ones: sharded checkpoints, MTP/vision tensors, and every
// malformed input giving an error that names the file and the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "backend/cpu/cpu_backend.h"
#include "base/error.h"
#include "engine/generator.h"
#include "loader/model_package.h"
#include "model/model.h"
#include "model_check.h"
#include "test_util.h"

namespace infernix {
namespace {

namespace fs = std::filesystem;
using testing::ModelDir;
using testing::RawTensor;
using testing::ReadSafetensors;

class ModelLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("infernix_model_load_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Copies a fixture model's config.json (optionally edited) into the temp folder.
  void CopyConfig(const std::string& model, const std::function<void(nlohmann::json&)>& edit = nullptr) {
    nlohmann::json config = nlohmann::json::parse(testing::ReadBinary(ModelDir(model) + "/config.json"));
    if (edit) edit(config);
    std::ofstream(dir_ / "config.json") << config.dump(2);
  }
  // Expects LoadModel on the temp folder to fail with `code` and a message holding every part.
  void ExpectLoadError(ErrorCode code, std::initializer_list<std::string> parts) {
    testing::ExpectModelLoadError(dir_.string(), code, parts);
  }
  fs::path dir_;
};

TEST_F(ModelLoadTest, ShardedCheckpointGivesTheSameLogits) {
  CopyConfig("qwen3-next-tiny");
  auto tensors = ReadSafetensors(ModelDir("qwen3-next-tiny") + "/model.safetensors");
  std::map<std::string, RawTensor> shards[3];
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  size_t i = 0;
  for (auto& [name, t] : tensors) {
    size_t s = i++ % 3;
    std::string file = "model-0000" + std::to_string(s + 1) + "-of-00003.safetensors";
    index["weight_map"][name] = file;
    shards[s][name] = t;
  }
  for (size_t s = 0; s < 3; ++s)
    testing::WriteSafetensors((dir_ / ("model-0000" + std::to_string(s + 1) + "-of-00003.safetensors")).string(),
                              shards[s]);
  std::ofstream(dir_ / "model.safetensors.index.json") << index.dump();
  CpuBackend backend(2);
  DirFileSet sharded(dir_.string()), single(ModelDir("qwen3-next-tiny"));
  auto a = LoadModel(sharded, backend);
  auto b = LoadModel(single, backend);
  std::vector<int32_t> ids = {1, 2, 3, 100, 4000};
  EXPECT_EQ(PromptLogits(*a, ids), PromptLogits(*b, ids));
}

// Dummy weights of a GGUF block type keep the routers (and Qwen3-Next's shared-expert gate) in f32, as
// llama.cpp's files do: the MoE models load them and a forward pass stays finite.
TEST_F(ModelLoadTest, DummyQuantizedWeightsWithFloatRouters) {
  for (const char* model : {"qwen3-moe-tiny", "qwen3-next-tiny"}) {
    DirFileSet files(ModelDir(model));
    CpuBackend backend(2);
    auto m = LoadModelWithDummyWeights(LoadModelConfig(files), backend, 5, DType::kQ8_0);
    const std::vector<float> logits = PromptLogits(*m, {1, 2, 3, 100, 4000});
    ASSERT_FALSE(logits.empty()) << model;
    for (float v : logits) ASSERT_TRUE(std::isfinite(v)) << model;
  }
}

TEST_F(ModelLoadTest, MtpAndVisionTensorsAreSkipped) {
  CopyConfig("qwen3-next-tiny");
  auto tensors = ReadSafetensors(ModelDir("qwen3-next-tiny") + "/model.safetensors");
  tensors["mtp.fc.weight"] = RawTensor{"BF16", {2, 2}, std::string(8, '\0')};
  tensors["mtp.layers.0.mlp.experts.0.up_proj.weight"] = RawTensor{"F8_E4M3", {2, 2}, std::string(4, '\0')};
  testing::WriteSafetensors((dir_ / "model.safetensors").string(), tensors);
  DirFileSet files(dir_.string());
  CpuBackend backend(1);
  EXPECT_NO_THROW(LoadModel(files, backend));
}

TEST_F(ModelLoadTest, UnknownModelType) {
  CopyConfig("qwen3-tiny", [](nlohmann::json& c) { c["model_type"] = "llama"; });
  fs::copy(ModelDir("qwen3-tiny") + "/model.safetensors", dir_ / "model.safetensors");
  ExpectLoadError(ErrorCode::kUnsupported, {"config.json", "llama"});
}

TEST_F(ModelLoadTest, TruncatedSafetensors) {
  CopyConfig("qwen3-tiny");
  std::string bytes = testing::ReadBinary(ModelDir("qwen3-tiny") + "/model.safetensors");
  testing::WriteBinary((dir_ / "model.safetensors").string(), bytes.substr(0, bytes.size() / 2));
  ExpectLoadError(ErrorCode::kInvalidFormat, {"model.safetensors", "past the end"});
}

TEST_F(ModelLoadTest, HeaderThatLiesAboutSizes) {
  CopyConfig("qwen3-tiny");
  auto tensors = ReadSafetensors(ModelDir("qwen3-tiny") + "/model.safetensors");
  tensors["model.norm.weight"].shape = {256};  // 128 values stored, 256 claimed
  testing::WriteSafetensors((dir_ / "model.safetensors").string(), tensors);
  ExpectLoadError(ErrorCode::kInvalidFormat, {"model.safetensors", "model.norm.weight", "needs 512"});
}

TEST_F(ModelLoadTest, MissingShard) {
  CopyConfig("qwen3-tiny");
  fs::copy(ModelDir("qwen3-tiny") + "/model.safetensors", dir_ / "model-00001-of-00002.safetensors");
  nlohmann::json index = {{"weight_map",
                           {{"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
                            {"lm_head.weight", "model-00002-of-00002.safetensors"}}}};
  std::ofstream(dir_ / "model.safetensors.index.json") << index.dump();
  ExpectLoadError(ErrorCode::kNotFound, {"model.safetensors.index.json", "model-00002-of-00002.safetensors"});
}

TEST_F(ModelLoadTest, MissingTensorAndWrongShape) {
  CopyConfig("qwen3-tiny");
  auto tensors = ReadSafetensors(ModelDir("qwen3-tiny") + "/model.safetensors");
  tensors.erase("model.layers.2.mlp.up_proj.weight");
  testing::WriteSafetensors((dir_ / "model.safetensors").string(), tensors);
  ExpectLoadError(ErrorCode::kNotFound, {"model.layers.2.mlp.up_proj.weight", "missing"});
  CopyConfig("qwen3-tiny", [](nlohmann::json& c) { c["intermediate_size"] = 300; });
  fs::copy(ModelDir("qwen3-tiny") + "/model.safetensors", dir_ / "model.safetensors",
           fs::copy_options::overwrite_existing);
  ExpectLoadError(ErrorCode::kInvalidFormat, {"model.layers.0.mlp.gate_proj.weight", "[352, 128]", "[300, 128]"});
}

TEST_F(ModelLoadTest, MissingConfigAndMissingFolder) {
  ExpectLoadError(ErrorCode::kNotFound, {"config.json"});
  EXPECT_THROW(DirFileSet("/nonexistent/model/folder"), Error);
}

TEST_F(ModelLoadTest, TokenizerWithMoreIdsThanTheVocabulary) {
  // qwen3-e2e's tokenizer with a config whose vocab_size is below the tokenizer's ids.
  CopyConfig("qwen3-e2e", [](nlohmann::json& c) { c["vocab_size"] = 151000; });
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(ModelDir("qwen3-e2e") + "/" + file, dir_ / file);
  const int32_t n_ids = ModelPackage::Open(ModelDir("qwen3-e2e"))->LoadTokenizer()->vocab_size();
  ASSERT_GT(n_ids, 151000);
  testing::ExpectErrorFrom([&] { ModelPackage::Open(dir_.string())->LoadTokenizer(); }, ErrorCode::kInvalidArgument,
                           {dir_.string(), "tokenizer.json", std::to_string(n_ids), "config.json vocab_size", "151000"},
                           "loading the tokenizer");
  // A vocabulary padded past the tokenizer's ids is fine (as in the real checkpoint).
  CopyConfig("qwen3-e2e");
  EXPECT_NO_THROW(ModelPackage::Open(dir_.string())->LoadTokenizer());
}

TEST_F(ModelLoadTest, EosIdOutsideTheVocabulary) {
  CopyConfig("qwen3-tiny");  // vocab_size 4096
  std::ofstream(dir_ / "generation_config.json") << R"({"eos_token_id": [2, 5000]})";
  testing::ExpectErrorFrom([&] { ModelPackage::Open(dir_.string())->LoadGenerationDefaults(); },
                           ErrorCode::kInvalidArgument,
                           {"generation_config.json", "5000 is outside the model's vocabulary [0, 4096)"},
                           "loading the generation defaults");
}

TEST(ModelInputs, TokenOutOfRangeAndContextOverflow) {
  DirFileSet files(ModelDir("qwen3-tiny"));
  CpuBackend backend(1);
  auto model = LoadModel(files, backend);
  try {
    PromptLogits(*model, {1, 2, 4096});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("4096"), std::string::npos);
  }
  GreedyOptions g;
  g.max_new_tokens = 10;
  g.max_context = 8;
  try {
    GreedyGenerate(*model, {1, 2, 3}, g);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfRange);
    EXPECT_NE(std::string(e.what()).find("context size of 8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(GreedyGenerate(*model, {}, g), Error);
}

}  // namespace
}  // namespace infernix
