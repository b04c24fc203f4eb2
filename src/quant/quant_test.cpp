// The block decoders against llama.cpp's own dequantization (tests/fixtures/quant, made by
// scripts/make_quant_fixture.py from ../shared/reference/gguf), and, for the types no oracle file
// covers, against values computed here from the format definitions element by element.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "quant/quant.h"

namespace infernix {
namespace {

// ---- the oracle fixture ----

struct OracleEntry {
  std::string name;  // <model>/<file tag>/<tensor>/<type>
  DType type;
  int64_t rows = 0, cols = 0;
  std::string packed;          // rows * RowBytes(type, cols) bytes
  std::vector<float> expected; // rows * cols
};

DType TypeFromName(const std::string& name) {
  if (std::optional<DType> t = DTypeFromName(name)) return *t;
  ADD_FAILURE() << "unknown type " << name;
  return DType::kF32;
}

std::vector<OracleEntry> LoadOracle() {
  std::string path = std::string(INFERNIX_FIXTURES_DIR) + "/quant/quant-rows.safetensors";
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string file = ss.str();
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  auto header = nlohmann::json::parse(file.substr(8, n));
  const char* data = file.data() + 8 + n;
  auto bytes = [&](const std::string& key) {
    auto off = header.at(key).at("data_offsets");
    return std::string(data + off[0].get<size_t>(), data + off[1].get<size_t>());
  };
  std::vector<OracleEntry> out;
  for (const auto& e : nlohmann::json::parse(header.at("__metadata__").at("entries").get<std::string>())) {
    OracleEntry o;
    o.name = e.at("name");
    o.type = TypeFromName(e.at("type"));
    o.cols = e.at("cols");
    o.rows = header.at(o.name + "/expected").at("shape")[0];
    o.packed = bytes(o.name + "/packed");
    std::string f = bytes(o.name + "/expected");
    o.expected.resize(f.size() / 4);
    std::memcpy(o.expected.data(), f.data(), f.size());
    EXPECT_EQ(o.packed.size(), static_cast<size_t>(o.rows) * RowBytes(o.type, o.cols)) << o.name;
    EXPECT_EQ(o.expected.size(), static_cast<size_t>(o.rows * o.cols)) << o.name;
    out.push_back(std::move(o));
  }
  return out;
}

// Distance in units in the last place between two finite floats (0: identical bits, or +0 vs -0).
int64_t UlpDistance(float a, float b) {
  auto key = [](float f) {
    int32_t i = std::bit_cast<int32_t>(f);
    return i < 0 ? static_cast<int64_t>(INT32_MIN) - i : static_cast<int64_t>(i);
  };
  return std::llabs(key(a) - key(b));
}

TEST(QuantOracle, EveryEntryDecodesToWithinOneUlpOfLlamaCpp) {
  std::vector<OracleEntry> oracle = LoadOracle();
  // 24 entries over Q4_0, Q8_0, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS (docs/quant.md).
  ASSERT_EQ(oracle.size(), 24u);
  std::map<DType, int> per_type;
  int64_t total = 0, exact = 0;
  for (const OracleEntry& o : oracle) {
    ++per_type[o.type];
    size_t row_bytes = RowBytes(o.type, o.cols);
    std::vector<float> got(static_cast<size_t>(o.cols));
    int64_t entry_exact = 0, worst = 0;
    for (int64_t r = 0; r < o.rows; ++r) {
      DequantizeRow(o.type, o.packed.data() + static_cast<size_t>(r) * row_bytes, got.data(), o.cols);
      for (int64_t c = 0; c < o.cols; ++c) {
        float want = o.expected[static_cast<size_t>(r * o.cols + c)];
        float g = got[static_cast<size_t>(c)];
        ASSERT_TRUE(std::isfinite(want)) << o.name;
        int64_t ulp = UlpDistance(g, want);
        worst = std::max(worst, ulp);
        if (std::bit_cast<uint32_t>(g) == std::bit_cast<uint32_t>(want)) ++entry_exact;
        EXPECT_LE(ulp, 1) << o.name << " row " << r << " col " << c << ": got " << g << " want " << want;
      }
    }
    total += o.rows * o.cols;
    exact += entry_exact;
    std::printf("  %-55s %-7s %lld/%lld bit-exact, worst %lld ulp\n", o.name.c_str(),
                std::string(DTypeName(o.type)).c_str(), static_cast<long long>(entry_exact),
                static_cast<long long>(o.rows * o.cols), static_cast<long long>(worst));
  }
  std::printf("  oracle: %lld of %lld values bit-exact\n", static_cast<long long>(exact),
              static_cast<long long>(total));
  for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,
                  DType::kIQ4_XS})
    EXPECT_GT(per_type[t], 0) << DTypeName(t) << " lost its oracle coverage";
}

// The oracle rows are not all zero or constant (a decoder writing nothing would be caught).
TEST(QuantOracle, ExpectedRowsVary) {
  for (const OracleEntry& o : LoadOracle()) {
    float lo = o.expected[0], hi = o.expected[0];
    for (float v : o.expected) lo = std::min(lo, v), hi = std::max(hi, v);
    EXPECT_LT(lo, 0.0f) << o.name;
    EXPECT_GT(hi, 0.0f) << o.name;
  }
}

// ---- hand-built blocks for the types without an oracle entry ----
// Each test fills blocks with pseudo-random bytes and a chosen f16 scale, then computes every element
// from the format definition, indexing by element (not by the decoder's loop structure).

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> out(n);
  uint32_t s = seed * 2654435761u + 1u;
  for (auto& b : out) {
    s = s * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(s >> 24);
  }
  return out;
}

void PutHalf(std::vector<uint8_t>& bytes, size_t offset, float value) {
  uint16_t h = F32ToF16(value);
  std::memcpy(bytes.data() + offset, &h, 2);
}

float Half(const std::vector<uint8_t>& bytes, size_t offset) {
  uint16_t h;
  std::memcpy(&h, bytes.data() + offset, 2);
  return F16ToF32(h);
}

// Nibble of element e (0..31) of a 32-element block with 16 bytes of nibbles at `qs`: elements 0..15 in
// the low nibbles, 16..31 in the high ones.
int Nibble(const uint8_t* qs, int e) { return e < 16 ? (qs[e] & 0xF) : (qs[e - 16] >> 4); }

std::vector<float> Decode(DType type, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n), NAN);
  DequantizeRow(type, bytes.data(), out.data(), n);
  return out;
}

void ExpectBitEqual(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
        << "element " << i << ": got " << got[i] << " want " << want[i];
}

constexpr int kBlocks = 3;

TEST(QuantHandBuilt, Q4_1IsScaleTimesNibblePlusMin) {
  auto bytes = RandomBytes(20 * kBlocks, 1);
  std::vector<float> want;
  for (int b = 0; b < kBlocks; ++b) {
    size_t base = 20u * b;
    PutHalf(bytes, base, 0.0371f * static_cast<float>(b + 1));
    PutHalf(bytes, base + 2, -0.25f + 0.125f * static_cast<float>(b));
    float d = Half(bytes, base), m = Half(bytes, base + 2);
    for (int e = 0; e < 32; ++e) want.push_back(static_cast<float>(Nibble(&bytes[base + 4], e)) * d + m);
  }
  ExpectBitEqual(Decode(DType::kQ4_1, bytes, 32 * kBlocks), want);
}

// Bit e of the little-endian 32-bit word at `qh`.
int Bit(const uint8_t* qh, int e) { return (qh[e / 8] >> (e % 8)) & 1; }

TEST(QuantHandBuilt, Q5_0IsScaleTimesFiveBitsMinus16) {
  auto bytes = RandomBytes(22 * kBlocks, 2);
  std::vector<float> want;
  for (int b = 0; b < kBlocks; ++b) {
    size_t base = 22u * b;
    PutHalf(bytes, base, b == 1 ? -0.0123f : 0.0456f);
    float d = Half(bytes, base);
    for (int e = 0; e < 32; ++e) {
      int q = Nibble(&bytes[base + 6], e) + 16 * Bit(&bytes[base + 2], e);
      want.push_back(static_cast<float>(q - 16) * d);
    }
  }
  ExpectBitEqual(Decode(DType::kQ5_0, bytes, 32 * kBlocks), want);
}

TEST(QuantHandBuilt, Q5_1IsScaleTimesFiveBitsPlusMin) {
  auto bytes = RandomBytes(24 * kBlocks, 3);
  std::vector<float> want;
  for (int b = 0; b < kBlocks; ++b) {
    size_t base = 24u * b;
    PutHalf(bytes, base, 0.0219f);
    PutHalf(bytes, base + 2, -0.3f * static_cast<float>(b));
    float d = Half(bytes, base), m = Half(bytes, base + 2);
    for (int e = 0; e < 32; ++e) {
      int q = Nibble(&bytes[base + 8], e) + 16 * Bit(&bytes[base + 4], e);
      want.push_back(static_cast<float>(q) * d + m);
    }
  }
  ExpectBitEqual(Decode(DType::kQ5_1, bytes, 32 * kBlocks), want);
}

TEST(QuantHandBuilt, IQ4_NLLooksUpTheNonLinearTable) {
  // The table as the format defines it (ggml's kvalues_iq4nl).
  const int table[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  auto bytes = RandomBytes(18 * kBlocks, 4);
  std::vector<float> want;
  for (int b = 0; b < kBlocks; ++b) {
    size_t base = 18u * b;
    PutHalf(bytes, base, 0.0078f * static_cast<float>(b + 1));
    float d = Half(bytes, base);
    for (int e = 0; e < 32; ++e) want.push_back(d * static_cast<float>(table[Nibble(&bytes[base + 2], e)]));
  }
  ExpectBitEqual(Decode(DType::kIQ4_NL, bytes, 32 * kBlocks), want);
}

TEST(QuantHandBuilt, Q2_KIsSubBlockScaleTimesTwoBitsMinusSubBlockMin) {
  auto bytes = RandomBytes(84 * kBlocks, 5);
  std::vector<float> want;
  for (int b = 0; b < kBlocks; ++b) {
    size_t base = 84u * b;  // scales[16], qs[64], d, dmin
    PutHalf(bytes, base + 80, 0.0131f * static_cast<float>(b + 1));
    PutHalf(bytes, base + 82, 0.0057f);
    float d = Half(bytes, base + 80), dmin = Half(bytes, base + 82);
    for (int e = 0; e < 256; ++e) {
      int half = e / 128, shift = 2 * ((e % 128) / 32), l = e % 32;
      int q = (bytes[base + 16 + 32 * half + l] >> shift) & 3;
      uint8_t sc = bytes[base + e / 16];
      want.push_back((d * static_cast<float>(sc & 0xF)) * static_cast<float>(q) - dmin * static_cast<float>(sc >> 4));
    }
  }
  ExpectBitEqual(Decode(DType::kQ2_K, bytes, 256 * kBlocks), want);
}

// Covered by the oracle too; this pins the 6-bit scale packing with every scale distinct.
TEST(QuantHandBuilt, Q3_KScalesAndHighBits) {
  auto bytes = RandomBytes(110, 6);  // hmask[32], qs[64], scales[12], d
  PutHalf(bytes, 108, 0.0093f);
  float d = Half(bytes, 108);
  std::vector<float> want;
  for (int e = 0; e < 256; ++e) {
    int half = e / 128, j = (e % 128) / 32, l = e % 32, s = e / 16;
    int low = (bytes[32 + 32 * half + l] >> (2 * j)) & 3;  // qs[32 * half + l]
    int high = (bytes[l] >> (4 * half + j)) & 1;
    // Scale s: 4 low bits from the first 8 bytes (nibble s / 8 of byte s % 8), 2 high bits from the last 4.
    int sc_low = (bytes[96 + s % 8] >> (4 * (s / 8))) & 0xF;
    int sc_high = (bytes[96 + 8 + s % 4] >> (2 * (s / 4))) & 3;
    int scale = (sc_low | (sc_high << 4)) - 32;
    want.push_back((d * static_cast<float>(scale)) * static_cast<float>(low - (high ? 0 : 4)));
  }
  ExpectBitEqual(Decode(DType::kQ3_K, bytes, 256), want);
}

// ---- plain types and contracts ----

TEST(QuantPlain, ElementTypesWidenExactly) {
  std::vector<float> values = {0.0f, -1.5f, 3.25f, 65504.0f, -0x1p-14f, 448.0f};
  std::vector<uint8_t> f32(values.size() * 4), f16(values.size() * 2), bf16(values.size() * 2);
  std::memcpy(f32.data(), values.data(), f32.size());
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t h = F32ToF16(values[i]), b = F32ToBf16(values[i]);
    std::memcpy(&f16[2 * i], &h, 2);
    std::memcpy(&bf16[2 * i], &b, 2);
  }
  int64_t n = static_cast<int64_t>(values.size());
  ExpectBitEqual(Decode(DType::kF32, f32, n), values);
  ExpectBitEqual(Decode(DType::kF16, f16, n), values);
  std::vector<float> bf16_want;
  for (float v : values) bf16_want.push_back(Bf16ToF32(F32ToBf16(v)));
  ExpectBitEqual(Decode(DType::kBF16, bf16, n), bf16_want);
  // E4M3: 0x38 = 1.0, 0xC4 = -3.0 (sign, exponent 8, mantissa 4/8), 0x7E = 448, 0x01 = 2^-9.
  ExpectBitEqual(Decode(DType::kF8E4M3, {0x38, 0xC4, 0x7E, 0x01}, 4), {1.0f, -3.0f, 448.0f, 0.001953125f});
}

// Every f16 and every E4M3 value decodes to the bits of the scalar conversions in tensor/dtype.h
// (NaN payloads included).
TEST(QuantPlain, EveryHalfAndEveryE4M3ValueMatchesTheScalarConversion) {
  std::vector<uint8_t> halves(2 * 65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    uint16_t h = static_cast<uint16_t>(i);
    std::memcpy(&halves[2 * i], &h, 2);
  }
  std::vector<float> got = Decode(DType::kF16, halves, 65536);
  for (uint32_t i = 0; i < 65536; ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(F16ToF32(static_cast<uint16_t>(i))))
        << "half 0x" << std::hex << i;
  std::vector<uint8_t> bytes(256);
  for (int i = 0; i < 256; ++i) bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  got = Decode(DType::kF8E4M3, bytes, 256);
  for (int i = 0; i < 256; ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(got[static_cast<size_t>(i)]),
              std::bit_cast<uint32_t>(F8E4M3ToF32(static_cast<uint8_t>(i))))
        << "e4m3 0x" << std::hex << i;
}

TEST(QuantPlain, PackedDataAtAnOddAddressDecodesTheSame) {
  auto bytes = RandomBytes(210 * 2 + 1, 7);
  PutHalf(bytes, 208, 0.01f);
  PutHalf(bytes, 418, -0.02f);
  std::vector<float> aligned = Decode(DType::kQ6_K, bytes, 512);
  std::vector<uint8_t> shifted(bytes.size() + 1);
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  std::vector<float> odd(512, NAN);
  DequantizeRow(DType::kQ6_K, shifted.data() + 1, odd.data(), 512);
  ExpectBitEqual(odd, aligned);
}

TEST(QuantPlainDeathTest, PartialBlockIsAnInternalCheck) {
  std::vector<uint8_t> bytes(34, 0);
  std::vector<float> out(32);
  EXPECT_DEATH(DequantizeRow(DType::kQ8_0, bytes.data(), out.data(), 16), "blocks of 32");
  EXPECT_DEATH(DequantizeRow(DType::kI32, bytes.data(), out.data(), 1), "not a float or block type");
}

}  // namespace
}  // namespace infernix
