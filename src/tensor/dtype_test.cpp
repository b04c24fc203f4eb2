#include "tensor/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tensor/tensor.h"

namespace infernix {
namespace {

TEST(DType, Bf16RoundTripAndRounding) {
  EXPECT_EQ(Bf16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(Bf16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even -> 1.0
  EXPECT_EQ(F32ToBf16(1.0f + 1.0f / 256), 0x3f80);
  EXPECT_EQ(F32ToBf16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, F16Conversions) {
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(F16ToF32(0x7c00)));
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive half round-trips exactly
    ASSERT_EQ(F32ToF16(F16ToF32(static_cast<uint16_t>(h))), h) << h;
  }
  EXPECT_EQ(F32ToF16(1e6f), 0x7c00);
}

TEST(DType, F8E4M3) {
  EXPECT_EQ(F8E4M3ToF32(0x00), 0.0f);
  EXPECT_EQ(F8E4M3ToF32(0x38), 1.0f);        // exponent 7 = bias
  EXPECT_EQ(F8E4M3ToF32(0xc0), -2.0f);
  EXPECT_EQ(F8E4M3ToF32(0x7e), 448.0f);      // largest finite
  EXPECT_EQ(F8E4M3ToF32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(F8E4M3ToF32(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(F8E4M3ToF32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_TRUE(std::isnan(F8E4M3ToF32(0x7f)));
  EXPECT_TRUE(std::isnan(F8E4M3ToF32(0xff)));
}

TEST(DType, BlockFormats) {
  EXPECT_EQ(RowBytes(DType::kBF16, 10), 20u);
  EXPECT_EQ(RowBytes(DType::kQ8_0, 64), 68u);
  EXPECT_EQ(RowBytes(DType::kQ4_K, 512), 288u);
  EXPECT_EQ(RowBytes(DType::kIQ4_XS, 256), 136u);
  EXPECT_DEATH(RowBytes(DType::kQ6_K, 100), "blocks of 256");  // not a whole block: an internal check
  HostBuffer q(DType::kQ4_0, Shape{3, 64});
  EXPECT_EQ(q.size_bytes(), 3u * 2 * 18);
  EXPECT_EQ(q.view().size_bytes(), 3u * 2 * 18);
  Tensor row = q.view().SliceRows(1, 2);
  EXPECT_EQ(static_cast<char*>(row.data) - static_cast<char*>(q.view().data), 36);
  EXPECT_TRUE(IsBlockQuantized(DType::kQ4_0));
  EXPECT_FALSE(IsBlockQuantized(DType::kF8E4M3));
}

TEST(Tensor, ShapesAndSlices) {
  HostBuffer buf(DType::kF32, Shape{4, 3});
  Tensor t = buf.view();
  for (int i = 0; i < 12; ++i) t.as<float>()[i] = static_cast<float>(i);
  EXPECT_EQ(t.numel(), 12);
  EXPECT_EQ(t.rows(), 4);
  EXPECT_EQ(t.cols(), 3);
  Tensor s = t.SliceRows(1, 2);
  EXPECT_EQ(s.as<float>()[0], 3.0f);
  EXPECT_EQ(s.shape, (Shape{2, 3}));
  EXPECT_EQ(t.Reshaped(Shape{2, 6}).Describe(), "f32[2, 6]");
}

}  // namespace
}  // namespace infernix
