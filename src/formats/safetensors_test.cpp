#include "formats/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace infernix {
namespace {

namespace fs = std::filesystem;

// Builds a safetensors file in memory from a header JSON and raw data.
std::string Build(const nlohmann::json& header, const std::string& data) {
  std::string h = header.dump();
  uint64_t len = h.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &len, 8);
  return out + h + data;
}

std::string FloatBytes(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  SafetensorsFile Parse(const std::string& bytes) {
    files_.AddCopy("m.safetensors", bytes);
    return SafetensorsFile(files_.Open("m.safetensors"), "m.safetensors");
  }
  // Expects parsing to fail with `code` and a message containing every string of `parts`.
  void ExpectError(const std::string& bytes, ErrorCode code, std::initializer_list<std::string> parts) {
    try {
      Parse(bytes);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  }
  MemoryFileSet files_{"<test>"};
};

TEST_F(SafetensorsTest, ParsesEntriesAndViews) {
  nlohmann::json h = {{"__metadata__", {{"format", "pt"}}},
                      {"a", {{"dtype", "F32"}, {"shape", {2, 2}}, {"data_offsets", {0, 16}}}},
                      {"b", {{"dtype", "BF16"}, {"shape", {2}}, {"data_offsets", {16, 20}}}}};
  std::string data = FloatBytes({1, 2, 3, 4}) + std::string("\x80\x3f\x00\x40", 4);
  SafetensorsFile f = Parse(Build(h, data));
  ASSERT_EQ(f.entries().size(), 2u);
  Tensor a = f.View(*f.Find("a"));
  EXPECT_EQ(a.shape, (Shape{2, 2}));
  EXPECT_EQ(a.as<float>()[3], 4.0f);
  Tensor b = f.View(*f.Find("b"));
  EXPECT_EQ(b.dtype, DType::kBF16);
  EXPECT_EQ(LoadAsFloat(b, 0), 1.0f);
  EXPECT_EQ(LoadAsFloat(b, 1), 2.0f);
  EXPECT_EQ(f.Find("missing"), nullptr);
}

TEST_F(SafetensorsTest, TruncatedFiles) {
  ExpectError("abc", ErrorCode::kInvalidFormat, {"m.safetensors", "truncated"});
  nlohmann::json h = {{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}}};
  std::string full = Build(h, FloatBytes({1, 2, 3, 4}));
  // Cut inside the data: the entry points past the end.
  ExpectError(full.substr(0, full.size() - 3), ErrorCode::kInvalidFormat, {"'a'", "past the end"});
  // Cut inside the header.
  ExpectError(full.substr(0, 20), ErrorCode::kInvalidFormat, {"truncated", "header length"});
}

// Found by the fuzzer (src/formats/fuzz): a number too large for a double is nlohmann's out_of_range,
// not a parse_error; it must still be a format error, not an escaped exception.
TEST_F(SafetensorsTest, NumberOutOfRange) {
  std::string header = R"({"a": 2e999})";
  uint64_t len = header.size();
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &len, 8);
  ExpectError(bytes + header, ErrorCode::kInvalidFormat, {"m.safetensors", "malformed safetensors header"});
}

TEST_F(SafetensorsTest, HeaderThatLiesAboutSizes) {
  // Shape says 4 floats, offsets cover 3.
  nlohmann::json h = {{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 12}}}}};
  ExpectError(Build(h, FloatBytes({1, 2, 3, 4})), ErrorCode::kInvalidFormat, {"'a'", "holds 12 bytes", "needs 16"});
  // Offsets far past the end of the file.
  nlohmann::json far = {{"a", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {1000000, 1000004}}}}};
  ExpectError(Build(far, FloatBytes({1})), ErrorCode::kInvalidFormat, {"past the end"});
  // Reversed offsets.
  nlohmann::json rev = {{"a", {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {4, 0}}}}};
  ExpectError(Build(rev, FloatBytes({1})), ErrorCode::kInvalidFormat, {"reversed"});
  // A header length larger than the file.
  std::string bytes = Build(nlohmann::json::object(), "");
  uint64_t huge = 1ull << 40;
  std::memcpy(bytes.data(), &huge, 8);
  ExpectError(bytes, ErrorCode::kInvalidFormat, {"header length"});
}

TEST_F(SafetensorsTest, OverlapsUnknownDtypesAndBadJson) {
  nlohmann::json overlap = {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
                            {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {4, 12}}}}};
  ExpectError(Build(overlap, FloatBytes({1, 2, 3})), ErrorCode::kInvalidFormat, {"overlap"});
  nlohmann::json unknown = {{"a", {{"dtype", "Q4"}, {"shape", {2}}, {"data_offsets", {0, 2}}}}};
  ExpectError(Build(unknown, "ab"), ErrorCode::kInvalidFormat, {"unknown dtype 'Q4'"});
  std::string bad = Build(nlohmann::json::object(), "");
  bad.replace(8, 2, "{x");
  ExpectError(bad, ErrorCode::kInvalidFormat, {"malformed safetensors header"});
  nlohmann::json negative = {{"a", {{"dtype", "F32"}, {"shape", {-1}}, {"data_offsets", {0, 4}}}}};
  ExpectError(Build(negative, FloatBytes({1})), ErrorCode::kInvalidFormat, {"negative"});
  nlohmann::json missing = {{"a", {{"dtype", "F32"}, {"shape", {1}}}}};
  ExpectError(Build(missing, FloatBytes({1})), ErrorCode::kInvalidFormat, {"data_offsets"});
}

TEST_F(SafetensorsTest, KnownButUnsupportedDtypeFailsOnlyWhenUsed) {
  nlohmann::json h = {{"w", {{"dtype", "F8_E5M2"}, {"shape", {4}}, {"data_offsets", {0, 4}}}},
                      {"v", {{"dtype", "F32"}, {"shape", {1, 1, 1, 1, 2}}, {"data_offsets", {4, 12}}}}};
  SafetensorsFile f = Parse(Build(h, std::string(4, '\0') + FloatBytes({1, 2})));
  EXPECT_THROW(f.View(*f.Find("w")), Error);
  EXPECT_THROW(f.View(*f.Find("v")), Error);  // 5 dims: recognised (vision towers), not viewable
}

class WeightFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("infernix_weight_files_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& bytes) { std::ofstream(dir_ / name, std::ios::binary) << bytes; }
  std::string Shard(const std::string& tensor, float value) {
    nlohmann::json h = {{tensor, {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}}}};
    return Build(h, FloatBytes({value}));
  }
  fs::path dir_;
};

TEST_F(WeightFilesTest, SingleFileAndShards) {
  Write("model-00001-of-00002.safetensors", Shard("x", 1));
  Write("model-00002-of-00002.safetensors", Shard("y", 2));
  Write("model.safetensors.index.json",
        R"({"metadata": {}, "weight_map": {"x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors"}})");
  DirFileSet files(dir_.string());
  WeightFiles w(files);
  EXPECT_EQ(w.Names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(w.Get("y").as<float>()[0], 2.0f);
  EXPECT_NE(w.FileOf("y").find("00002"), std::string::npos);
  try {
    w.Get("z");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("'z'"), std::string::npos);
  }
}

TEST_F(WeightFilesTest, MissingShardIsNamed) {
  Write("model-00001-of-00002.safetensors", Shard("x", 1));
  Write("model.safetensors.index.json",
        R"({"weight_map": {"x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors"}})");
  DirFileSet files(dir_.string());
  try {
    WeightFiles w(files);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("model-00002-of-00002.safetensors"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("model.safetensors.index.json"), std::string::npos) << e.what();
  }
}

TEST_F(WeightFilesTest, IndexThatLiesAndNoWeights) {
  Write("a.safetensors", Shard("x", 1));
  Write("model.safetensors.index.json", R"({"weight_map": {"x": "a.safetensors", "y": "a.safetensors"}})");
  DirFileSet files(dir_.string());
  EXPECT_THROW(WeightFiles{files}, Error);
  fs::remove(dir_ / "model.safetensors.index.json");
  try {
    WeightFiles w(files);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos);
  }
  Write("model.safetensors.index.json", "{not json");
  EXPECT_THROW(WeightFiles{files}, Error);
}

TEST_F(WeightFilesTest, DuplicateTensorAcrossShards) {
  Write("a.safetensors", Shard("x", 1));
  Write("b.safetensors", Shard("x", 2));
  Write("model.safetensors.index.json", R"({"weight_map": {"x": "a.safetensors", "z": "b.safetensors"}})");
  DirFileSet files(dir_.string());
  EXPECT_THROW(WeightFiles{files}, Error);
}

}  // namespace
}  // namespace infernix
