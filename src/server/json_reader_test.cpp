// ParseOrderedJson against nlohmann's own ordered_json parser: the same values, member order and
// duplicate-key rule, the same errors; and objects far larger than the parser's key index threshold.
#include "server/json_reader.h"

#include <gtest/gtest.h>

#include <iterator>
#include <random>
#include <string>

namespace infernix {
namespace {

// Both parsers; the trees must be equal and print the same (member order included).
void ExpectSameAsNlohmann(const std::string& text) {
  const Json ours = ParseOrderedJson(text);
  const Json theirs = Json::parse(text);
  EXPECT_EQ(ours, theirs) << text.substr(0, 200);
  EXPECT_EQ(ours.dump(), theirs.dump()) << text.substr(0, 200);
}

TEST(ParseOrderedJson, SameTreesAsNlohmann) {
  for (const char* text : {
           R"({})", R"([])", R"(null)", R"(true)", R"("s")", R"(-0.5e-3)", R"(18446744073709551615)",
           R"(-9223372036854775808)", R"({"b": 1, "a": [1, 2.5, "x", null, false, {"z": {}, "y": []}], "c": {"d": "é\u00e9"}})",
           R"([[[[{"k": [[]]}]]], {"k2": 3}])", R"({"emoji": "\ud83d\ude00", "esc": "a\"b\\c\n"})",
       })
    ExpectSameAsNlohmann(text);
}

// A repeated key keeps its first position and takes the last value, below and above the size from
// which the parser indexes an object's keys.
TEST(ParseOrderedJson, RepeatedKeysAsNlohmann) {
  ExpectSameAsNlohmann(R"({"a": 1, "b": 2, "a": 3})");
  ExpectSameAsNlohmann(R"({"a": {"x": 1}, "a": [1], "b": 0, "a": "last"})");
  std::string big = "{";
  for (int i = 0; i < 100; ++i) big += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ", ";
  big += R"("k3": "again", "k99": {"nested": true}, "k50": null, "new": 1, "k3": "third"})";
  ExpectSameAsNlohmann(big);
  const Json j = ParseOrderedJson(big);
  EXPECT_EQ(j.size(), 101u);
  EXPECT_EQ(j["k3"], "third");
  EXPECT_EQ(j.begin().key(), "k0");
  EXPECT_EQ(std::next(j.begin(), 3).key(), "k3");
}

// Random documents: objects of 0 to 40 members (keys drawn from a small set, so repeats are common),
// arrays, scalars, up to 6 levels.
std::string RandomDocument(std::mt19937& rng, int depth) {
  const int kind = depth >= 6 ? 2 + static_cast<int>(rng() % 4) : static_cast<int>(rng() % 6);
  switch (kind) {
    case 0: {
      std::string s = "{";
      const int n = static_cast<int>(rng() % 41);
      for (int i = 0; i < n; ++i) {
        if (i > 0) s += ",";
        s += "\"key" + std::to_string(rng() % 30) + "\":" + RandomDocument(rng, depth + 1);
      }
      return s + "}";
    }
    case 1: {
      std::string s = "[";
      const int n = static_cast<int>(rng() % 8);
      for (int i = 0; i < n; ++i) s += (i > 0 ? "," : "") + RandomDocument(rng, depth + 1);
      return s + "]";
    }
    case 2: return std::to_string(static_cast<int64_t>(rng()) - (int64_t{1} << 31));
    case 3: return std::to_string(static_cast<double>(rng() % 100000) / 7.0);
    case 4: return "\"v" + std::to_string(rng() % 1000) + "\"";
    default: return rng() % 2 ? "true" : "null";
  }
}

TEST(ParseOrderedJson, RandomDocumentsAsNlohmann) {
  std::mt19937 rng(20261130);
  for (int i = 0; i < 300; ++i) ExpectSameAsNlohmann(RandomDocument(rng, 0));
}

TEST(ParseOrderedJson, ErrorsAsNlohmann) {
  for (const char* text : {R"({"a": 1,})", R"({"a" 1})", R"([1, 2)", R"({"a": tru})", "", R"({"a": 1} x)"}) {
    size_t ours = 0, theirs = 1;
    try {
      (void)ParseOrderedJson(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const nlohmann::json::parse_error& e) {
      ours = e.byte;
    }
    try {
      const Json ignored = Json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      theirs = e.byte;
    }
    EXPECT_EQ(ours, theirs) << text;
  }
  EXPECT_THROW((void)ParseOrderedJson(R"({"n": 1e999})"), nlohmann::json::out_of_range);
}

// 200,000 members in one object (nlohmann's parser compares each new key with every earlier one).
TEST(ParseOrderedJson, HugeObject) {
  std::string text = "{";
  for (int i = 0; i < 200000; ++i) text += (i > 0 ? ",\"m" : "\"m") + std::to_string(i) + "\":" + std::to_string(i);
  text += ",\"m7\":\"last\"}";
  const Json j = ParseOrderedJson(text);
  ASSERT_EQ(j.size(), 200000u);
  EXPECT_EQ(j["m199999"], 199999);
  EXPECT_EQ(j["m7"], "last");
  EXPECT_EQ(std::next(j.begin(), 7).key(), "m7");
}

}  // namespace
}  // namespace infernix
