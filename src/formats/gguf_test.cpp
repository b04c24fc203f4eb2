#include "formats/gguf.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "formats/gguf_test_builder.h"

namespace infernix {
namespace {

using testing_gguf::Builder;

std::unique_ptr<GgufFile> Parse(const std::string& bytes) { return GgufFile::FromBlob(CopyToBlob(bytes), "m.gguf"); }

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

Builder Valid() {
  Builder b;
  b.KvString("general.architecture", "qwen3")
      .KvString("general.name", "tiny")
      .KvU32("qwen3.block_count", 2)
      .KvF32("qwen3.rope.freq_base", 1000000.0f)
      .KvBool("tokenizer.ggml.add_bos_token", false)
      .KvStrings("tokenizer.ggml.tokens", {"a", "b", "ab"})
      .KvI32s("tokenizer.ggml.token_type", {1, 1, 3});
  b.Tensor("w.f32", {4, 2}, 0, 32);          // shape [2, 4]
  b.Tensor("w.q8", {64, 3}, 8, 3 * 2 * 34);  // 3 rows of 2 Q8_0 blocks
  b.Tensor("w.bf16", {8}, 30, 16);
  return b;
}

TEST(GgufTest, ParsesMetadataAndTensors) {
  std::string bytes = Valid().Build();
  auto f = Parse(bytes);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->file_size(), bytes.size());
  EXPECT_EQ(f->data_offset() % 32, 0u);
  EXPECT_EQ(f->architecture(), "qwen3");
  EXPECT_EQ(f->GetString("general.name"), "tiny");
  EXPECT_EQ(f->GetInt("qwen3.block_count"), 2);
  EXPECT_EQ(f->RequireFloat("qwen3.rope.freq_base"), 1000000.0);
  EXPECT_EQ(f->GetBool("tokenizer.ggml.add_bos_token"), false);
  EXPECT_EQ(f->GetString("absent"), std::nullopt);
  EXPECT_EQ(f->GetArray("absent"), nullptr);
  const GgufArray* tokens = f->GetArray("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->element_type, GgufType::kString);
  EXPECT_EQ(std::get<std::vector<std::string>>(tokens->values), (std::vector<std::string>{"a", "b", "ab"}));
  const GgufArray* types = f->GetArray("tokenizer.ggml.token_type");
  ASSERT_NE(types, nullptr);
  EXPECT_EQ(std::get<std::vector<int64_t>>(types->values), (std::vector<int64_t>{1, 1, 3}));

  ASSERT_EQ(f->tensors().size(), 3u);
  const GgufTensorInfo* q8 = f->FindTensor("w.q8");
  ASSERT_NE(q8, nullptr);
  EXPECT_EQ(q8->type_name, "Q8_0");
  EXPECT_EQ(q8->dtype, DType::kQ8_0);
  EXPECT_EQ(q8->ne, (std::vector<int64_t>{64, 3}));
  EXPECT_EQ(q8->shape, (Shape{3, 64}));
  EXPECT_EQ(q8->size_bytes, 204u);
  EXPECT_EQ(q8->offset, f->data_offset() + 32);  // after w.f32 (32 bytes), aligned
  Tensor t = f->View(*q8);
  EXPECT_EQ(t.dtype, DType::kQ8_0);
  EXPECT_EQ(t.size_bytes(), 204u);
  // The Builder fills data byte i with i * 7 + 1.
  EXPECT_EQ(static_cast<const uint8_t*>(t.data)[0], static_cast<uint8_t>(32 * 7 + 1));
  const GgufTensorInfo* f32 = f->FindTensor("w.f32");
  EXPECT_EQ(f->View(*f32).shape, (Shape{2, 4}));
  EXPECT_EQ(f->FindTensor("w.bf16")->dtype, DType::kBF16);
  EXPECT_EQ(f->FindTensor("missing"), nullptr);
}

TEST(GgufTest, TypedGettersRefuseOtherTypes) {
  auto f = Parse(Valid().Build());
  try {
    f->GetInt("general.name");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidFormat);
    EXPECT_NE(std::string(e.what()).find("general.name"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("string"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f->GetFloat("qwen3.block_count"), Error);
  EXPECT_THROW(f->GetString("qwen3.block_count"), Error);
  EXPECT_THROW(f->GetArray("general.name"), Error);
  EXPECT_THROW(f->GetBool("general.name"), Error);
  try {
    f->RequireInt("qwen3.missing");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "m.gguf: missing metadata key qwen3.missing");
  }
}

TEST(GgufTest, IntegerTypesConvert) {
  Builder b;
  b.Kv("u8", 0, std::string(1, '\xff'))
      .Kv("i8", 1, std::string(1, '\xff'))
      .Kv("i16", 3, std::string("\x00\x80", 2))
      .Kv("u64", 10, Builder::U64(1ull << 40))
      .Kv("u64big", 10, Builder::U64(~0ull))
      .Kv("f64", 12, std::string("\x00\x00\x00\x00\x00\x00\xf0\x3f", 8));
  auto f = Parse(b.Build());
  EXPECT_EQ(f->GetInt("u8"), 255);
  EXPECT_EQ(f->GetInt("i8"), -1);
  EXPECT_EQ(f->GetInt("i16"), -32768);
  EXPECT_EQ(f->GetInt("u64"), int64_t{1} << 40);
  EXPECT_THROW(f->GetInt("u64big"), Error);
  EXPECT_EQ(f->GetFloat("f64"), 1.0);
}

TEST(GgufTest, NestedArrays) {
  // An array of two arrays of u8: [[1, 2], [3]].
  std::string inner1 = Builder::U32(0) + Builder::U64(2) + std::string("\x01\x02", 2);
  std::string inner2 = Builder::U32(0) + Builder::U64(1) + std::string("\x03", 1);
  Builder b;
  b.Kv("nested", 9, Builder::U32(9) + Builder::U64(2) + inner1 + inner2);
  auto f = Parse(b.Build());
  const GgufArray* a = f->GetArray("nested");
  ASSERT_NE(a, nullptr);
  const auto& outer = std::get<std::vector<GgufValue>>(a->values);
  ASSERT_EQ(outer.size(), 2u);
  const auto& first = *std::get<std::shared_ptr<GgufArray>>(outer[0].value);
  EXPECT_EQ(std::get<std::vector<int64_t>>(first.values), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(std::get<std::shared_ptr<GgufArray>>(outer[1].value)->size(), 1u);
}

TEST(GgufTest, DeeplyNestedArraysAreRefused) {
  std::string v = Builder::U32(0) + Builder::U64(0);
  for (int i = 0; i < 100; ++i) v = Builder::U32(9) + Builder::U64(1) + v;
  Builder b;
  b.Kv("deep", 9, v);
  ExpectError(b.Build(), ErrorCode::kInvalidFormat, {"m.gguf", "deep", "nested"});
}

TEST(GgufTest, WrongMagic) {
  std::string bytes = Valid().Build();
  bytes[0] = 'X';
  ExpectError(bytes, ErrorCode::kInvalidFormat, {"m.gguf", "not a GGUF file", "XGUF"});
  ExpectError("GG", ErrorCode::kInvalidFormat, {"m.gguf", "too short"});
}

TEST(GgufTest, Versions) {
  Builder b = Valid();
  b.version = 1;
  ExpectError(b.Build(), ErrorCode::kUnsupported, {"m.gguf", "version 1"});
  b.version = 7;
  ExpectError(b.Build(), ErrorCode::kInvalidFormat, {"m.gguf", "version 7"});
  b.version = 0x03000000;
  ExpectError(b.Build(), ErrorCode::kUnsupported, {"big-endian"});
  b.version = 2;
  EXPECT_EQ(Parse(b.Build())->version(), 2u);
}

TEST(GgufTest, TruncatedAnywhereIsAnErrorNotACrash) {
  std::string bytes = Valid().Build();
  for (size_t n = 0; n < bytes.size(); ++n) {
    try {
      Parse(bytes.substr(0, n));
      ADD_FAILURE() << "a file truncated to " << n << " bytes parsed";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidFormat) << e.what();
      EXPECT_NE(std::string(e.what()).find("m.gguf"), std::string::npos) << e.what();
    }
  }
}

TEST(GgufTest, TruncatedMessagesNameTheOffset) {
  std::string bytes = Valid().Build();
  ExpectError(bytes.substr(0, 20), ErrorCode::kInvalidFormat, {"at byte 16", "truncated", "metadata key/value count"});
  // Cut inside the data of the last tensor.
  ExpectError(bytes.substr(0, bytes.size() - 1), ErrorCode::kInvalidFormat,
              {"tensor 'w.bf16'", "past the end of the file"});
}

TEST(GgufTest, TensorPointingPastTheEnd) {
  Builder b;
  b.Tensor("a", {8}, 0, 32).Tensor("far", {8}, 0, 32, 1 << 20);
  std::string bytes = b.Build();
  bytes.resize(bytes.size() - (1 << 20));  // keep only "a"'s data
  ExpectError(bytes, ErrorCode::kInvalidFormat, {"m.gguf", "tensor 'far'", "past the end"});
  // A huge offset must not overflow the bounds check.
  std::string s = "GGUF" + Builder::U32(3) + Builder::U64(1) + Builder::U64(0) + Builder::Str("huge") +
                  Builder::U32(1) + Builder::U64(8) + Builder::U32(0) + Builder::U64(~uint64_t{31});
  s.resize(64, '\0');
  ExpectError(s, ErrorCode::kInvalidFormat, {"tensor 'huge'", "past the end"});
}

TEST(GgufTest, OverlappingTensors) {
  Builder b;
  b.Tensor("a", {16}, 0, 64).Tensor("b", {8}, 0, 32, 32);
  ExpectError(b.Build(), ErrorCode::kInvalidFormat, {"m.gguf", "'a'", "'b'", "overlap"});
}

TEST(GgufTest, MisalignedTensor) {
  Builder b;
  b.Tensor("a", {4}, 0, 16, 8);
  ExpectError(b.Build(), ErrorCode::kInvalidFormat, {"tensor 'a'", "not a multiple of the alignment 32"});
}

TEST(GgufTest, CustomAlignment) {
  Builder b;
  b.alignment = 64;
  b.KvU32("general.alignment", 64).Tensor("a", {4}, 0, 16).Tensor("b", {4}, 0, 16);
  auto f = Parse(b.Build());
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  EXPECT_EQ(f->FindTensor("b")->offset, f->data_offset() + 64);
  Builder c;
  c.KvU32("general.alignment", 48);
  ExpectError(c.Build(), ErrorCode::kInvalidFormat, {"general.alignment", "48", "power of two"});
  Builder d;
  d.KvString("general.alignment", "32");
  ExpectError(d.Build(), ErrorCode::kInvalidFormat, {"general.alignment", "string"});
}

TEST(GgufTest, UnknownTensorType) {
  Builder b;
  b.Tensor("t", {32}, 4, 18);  // 4 was Q4_2, removed from ggml
  ExpectError(b.Build(), ErrorCode::kInvalidFormat, {"tensor 't'", "unknown ggml type id 4"});
  Builder c;
  c.Tensor("t", {32}, 1000, 18);
  ExpectError(c.Build(), ErrorCode::kInvalidFormat, {"tensor 't'", "unknown ggml type id 1000"});
}

TEST(GgufTest, UnsupportedTypeParsesButViewIsRefused) {
  Builder b;
  b.Tensor("t", {256, 2}, 16, 2 * 66);  // IQ2_XXS
  auto f = Parse(b.Build());
  const GgufTensorInfo* t = f->FindTensor("t");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type_name, "IQ2_XXS");
  EXPECT_EQ(t->dtype, std::nullopt);
  EXPECT_EQ(t->size_bytes, 132u);
  try {
    f->View(*t);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("tensor 't'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("IQ2_XXS"), std::string::npos) << e.what();
  }
}

TEST(GgufTest, RowNotAMultipleOfTheBlock) {
  Builder b;
  b.Tensor("t", {100, 2}, 12, 144);  // Q4_K needs rows of 256
  ExpectError(b.Build(), ErrorCode::kInvalidFormat, {"tensor 't'", "row length 100", "Q4_K", "256"});
}

TEST(GgufTest, TooManyDimensions) {
  Builder b;
  b.Tensor("t", {1, 1, 1, 1, 1}, 0, 4);
  ExpectError(b.Build(), ErrorCode::kInvalidFormat, {"tensor 't'", "5 dimensions"});
}

TEST(GgufTest, DuplicateTensorName) {
  Builder b;
  b.Tensor("t", {4}, 0, 16).Tensor("t", {4}, 0, 16);
  ExpectError(b.Build(), ErrorCode::kInvalidFormat, {"tensor 't'", "duplicate"});
}

TEST(GgufTest, BadStringLength) {
  Builder b;
  b.Kv("general.name", 8, Builder::U64(1ull << 40) + "tiny");
  ExpectError(b.Build(), ErrorCode::kInvalidFormat, {"m.gguf", "string length 1099511627776", "at byte 48"});
  // A key whose length runs past the end.
  std::string bytes = "GGUF" + Builder::U32(3) + Builder::U64(0) + Builder::U64(1) + Builder::U64(~0ull);
  bytes += std::string(16, 'k');
  ExpectError(bytes, ErrorCode::kInvalidFormat, {"metadata key #0", "string length"});
}

TEST(GgufTest, DuplicateKey) {
  Builder b;
  b.KvU32("a.b", 1).KvU32("a.b", 2);
  ExpectError(b.Build(), ErrorCode::kInvalidFormat, {"duplicate metadata key 'a.b'", "at byte 43"});
}

TEST(GgufTest, UnknownValueType) {
  Builder b;
  b.Kv("k", 13, Builder::U32(0));
  ExpectError(b.Build(), ErrorCode::kInvalidFormat, {"key 'k'", "unknown value type 13"});
  Builder c;
  c.Kv("arr", 9, Builder::U32(77) + Builder::U64(0));
  ExpectError(c.Build(), ErrorCode::kInvalidFormat, {"key 'arr'", "unknown array element type 77"});
}

TEST(GgufTest, HugeCountsAreRefusedBeforeAllocating) {
  std::string bytes = "GGUF" + Builder::U32(3) + Builder::U64(0) + Builder::U64(~0ull >> 1);
  ExpectError(bytes, ErrorCode::kInvalidFormat, {"metadata count"});
  bytes = "GGUF" + Builder::U32(3) + Builder::U64(~0ull >> 1) + Builder::U64(0);
  ExpectError(bytes, ErrorCode::kInvalidFormat, {"tensor count"});
  Builder b;
  b.Kv("arr", 9, Builder::U32(10) + Builder::U64(1ull << 60));
  ExpectError(b.Build(), ErrorCode::kInvalidFormat, {"key 'arr'", "array of 1152921504606846976"});
}

TEST(GgufTest, BadBool) {
  Builder b;
  b.Kv("flag", 7, std::string(1, '\x02'));
  ExpectError(b.Build(), ErrorCode::kInvalidFormat, {"bool value 2"});
}

TEST(GgufTest, OpenMapsAFileAndReportsMissingOnes) {
  std::string path = ::testing::TempDir() + "/gguf_test_open.gguf";
  {
    std::ofstream out(path, std::ios::binary);
    std::string bytes = Valid().Build();
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  auto f = GgufFile::Open(path);
  EXPECT_EQ(f->path(), path);
  EXPECT_EQ(f->tensors().size(), 3u);
  std::filesystem::remove(path);
  try {
    GgufFile::Open(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound) << e.what();
  }
}

TEST(GgufTest, TypeNames) {
  EXPECT_EQ(GgmlTypeName(12), "Q4_K");
  EXPECT_EQ(GgmlTypeName(30), "BF16");
  EXPECT_EQ(GgmlTypeName(29), "IQ1_M");
  EXPECT_EQ(GgmlTypeName(5), "type 5");
  EXPECT_EQ(GgmlTypeToDType(23), DType::kIQ4_XS);
  EXPECT_EQ(GgmlTypeToDType(16), std::nullopt);
  EXPECT_EQ(GgufTypeName(GgufType::kArray), "array");
}

}  // namespace
}  // namespace infernix
