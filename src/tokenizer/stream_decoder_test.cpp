// The streaming detokenizer: characters split across tokens, emoji, invalid bytes, and
// Push + Flush == Decode on random id sequences.
#include "tokenizer/stream_decoder.h"

#include <random>

#include <gtest/gtest.h>

#include "tokenizer/test_util.h"

namespace infernix {
namespace {

using testing::ErrorOf;
using testing::QwenTokenizer;
using testing::Spell;

// The id of the one-byte token standing for byte `b` in the Qwen vocabulary.
int32_t ByteToken(uint8_t b) {
  const std::optional<int32_t> id = QwenTokenizer().TokenToId(Spell(std::string(1, static_cast<char>(b))));
  EXPECT_TRUE(id.has_value()) << int(b);
  return id.value_or(0);
}

TEST(StreamDecoderTest, HoldsBackACharacterSplitAcrossByteTokens) {
  StreamDecoder stream(QwenTokenizer());
  EXPECT_EQ(stream.Push(ByteToken('a')), "a");
  EXPECT_EQ(stream.Push(ByteToken(0xE4)), "");  // 你 = E4 BD A0
  EXPECT_EQ(stream.pending_bytes(), 1u);
  EXPECT_EQ(stream.Push(ByteToken(0xBD)), "");
  EXPECT_EQ(stream.Push(ByteToken(0xA0)), "你");
  EXPECT_EQ(stream.pending_bytes(), 0u);
  EXPECT_EQ(stream.Flush(), "");
}

TEST(StreamDecoderTest, EmojiOverSeveralTokens) {
  const Tokenizer& tok = QwenTokenizer();
  const std::string text = "ok 😀👍🏽👨\u200d👩\u200d👧 🇯🇵!";
  const std::vector<int32_t> ids = tok.Encode(text);
  StreamDecoder stream(tok);
  std::string out;
  int held_back = 0;
  for (int32_t id : ids) {
    const std::string part = stream.Push(id);
    EXPECT_EQ(utf8::FindInvalid(part), utf8::kValid);
    if (stream.pending_bytes() > 0) ++held_back;
    out += part;
  }
  EXPECT_GT(held_back, 0);  // some emoji really are split across tokens
  out += stream.Flush();
  EXPECT_EQ(out, text);
}

TEST(StreamDecoderTest, InvalidBytesBecomeReplacementCharacters) {
  StreamDecoder stream(QwenTokenizer());
  EXPECT_EQ(stream.Push(ByteToken(0xFF)), "\uFFFD");  // can never start a character: at once
  EXPECT_EQ(stream.Push(ByteToken(0xE4)), "");
  EXPECT_EQ(stream.Push(ByteToken('x')), "\uFFFDx");  // the E4 was cut short
  EXPECT_EQ(stream.Push(ByteToken(0xF0)), "");
  EXPECT_EQ(stream.Push(ByteToken(0x9F)), "");
  EXPECT_EQ(stream.Flush(), "\uFFFD");  // one U+FFFD for the incomplete F0 9F, as Decode gives
  EXPECT_EQ(QwenTokenizer().Decode(std::vector<int32_t>{ByteToken(0xF0), ByteToken(0x9F)}), "\uFFFD");
  EXPECT_EQ(stream.Push(ByteToken('y')), "y");  // usable again after Flush
}

TEST(StreamDecoderTest, SkipsSpecialTokensWhenAsked) {
  const Tokenizer& tok = QwenTokenizer();
  const int32_t im_end = tok.TokenToId("<|im_end|>").value();
  StreamDecoder skipping(tok, /*skip_special=*/true);
  EXPECT_EQ(skipping.Push(ByteToken(0xE4)), "");
  EXPECT_EQ(skipping.Push(im_end), "");  // dropped: the character continues across it
  EXPECT_EQ(skipping.Push(ByteToken(0xBD)), "");
  EXPECT_EQ(skipping.Push(ByteToken(0xA0)), "你");
  StreamDecoder keeping(tok);
  EXPECT_EQ(keeping.Push(im_end), "<|im_end|>");
}

TEST(StreamDecoderTest, OutOfRangeIdThrowsAndChangesNothing) {
  const Tokenizer& tok = QwenTokenizer();
  StreamDecoder stream(tok);
  EXPECT_EQ(stream.Push(ByteToken(0xE4)), "");
  ErrorOf(ErrorCode::kOutOfRange, [&] { stream.Push(tok.vocab_size()); });
  ErrorOf(ErrorCode::kOutOfRange, [&] { stream.Push(-1); });
  EXPECT_EQ(stream.pending_bytes(), 1u);
  EXPECT_EQ(stream.Push(ByteToken(0xBD)), "");
  EXPECT_EQ(stream.Push(ByteToken(0xA0)), "你");
}

TEST(StreamDecoderTest, PushAndFlushEqualDecodeOnRandomIds) {
  const Tokenizer& tok = QwenTokenizer();
  std::mt19937 rng(1234);
  // Mostly one-byte tokens (to cut characters anywhere), some whole-vocabulary ids, some specials.
  std::uniform_int_distribution<int> byte(0, 255), any(0, tok.vocab_size() - 1), kind(0, 9);
  for (int round = 0; round < 2000; ++round) {
    std::vector<int32_t> ids(1 + round % 12);
    for (int32_t& id : ids) {
      const int k = kind(rng);
      id = k < 6 ? ByteToken(static_cast<uint8_t>(byte(rng))) : k < 9 ? any(rng) : 151643 + k % 3;
    }
    for (const bool skip : {false, true}) {
      StreamDecoder stream(tok, skip);
      std::string out;
      for (int32_t id : ids) {
        const std::string part = stream.Push(id);
        ASSERT_EQ(utf8::FindInvalid(part), utf8::kValid);
        out += part;
      }
      out += stream.Flush();
      ASSERT_EQ(out, tok.Decode(ids, skip)) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace infernix
