// kF8E4M3B128 (an FP8 checkpoint's weight with its block scales inline): layout, decoding, random blocks.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/quant.h"
#include "quant/random_blocks.h"

namespace infernix {
namespace {

TEST(F8E4M3B128, TypeProperties) {
  EXPECT_EQ(DTypeBlockSize(DType::kF8E4M3B128), 128);
  EXPECT_EQ(DTypeBlockBytes(DType::kF8E4M3B128), 132u);
  EXPECT_EQ(DTypeName(DType::kF8E4M3B128), "f8_e4m3_b128");
  EXPECT_TRUE(IsBlockQuantized(DType::kF8E4M3B128));
  EXPECT_FALSE(IsBlockQuantized(DType::kF8E4M3));
  EXPECT_EQ(RowBytes(DType::kF8E4M3B128, 384), 3u * 132u);
  // The existing types keep their values (the CUDA code depends on them).
  EXPECT_EQ(static_cast<int>(DType::kIQ4_XS), 17);
  EXPECT_EQ(static_cast<int>(DType::kF8E4M3B128), 18);
}

// Two blocks built by hand: each element equals scale * E4M3(byte), computed here from the scalar
// conversion in tensor/dtype.h, bit for bit; the scale of block 1 applies to elements 128..255 only.
TEST(F8E4M3B128, ElementIsBlockScaleTimesE4M3) {
  const float scales[2] = {0.0123f, -3.5e-4f};
  std::vector<uint8_t> row(2 * 132);
  uint32_t s = 12345;
  for (int b = 0; b < 2; ++b) {
    std::memcpy(&row[static_cast<size_t>(b) * 132], &scales[b], 4);
    for (int j = 0; j < 128; ++j) {
      s = s * 1664525u + 1013904223u;
      uint8_t q = static_cast<uint8_t>(s >> 24);
      if ((q & 0x7f) == 0x7f) q = 0x7e;  // keep NaN out of the comparison
      row[static_cast<size_t>(b) * 132 + 4 + static_cast<size_t>(j)] = q;
    }
  }
  // A few exact values: 0x38 = 1.0, 0xC4 = -3.0, 0x7E = 448, 0x01 = 2^-9.
  row[4] = 0x38;
  row[5] = 0xC4;
  row[6] = 0x7E;
  row[7] = 0x01;
  std::vector<float> out(256, NAN);
  DequantizeRow(DType::kF8E4M3B128, row.data(), out.data(), 256);
  EXPECT_EQ(out[0], scales[0]);
  EXPECT_EQ(out[1], -3.0f * scales[0]);
  EXPECT_EQ(out[2], 448.0f * scales[0]);
  EXPECT_EQ(out[3], scales[0] * 0.001953125f);
  for (int e = 0; e < 256; ++e) {
    int b = e / 128;
    float want = scales[b] * F8E4M3ToF32(row[static_cast<size_t>(b) * 132 + 4 + static_cast<size_t>(e % 128)]);
    ASSERT_EQ(std::bit_cast<uint32_t>(out[static_cast<size_t>(e)]), std::bit_cast<uint32_t>(want)) << "element " << e;
  }
}

TEST(F8E4M3B128, PackedDataAtAnOddAddressDecodesTheSame) {
  HostBuffer blocks = RandomQuantBlocks(DType::kF8E4M3B128, 1, 256, 7, 1.0f);
  std::vector<float> aligned(256), odd(256);
  DequantizeRow(DType::kF8E4M3B128, blocks.view().data, aligned.data(), 256);
  std::vector<uint8_t> shifted(blocks.size_bytes() + 1);
  std::memcpy(shifted.data() + 1, blocks.view().data, blocks.size_bytes());
  DequantizeRow(DType::kF8E4M3B128, shifted.data() + 1, odd.data(), 256);
  for (size_t i = 0; i < 256; ++i) ASSERT_EQ(std::bit_cast<uint32_t>(odd[i]), std::bit_cast<uint32_t>(aligned[i]));
}

// Random blocks are finite, within scale of the requested magnitude, and not all zero.
TEST(F8E4M3B128, RandomBlocksAreFiniteAndBounded) {
  HostBuffer blocks = RandomQuantBlocks(DType::kF8E4M3B128, 4, 384, 3, 0.5f);
  std::vector<float> out(4 * 384);
  DequantizeRow(DType::kF8E4M3B128, blocks.view().data, out.data(), 4 * 384);
  int nonzero = 0;
  for (float v : out) {
    ASSERT_TRUE(std::isfinite(v));
    ASSERT_LE(std::fabs(v), 0.5f);
    nonzero += v != 0.0f;
  }
  EXPECT_GT(nonzero, 4 * 384 / 2);
}

TEST(F8E4M3B128DeathTest, PartialBlockIsAnInternalCheck) {
  std::vector<uint8_t> bytes(132, 0);
  std::vector<float> out(128);
  EXPECT_DEATH(DequantizeRow(DType::kF8E4M3B128, bytes.data(), out.data(), 64), "blocks of 128");
}

}  // namespace
}  // namespace infernix
