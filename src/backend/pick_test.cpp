#include "backend/pick.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace infernix {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(PickGreedyRows, LowestIndexOfTheLargestAmongTheSampleableIds) {
  // Row 0: a tie (the lower index wins); row 1: the largest value lies in the padding and is ignored;
  // row 2: the last sampleable id; row 3: a NaN in the padding is ignored too.
  const int64_t cols = 6, sampleable = 4;
  const std::vector<float> logits = {1,     3,  3,  0,     -1,
                                     -1,  //
                                     2,     1,  0,  -5,    9,
                                     9,  //
                                     0,     0,  0,  0.5f,  -1,
                                     0,  //
                                     -kInf, -2, -3, -kInf, std::nanf(""),
                                     kInf};
  EXPECT_EQ(PickGreedyRows(logits, 4, cols, sampleable), (std::vector<int32_t>{1, 0, 3, 1}));
}

TEST(PickGreedyRows, RowsWithoutATrustworthyPickAreMinusOne) {
  // NaN or +inf among the sampleable ids, or only -inf there: the caller samples those rows itself.
  const int64_t cols = 3;
  const std::vector<float> logits = {0,     std::nanf(""),
                                     5,  //
                                     kInf,  0,
                                     0,  //
                                     -kInf, -kInf,
                                     -kInf,  //
                                     -kInf, -kInf,
                                     7};
  EXPECT_EQ(PickGreedyRows(logits, 4, cols, cols), (std::vector<int32_t>{-1, -1, -1, 2}));
  EXPECT_TRUE(PickGreedyRows({}, 0, cols, cols).empty());
}

}  // namespace
}  // namespace infernix
