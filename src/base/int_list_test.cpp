#include "base/int_list.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace infernix {
namespace {

std::string ErrorOf(std::string_view text, int64_t max_value = 100) {
  try {
    ParseIntList(text, "--batch", 1, "a batch size from 1 to 100", "1,8", max_value);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(ParseIntList, Items) {
  EXPECT_EQ(ParseIntList("1,2,4,8", "--batch", 1, "", ""), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(ParseIntList("0,131072", "--depth", 0, "", ""), (std::vector<int64_t>{0, 131072}));
  EXPECT_EQ(ParseIntList("7,", "--batch", 1, "", ""), (std::vector<int64_t>{7}));  // a trailing comma ends it
}

TEST(ParseIntList, Errors) {
  EXPECT_EQ(ErrorOf("1,0"), "--batch: '0' is not a batch size from 1 to 100");
  EXPECT_EQ(ErrorOf("101"), "--batch: '101' is not a batch size from 1 to 100");
  EXPECT_EQ(ErrorOf("1,,2"), "--batch: '' is not a batch size from 1 to 100");
  EXPECT_EQ(ErrorOf("1,x"), "--batch: 'x' is not a batch size from 1 to 100");
  EXPECT_EQ(ErrorOf("2x"), "--batch: '2x' is not a batch size from 1 to 100");
  EXPECT_EQ(ErrorOf("99999999999999999999"), "--batch: '99999999999999999999' is not a batch size from 1 to 100");
  EXPECT_EQ(ErrorOf(""), "--batch: expected a list such as 1,8");
}

}  // namespace
}  // namespace infernix
