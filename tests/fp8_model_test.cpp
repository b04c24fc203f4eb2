// FP8 checkpoints (quantization_config fp8, 128x128 blocks, weight_scale_inv): a checkpoint written
// here from the qwen3-tiny fixture must give exactly the logits of the same model with the dequantized
// weights stored as f32; broken FP8 checkpoints give clear errors; the transformers FP8 fixtures
// (scripts/make_fp8_fixtures.py) match their reference logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "backend/cpu/cpu_backend.h"
#include "base/error.h"
#include "model/fp8_weights.h"
#include "model/model.h"
#include "model_check.h"
#include "test_util.h"

namespace infernix {
namespace {

namespace fs = std::filesystem;
using testing::ModelDir;
using testing::RawTensor;
using testing::ReadSafetensors;

// Nearest E4M3 byte to x (|x| <= 448), ties to the even byte, by search over the 127 finite magnitudes.
uint8_t ToE4M3(float x) {
  uint8_t best = 0;
  float best_err = INFINITY;
  for (int b = 0; b < 0x7f; ++b) {
    float err = std::fabs(std::fabs(x) - F8E4M3ToF32(static_cast<uint8_t>(b)));
    if (err < best_err || (err == best_err && (b & 1) == 0)) best = static_cast<uint8_t>(b), best_err = err;
  }
  return static_cast<uint8_t>(best | (x < 0 ? 0x80 : 0));
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// Quantizes a BF16 [rows, cols] tensor as Qwen's FP8 checkpoints are (scale = amax / 448 per 128x128
// block, stored as `scale_dtype`). Returns fp8, scale_inv and the dequantized f32 weight.
struct Quantized {
  RawTensor fp8, scale_inv, dequantized;
};
Quantized Quantize(const RawTensor& w, const std::string& scale_dtype) {
  int64_t rows = w.shape[0], cols = w.shape[1], rb = (rows + 127) / 128, cb = (cols + 127) / 128;
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t v;
    std::memcpy(&v, w.bytes.data() + 2 * i, 2);
    x[i] = Bf16ToF32(v);
  }
  std::vector<float> scale(static_cast<size_t>(rb * cb), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float& s = scale[static_cast<size_t>((r / 128) * cb + c / 128)];
      s = std::max(s, std::fabs(x[static_cast<size_t>(r * cols + c)]));
    }
  std::vector<uint16_t> scale_bf16;
  for (float& s : scale) {
    s = s > 0 ? s / 448.0f : 1.0f;
    if (scale_dtype == "BF16") s = Bf16ToF32(F32ToBf16(s)), scale_bf16.push_back(F32ToBf16(s));
  }
  std::vector<uint8_t> q(x.size());
  std::vector<float> deq(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      size_t i = static_cast<size_t>(r * cols + c);
      float s = scale[static_cast<size_t>((r / 128) * cb + c / 128)];
      q[i] = ToE4M3(std::clamp(x[i] / s, -448.0f, 448.0f));
      deq[i] = F8E4M3ToF32(q[i]) * s;
    }
  return {RawTensor{"F8_E4M3", w.shape, Bytes(q)},
          RawTensor{scale_dtype, {rb, cb}, scale_dtype == "BF16" ? Bytes(scale_bf16) : Bytes(scale)},
          RawTensor{"F32", w.shape, Bytes(deq)}};
}

const nlohmann::json kQuantConfig = {{"quant_method", "fp8"},
                                     {"fmt", "e4m3"},
                                     {"activation_scheme", "dynamic"},
                                     {"weight_block_size", {128, 128}}};

class Fp8ModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("infernix_fp8_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "fp8");
    fs::create_directories(root_ / "f32");
  }
  void TearDown() override { fs::remove_all(root_); }

  // Writes root/fp8 (FP8 checkpoint) and root/f32 (its dequantized weights) from qwen3-tiny. The
  // projections whose rows are a multiple of 128 are quantized (v_proj with bf16 scales, the others
  // f32); `also_quantize` adds tensors whatever their shape; down_proj (rows of 352) stays bf16.
  void Write(const std::vector<std::string>& also_quantize = {}, bool with_quant_config = true) {
    std::map<std::string, RawTensor> src = ReadSafetensors(ModelDir("qwen3-tiny") + "/model.safetensors"), fp8, f32;
    for (const auto& [name, t] : src) {
      bool proj = name.find("_proj.weight") != std::string::npos && t.shape.size() == 2 && t.shape[1] % 128 == 0;
      bool forced = std::find(also_quantize.begin(), also_quantize.end(), name) != also_quantize.end();
      if (proj || forced) {
        Quantized q = Quantize(t, name.find("v_proj") != std::string::npos ? "BF16" : "F32");
        fp8[name] = q.fp8;
        fp8[name + "_scale_inv"] = q.scale_inv;
        f32[name] = q.dequantized;
        ++n_quantized_;
      } else {
        fp8[name] = f32[name] = t;
      }
    }
    testing::WriteSafetensors((root_ / "fp8/model.safetensors").string(), fp8);
    testing::WriteSafetensors((root_ / "f32/model.safetensors").string(), f32);
    nlohmann::json config = nlohmann::json::parse(testing::ReadBinary(ModelDir("qwen3-tiny") + "/config.json"));
    std::ofstream(root_ / "f32/config.json") << config.dump(2);
    if (with_quant_config) config["quantization_config"] = kQuantConfig;
    std::ofstream(root_ / "fp8/config.json") << config.dump(2);
  }

  std::vector<float> Logits(const std::string& sub, const std::vector<int32_t>& ids) {
    DirFileSet files((root_ / sub).string());
    CpuBackend backend(2);
    auto model = LoadModel(files, backend);
    auto state = backend.CreateState(model->MakeStateSpec(1, 64));
    std::vector<float> logits;
    model->Forward(ForwardBatch::Single(ids, 0, 0, true), *state, logits);
    return logits;
  }

  void ExpectLoadError(ErrorCode code, std::initializer_list<std::string> parts) {
    testing::ExpectModelLoadError((root_ / "fp8").string(), code, parts);
  }

  fs::path root_;
  int n_quantized_ = 0;
};

TEST_F(Fp8ModelTest, LogitsEqualTheDequantizedF32ModelBitForBit) {
  Write();
  EXPECT_EQ(n_quantized_, 4 * 6);  // q, k, v, o, gate, up in each of 4 layers
  std::vector<int32_t> ids = {1, 77, 3000, 12, 4095, 5, 900};
  std::vector<float> fp8 = Logits("fp8", ids), f32 = Logits("f32", ids);
  ASSERT_EQ(fp8.size(), ids.size() * 4096);
  ASSERT_EQ(fp8.size(), f32.size());
  for (size_t i = 0; i < fp8.size(); ++i) ASSERT_EQ(fp8[i], f32[i]) << "logit " << i;
  // The quantization is real: the original bf16 model's logits differ.
  DirFileSet files(ModelDir("qwen3-tiny"));
  CpuBackend backend(2);
  auto model = LoadModel(files, backend);
  auto state = backend.CreateState(model->MakeStateSpec(1, 64));
  std::vector<float> bf16;
  model->Forward(ForwardBatch::Single(ids, 0, 0, true), *state, bf16);
  double max_diff = 0;
  for (size_t i = 0; i < bf16.size(); ++i) max_diff = std::max(max_diff, std::fabs(double(bf16[i]) - fp8[i]));
  EXPECT_GT(max_diff, 1e-3);
}

TEST_F(Fp8ModelTest, ScaleTensorsArePartOfTheirWeights) {
  Write();
  auto source = std::make_unique<Fp8WeightSource>(
      std::make_unique<SafetensorsWeightSource>(std::make_unique<WeightFiles>(DirFileSet((root_ / "fp8").string()))),
      128);
  for (const auto& n : source->Names()) EXPECT_EQ(n.find("scale_inv"), std::string::npos) << n;
  Tensor q = source->Get("model.layers.0.self_attn.q_proj.weight", {});
  EXPECT_EQ(q.dtype, DType::kF8E4M3B128);
  EXPECT_EQ(q.shape, (Shape{128, 128}));
  Tensor down = source->Get("model.layers.0.mlp.down_proj.weight", {});
  EXPECT_EQ(down.dtype, DType::kBF16);
}

TEST_F(Fp8ModelTest, RowsNotAMultipleOf128AreUnsupported) {
  Write({"model.layers.1.mlp.down_proj.weight"});
  ExpectLoadError(ErrorCode::kUnsupported, {"model.layers.1.mlp.down_proj.weight", "352", "multiple of 128"});
}

TEST_F(Fp8ModelTest, Fp8WithoutQuantizationConfigIsUnsupported) {
  Write({}, /*with_quant_config=*/false);
  ExpectLoadError(ErrorCode::kUnsupported, {"F8_E4M3", "quantization_config"});
}

TEST_F(Fp8ModelTest, MissingOrMisshapenScalesAreErrors) {
  Write();
  std::string path = (root_ / "fp8/model.safetensors").string();
  auto tensors = ReadSafetensors((root_ / "fp8" / "model.safetensors").string());
  tensors.erase("model.layers.2.self_attn.o_proj.weight_scale_inv");
  testing::WriteSafetensors(path, tensors);
  ExpectLoadError(ErrorCode::kNotFound, {"model.layers.2.self_attn.o_proj.weight_scale_inv"});
  tensors = ReadSafetensors((root_ / "fp8" / "model.safetensors").string());
  RawTensor& s = tensors["model.layers.0.mlp.up_proj.weight_scale_inv"];
  ASSERT_EQ(s.shape, (std::vector<int64_t>{3, 1}));
  s.shape = {1, 3};
  tensors["model.layers.2.self_attn.o_proj.weight_scale_inv"] = RawTensor{"F32", {1, 1}, std::string(4, '\0')};
  testing::WriteSafetensors(path, tensors);
  ExpectLoadError(ErrorCode::kInvalidFormat, {"model.layers.0.mlp.up_proj.weight_scale_inv", "[1, 3]", "[3, 1]"});
}

// The transformers fixtures (scripts/make_fp8_fixtures.py): same bound as model_reference_test. Until
// they are committed under tests/fixtures/models/<name>/ the test skips; once committed, a missing
// decompressed copy fails.
class Fp8FixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Fp8FixtureTest, MatchesTransformers) {
  const std::string name = GetParam();
  bool committed = fs::exists(fs::path(INFERNIX_SOURCE_FIXTURES) / "models" / name / "config.json");
  if (!fs::exists(ModelDir(name) + "/reference.safetensors")) {
    if (committed) FAIL() << ModelDir(name) << "/reference.safetensors is missing (not decompressed?)";
    GTEST_SKIP() << name << " is not in tests/fixtures/models yet (scripts/make_fp8_fixtures.py makes it)";
  }
  DirFileSet files(ModelDir(name));
  CpuBackend backend(2);
  auto model = LoadModel(files, backend);
  testing::Reference ref(name);
  for (int i = 0; ref.Has("prompt." + std::to_string(i) + ".ids"); ++i) {
    std::vector<int32_t> ids = ref.Ids("prompt." + std::to_string(i) + ".ids");
    testing::LogitComparison c = testing::CompareLogits(PromptLogits(*model, ids),
                                                        ref.Floats("prompt." + std::to_string(i) + ".logits"),
                                                        model->config().vocab_size);
    std::cout << "[ metric ] " << name << " prompt " << i << ": max |logit - ref| " << c.max_abs_diff << " (max |ref| "
              << c.max_abs_ref << ")\n";
    EXPECT_LE(c.max_abs_diff, 1e-4 * std::max(1.0, c.max_abs_ref)) << name << " prompt " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Fp8FixtureTest, ::testing::Values("qwen3-tiny-fp8", "qwen3-next-tiny-fp8"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

}  // namespace
}  // namespace infernix
