#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "base/error.h"

namespace infernix {
namespace {

struct Outcome {
  std::string text;  // everything emitted, Flush included
  bool stopped = false;
  std::string matched;
  std::vector<std::string> emits;
};

Outcome Feed(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  StopMatcher m(stops);
  Outcome out;
  for (const std::string& piece : pieces) {
    StopMatcher::Result r = m.Push(piece);
    out.emits.push_back(r.emit);
    out.text += r.emit;
    if (r.stopped) {
      EXPECT_FALSE(out.stopped) << "reported twice";
      out.stopped = true;
      out.matched = r.matched;
    }
  }
  const std::string tail = m.Flush();
  out.emits.push_back(tail);
  out.text += tail;
  return out;
}

TEST(StopMatcher, StopsAndWithholdsTheStopString) {
  const Outcome o = Feed({"</s>"}, {"Hello </", "s> more"});
  EXPECT_EQ(o.emits, (std::vector<std::string>{"Hello ", "", ""}));
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.matched, "</s>");
  // The held-back prefix is released once it can no longer start the stop string.
  EXPECT_EQ(Feed({"</s>"}, {"a <", "/x", "y"}).emits, (std::vector<std::string>{"a ", "</x", "y", ""}));
}

TEST(StopMatcher, StopSpreadOverManyPieces) {
  std::vector<std::string> pieces;
  for (char c : std::string("prefix STOPWORD suffix")) pieces.emplace_back(1, c);
  const Outcome o = Feed({"STOPWORD"}, pieces);
  EXPECT_EQ(o.text, "prefix ");
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.matched, "STOPWORD");
}

TEST(StopMatcher, FalseStartsAreReleased) {
  EXPECT_EQ(Feed({"abc"}, {"ab", "ab", "x"}).emits, (std::vector<std::string>{"", "ab", "abx", ""}));
  const Outcome o = Feed({"abc"}, {"ab", "ab", "c", "d"});
  EXPECT_EQ(o.text, "ab");
  EXPECT_TRUE(o.stopped);
  // Flush at the end releases a pending prefix.
  EXPECT_EQ(Feed({"abc"}, {"xyz a", "b"}).emits, (std::vector<std::string>{"xyz ", "", "ab"}));
}

TEST(StopMatcher, OverlappingStopsCutAtTheEarliestMatch) {
  for (const auto& pieces : std::vector<std::vector<std::string>>{{"xab"}, {"xa", "b"}, {"x", "a", "b"}}) {
    const Outcome o = Feed({"b", "ab"}, pieces);
    EXPECT_EQ(o.text, "x");
    EXPECT_EQ(o.matched, "ab");
  }
  // The first stop to complete wins: "bc" ends before "abcd" could.
  const Outcome o = Feed({"abcd", "bc"}, {"xabcd"});
  EXPECT_EQ(o.text, "xa");
  EXPECT_EQ(o.matched, "bc");
}

TEST(StopMatcher, LongSelfOverlappingStop) {
  // Linear time: a 3000-byte stop fed byte by byte, the whole stream held back until it fails.
  const std::string stop(3000, 'x');
  std::vector<std::string> pieces(2999, "x");
  pieces.push_back("y");
  Outcome o = Feed({stop}, pieces);
  EXPECT_FALSE(o.stopped);
  EXPECT_EQ(o.text, std::string(2999, 'x') + "y");
  EXPECT_EQ(o.emits[2998], "");
  pieces.back() = "xx";  // completes after one more byte; the final "x" is never seen
  o = Feed({stop}, pieces);
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.text, "");
  // KMP fallback: "aab" inside "aaab".
  EXPECT_EQ(Feed({"aab"}, {"a", "a", "a", "b", "c"}).text, "a");
  EXPECT_EQ(Feed({"abab"}, {"ab", "ab", "ab"}).text, "");
  EXPECT_EQ(Feed({"abac"}, {"ab", "ab", "ac"}).text, "ab");
}

TEST(StopMatcher, AfterAStopNothingMoreIsEmitted) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.Push("abcEN").emit, "abc");
  const StopMatcher::Result r = m.Push("Dxyz");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "");
  EXPECT_TRUE(m.stopped());
  const StopMatcher::Result later = m.Push("more text");
  EXPECT_FALSE(later.stopped);
  EXPECT_EQ(later.emit, "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcher, NoStopsPassesTextThrough) {
  EXPECT_EQ(Feed({}, {"a", "bc", "", "d"}).emits, (std::vector<std::string>{"a", "bc", "", "d", ""}));
  EXPECT_EQ(Feed({"", ""}, {"a", "bc"}).text, "abc");  // empty strings are ignored
  EXPECT_TRUE(StopMatcher({""}).empty());
}

TEST(StopMatcher, MultiByteCharacters) {
  const Outcome o = Feed({"终止"}, {"你好", "终", "止了"});
  EXPECT_EQ(o.emits, (std::vector<std::string>{"你好", "", "", ""}));
  EXPECT_EQ(o.matched, "终止");
  // A stop whose first character shares its lead byte with the text's last character.
  EXPECT_EQ(Feed({"é!"}, {"cafè", "é", "?"}).text, "cafèé?");
  // Pieces that split a character (not what decoders send) are still never split on output.
  EXPECT_EQ(Feed({}, {"a\xE4\xBD", "\xA0" "b"}).emits, (std::vector<std::string>{"a", "你b", ""}));
}

TEST(StopMatcher, ValidatesTheStops) {
  try {
    StopMatcher m(std::vector<std::string>(17, "x"));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()).rfind("stop:", 0), 0u) << e.what();
  }
  try {
    StopMatcher m({"ok", "bad\xFF"});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()).rfind("stop[1]:", 0), 0u) << e.what();
  }
  EXPECT_THROW(StopMatcher({"\xC0\xAF"}), Error);   // overlong
  EXPECT_THROW(StopMatcher({"\xED\xA0\x80"}), Error);  // surrogate
  EXPECT_NO_THROW(StopMatcher(std::vector<std::string>(16, "x")));
}

bool IsCompleteUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (len == 0 || i + len > s.size()) return false;
    i += len;
  }
  return true;
}

// The reference: the occurrence that ends first, then starts first, found by brute force.
Outcome Reference(const std::vector<std::string>& stops, const std::string& text) {
  for (size_t end = 1; end <= text.size(); ++end)
    for (size_t start = 0; start < end; ++start)
      for (const std::string& stop : stops)
        if (!stop.empty() && text.compare(start, end - start, stop) == 0)
          return Outcome{text.substr(0, start), true, stop, {}};
  return Outcome{text, false, "", {}};
}

TEST(StopMatcher, EverySplitOfRandomTextsMatchesTheReference) {
  // A 5-letter alphabet with multi-byte characters, and a 2-letter one for self-overlapping stops.
  const std::vector<std::vector<std::string>> alphabets = {{"a", "b", "c", "é", "你"}, {"a", "b"}};
  std::mt19937 rng(2024);
  int runs = 0, stopped_texts = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const std::vector<std::string>& alphabet = alphabets[trial % 2];
    auto random_string = [&](int min_chars, int max_chars) {
      std::vector<std::string> chars;
      const int n = std::uniform_int_distribution<int>(min_chars, max_chars)(rng);
      for (int i = 0; i < n; ++i) chars.push_back(alphabet[rng() % alphabet.size()]);
      return chars;
    };
    std::vector<std::string> stops;
    const int n_stops = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < n_stops; ++i) {
      std::string stop;
      for (const std::string& c : random_string(1, 4)) stop += c;
      stops.push_back(stop);
    }
    const std::vector<std::string> chars = random_string(0, 10);
    std::string text;
    for (const std::string& c : chars) text += c;
    const Outcome expected = Reference(stops, text);
    stopped_texts += expected.stopped;
    // Every subset of the character boundaries as piece boundaries.
    const size_t gaps = chars.empty() ? 0 : chars.size() - 1;
    for (uint32_t split = 0; split < (1u << gaps); ++split) {
      std::vector<std::string> pieces(1);
      for (size_t i = 0; i < chars.size(); ++i) {
        pieces.back() += chars[i];
        if (i < gaps && (split >> i & 1u)) pieces.emplace_back();
      }
      const Outcome got = Feed(stops, pieces);
      ++runs;
      ASSERT_EQ(got.text, expected.text) << "text '" << text << "' split " << split;
      ASSERT_EQ(got.stopped, expected.stopped) << "text '" << text << "' split " << split;
      ASSERT_EQ(got.matched, expected.matched) << "text '" << text << "' split " << split;
      for (const std::string& e : got.emits) ASSERT_TRUE(IsCompleteUtf8(e)) << e;
    }
  }
  EXPECT_GT(runs, 10000);
  EXPECT_GT(stopped_texts, 50);
}

}  // namespace
}  // namespace infernix
