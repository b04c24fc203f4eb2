// The GPT-2 byte <-> character map and the UTF-8 helpers.
#include "tokenizer/byte_level.h"

#include <set>

#include <gtest/gtest.h>

#include "tokenizer/utf8.h"

namespace infernix {
namespace {

TEST(ByteLevelTest, PrintableBytesStandForThemselves) {
  EXPECT_EQ(byte_level::ByteToChar('A'), U'A');
  EXPECT_EQ(byte_level::ByteToChar('~'), U'~');
  EXPECT_EQ(byte_level::ByteToChar(0xA1), U'\u00A1');
  EXPECT_EQ(byte_level::ByteToChar(0xFF), U'\u00FF');
}

TEST(ByteLevelTest, OtherBytesMapAboveU0100InOrder) {
  EXPECT_EQ(byte_level::ByteToChar(0x00), U'\u0100');
  EXPECT_EQ(byte_level::ByteToChar('\n'), U'\u010A');  // Ċ
  EXPECT_EQ(byte_level::ByteToChar(' '), U'\u0120');   // Ġ
  EXPECT_EQ(byte_level::ByteToChar(0x7F), U'\u0121');
  EXPECT_EQ(byte_level::ByteToChar(0xA0), U'\u0142');
  EXPECT_EQ(byte_level::ByteToChar(0xAD), U'\u0143');  // soft hyphen, the last one
}

TEST(ByteLevelTest, MapIsABijection) {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = byte_level::ByteToChar(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(c).second) << b;
    EXPECT_EQ(byte_level::CharToByte(c), b);
  }
  EXPECT_EQ(byte_level::CharToByte(U' '), std::nullopt);
  EXPECT_EQ(byte_level::CharToByte(U'\u0144'), std::nullopt);
  EXPECT_EQ(byte_level::CharToByte(U'你'), std::nullopt);
}

TEST(ByteLevelTest, EncodeAndDecodeTokens) {
  std::string spelled;
  byte_level::Encode("hi there\n", &spelled);
  EXPECT_EQ(spelled, "hiĠthereĊ");
  spelled.clear();
  byte_level::Encode("你", &spelled);  // E4 BD A0
  EXPECT_EQ(spelled, "ä½ł");

  std::string out;
  byte_level::DecodeToken("ĠHello", &out);
  EXPECT_EQ(out, " Hello");
  byte_level::DecodeToken("ä½ł", &out);
  EXPECT_EQ(out, " Hello你");
  out.clear();
  byte_level::DecodeToken("é", &out);  // U+00E9 is in the alphabet: it stands for byte 0xE9
  EXPECT_EQ(out, "\xE9");
  out = "x";
  byte_level::DecodeToken("<a b>", &out);  // ' ' is not in the alphabet: the token is kept as is
  EXPECT_EQ(out, "x<a b>");
}

TEST(Utf8Test, FindInvalid) {
  EXPECT_EQ(utf8::FindInvalid(""), utf8::kValid);
  EXPECT_EQ(utf8::FindInvalid("plain ascii text, long enough for the 8-byte loop"), utf8::kValid);
  EXPECT_EQ(utf8::FindInvalid("é你😀"), utf8::kValid);
  EXPECT_EQ(utf8::FindInvalid("abc\xFF"), 3u);
  EXPECT_EQ(utf8::FindInvalid("ab\xC0\x80"), 2u);          // overlong
  EXPECT_EQ(utf8::FindInvalid("\xED\xA0\x80"), 0u);        // surrogate
  EXPECT_EQ(utf8::FindInvalid("a\xF4\x90\x80\x80"), 1u);   // above U+10FFFF
  EXPECT_EQ(utf8::FindInvalid("abcdefghij\xE4\xBD"), 10u);  // truncated
  EXPECT_EQ(utf8::FindInvalid("\x80"), 0u);
}

TEST(Utf8Test, DecodeAndAppend) {
  const std::string text = "aé你😀";
  size_t pos = 0;
  EXPECT_EQ(utf8::DecodeAt(text, &pos), U'a');
  EXPECT_EQ(utf8::DecodeAt(text, &pos), U'é');
  EXPECT_EQ(utf8::DecodeAt(text, &pos), U'你');
  EXPECT_EQ(utf8::DecodeAt(text, &pos), U'😀');
  EXPECT_EQ(pos, text.size());
  EXPECT_EQ(utf8::DecodeLast(text), U'😀');
  std::string out;
  for (char32_t c : {U'a', U'é', U'你', U'😀'}) utf8::Append(c, &out);
  EXPECT_EQ(out, text);
}

std::string Lossy(std::string_view bytes, bool final = true) {
  std::string out;
  utf8::AppendLossy(bytes, final, &out);
  return out;
}

TEST(Utf8Test, LossyReplacesMaximalSubparts) {
  EXPECT_EQ(Lossy("ok"), "ok");
  EXPECT_EQ(Lossy("a\xF0\x9F\x98"), "a\uFFFD");          // one truncated sequence: one U+FFFD
  EXPECT_EQ(Lossy("\xE0\x80z"), "\uFFFD\uFFFDz");        // E0 80 is not a prefix: two
  EXPECT_EQ(Lossy("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");  // surrogate: three
  EXPECT_EQ(Lossy("\xFF\xC3\xA9"), "\uFFFDé");
  EXPECT_EQ(Lossy("\xE4\xBDx\xE4\xBD\xA0"), "\uFFFDx你");
}

TEST(Utf8Test, LossyHoldsBackAnIncompleteTailUnlessFinal) {
  std::string out;
  EXPECT_EQ(utf8::AppendLossy("ab\xE4\xBD", /*final=*/false, &out), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  EXPECT_EQ(utf8::AppendLossy("\xFF\xE4", /*final=*/false, &out), 1u);  // FF is hopeless already
  EXPECT_EQ(out, "\uFFFD");
  out.clear();
  EXPECT_EQ(utf8::AppendLossy("\xE4\x41", /*final=*/false, &out), 2u);
  EXPECT_EQ(out, "\uFFFDA");
}

TEST(Utf8Test, CharacterClasses) {
  for (char32_t c : {U' ', U'\t', U'\n', U'\r', U'\v', U'\f', U'\u0085', U'\u00A0', U'\u2003', U'\u3000'}) {
    EXPECT_TRUE(utf8::IsWhiteSpace(c)) << static_cast<uint32_t>(c);
  }
  for (char32_t c : {U'a', U'\u200B', U'\u180E', U'\x1C'}) EXPECT_FALSE(utf8::IsWhiteSpace(c)) << static_cast<uint32_t>(c);
  for (char32_t c : {U'a', U'Z', U'0', U'_', U'é', U'你', U'\u0330', U'\u0661', U'\u203F', U'\u24B6'}) {
    EXPECT_TRUE(utf8::IsWordChar(c)) << static_cast<uint32_t>(c);
  }
  for (char32_t c : {U' ', U'-', U',', U'<', U'😀', U'\u3002'}) EXPECT_FALSE(utf8::IsWordChar(c)) << static_cast<uint32_t>(c);
}

}  // namespace
}  // namespace infernix
