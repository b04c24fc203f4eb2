// Byte-exactness against Hugging Face tokenizers on the reference lines of text/tokenize.jsonl
// (English, code, CJK, Korean, Arabic, Cyrillic, emoji, NFC cases, special tokens, white space).
#include <gtest/gtest.h>

#include "tokenizer/stream_decoder.h"
#include "tokenizer/test_util.h"
#include "tokenizer/utf8.h"

namespace infernix {
namespace {

using testing::Escaped;
using testing::QwenTokenizer;
using testing::ReadReferenceCases;
using testing::ReferenceCase;

// A readable account of where `actual` departs from `expected`: the first differing position and
// the tokens around it on both sides.
std::string IdDiff(const Tokenizer& tok, const std::vector<int32_t>& expected, const std::vector<int32_t>& actual) {
  size_t first = 0;
  while (first < expected.size() && first < actual.size() && expected[first] == actual[first]) ++first;
  auto window = [&](const std::vector<int32_t>& ids) {
    std::string out;
    const size_t begin = first >= 3 ? first - 3 : 0;
    for (size_t i = begin; i < ids.size() && i < first + 5; ++i) {
      out += fmt::format("{}{}='{}' ", i == first ? ">>" : "", ids[i], Escaped(tok.IdToToken(ids[i]), 40));
    }
    return out;
  };
  return fmt::format("{} expected ids, {} actual; first difference at index {}\n  expected: {}\n  actual:   {}",
                     expected.size(), actual.size(), first, window(expected), window(actual));
}

TEST(ReferenceTest, EncodeMatchesHuggingFaceOnEveryLine) {
  const Tokenizer& tok = QwenTokenizer();
  const std::vector<ReferenceCase> cases = ReadReferenceCases();
  ASSERT_GT(cases.size(), 100u);
  for (const ReferenceCase& c : cases) {
    const std::vector<int32_t> ids = tok.Encode(c.text);
    ASSERT_EQ(ids, c.ids) << "tokenize.jsonl line " << c.line << ": \"" << Escaped(c.text) << "\"\n"
                          << IdDiff(tok, c.ids, ids);
  }
}

TEST(ReferenceTest, DecodeMatchesHuggingFaceOnEveryLine) {
  const Tokenizer& tok = QwenTokenizer();
  for (const ReferenceCase& c : ReadReferenceCases()) {
    const std::string decoded = tok.Decode(c.ids);
    ASSERT_EQ(decoded, c.decoded) << "tokenize.jsonl line " << c.line << ": \"" << Escaped(c.text) << "\"";
  }
}

TEST(ReferenceTest, StreamingEqualsDecodeOnEveryLine) {
  const Tokenizer& tok = QwenTokenizer();
  for (const bool skip_special : {false, true}) {
    for (const ReferenceCase& c : ReadReferenceCases()) {
      StreamDecoder stream(tok, skip_special);
      std::string streamed;
      for (int32_t id : c.ids) {
        const std::string part = stream.Push(id);
        streamed += part;
        ASSERT_EQ(utf8::FindInvalid(part), utf8::kValid) << "line " << c.line;
      }
      streamed += stream.Flush();
      ASSERT_EQ(streamed, tok.Decode(c.ids, skip_special)) << "tokenize.jsonl line " << c.line;
    }
  }
}

TEST(ReferenceTest, SkipSpecialDropsOnlySpecialTokens) {
  const Tokenizer& tok = QwenTokenizer();
  const std::vector<int32_t> ids = tok.Encode("<|im_start|>user\nhi<|im_end|>\n<think>x</think>");
  EXPECT_EQ(tok.Decode(ids, /*skip_special=*/true), "user\nhi\n<think>x</think>");
}

}  // namespace
}  // namespace infernix
