// NFC normalization and the pre-tokenizer regexes.
#include "tokenizer/normalizer.h"

#include <cstdlib>
#include <random>

#include <gtest/gtest.h>
#include <utf8proc.h>

#include "base/error.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/test_util.h"

namespace infernix {
namespace {

using testing::ErrorOf;

std::string Nfc(std::string_view text) {
  std::string buffer;
  return std::string(Normalizer(NormalizerKind::kNfc).Apply(text, &buffer));
}

TEST(NormalizerTest, NfcComposes) {
  EXPECT_EQ(Nfc("e\u0301"), "\u00E9");
  EXPECT_EQ(Nfc("cafe\u0301 au lait"), "caf\u00E9 au lait");
  EXPECT_EQ(Nfc("\u1100\u1161"), "\uAC00");                  // Hangul jamo -> 가
  EXPECT_EQ(Nfc("a\u0323\u0307"), "\u1EA1\u0307");           // canonical order, then compose
  EXPECT_EQ(Nfc("\u0301leading mark"), "\u0301leading mark");  // nothing to compose with
  EXPECT_EQ(Nfc("你e\u0301好"), "你\u00E9好");
  EXPECT_EQ(Nfc("\u212B"), "\u00C5");                        // Angstrom sign: a singleton
  EXPECT_EQ(Nfc("x\u0374y"), "x\u02B9y");
}

TEST(NormalizerTest, NfcLeavesCompatibilityCharactersAlone) {
  EXPECT_EQ(Nfc("\u01C4 \uFB01 \uFF21 \u2460"), "\u01C4 \uFB01 \uFF21 \u2460");  // Ǆ ﬁ Ａ ①
}

TEST(NormalizerTest, UnchangedTextIsNotCopied) {
  std::string buffer;
  const Normalizer nfc(NormalizerKind::kNfc);
  for (std::string_view text : {"plain ascii", "é already composed, ÿ", "中文文本", ""}) {
    EXPECT_EQ(nfc.Apply(text, &buffer).data(), text.data()) << text;
  }
  const std::string_view decomposed = "e\u0301";
  EXPECT_EQ(Normalizer().Apply(decomposed, &buffer).data(), decomposed.data());  // kNone
}

// Normalizing only the stretches that need it must equal running utf8proc over the whole text.
TEST(NormalizerTest, PiecewiseNfcEqualsWholeTextNfc) {
  const std::vector<std::string> alphabet = {"a", "e", " ", "\n", "\u00E9", "\u0301", "\u0323", "\u0307", "\u1100",
                                             "\u1161", "\u11A8", "\uAC00", "\u4F60", "\u304B", "\u3099", "\u212B",
                                             "\u0374", "\U0001F600", "\u0915", "\u093C", "\u0B47", "\u0B3E"};
  std::mt19937 rng(42);
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1), length(0, 16);
  for (int round = 0; round < 5000; ++round) {
    std::string text;
    for (size_t n = length(rng); n > 0; --n) text += alphabet[pick(rng)];
    utf8proc_uint8_t* whole = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(text.c_str()));
    ASSERT_NE(whole, nullptr);
    const std::string expected(reinterpret_cast<const char*>(whole));
    std::free(whole);
    ASSERT_EQ(Nfc(text), expected) << testing::Escaped(text);
  }
}

std::vector<std::string> Split(const PreTokenizer& pre, std::string_view text) {
  std::vector<std::string_view> pieces;
  pre.Split(text, &pieces);
  return {pieces.begin(), pieces.end()};
}

constexpr std::string_view kQwenPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

TEST(PreTokenizerTest, QwenPattern) {
  const PreTokenizer pre({std::string(kQwenPattern)}, "test");
  using V = std::vector<std::string>;
  EXPECT_EQ(Split(pre, "Hello world 123"), (V{"Hello", " world", " ", "1", "2", "3"}));
  EXPECT_EQ(Split(pre, "I'VE  been\n\nthere!!"), (V{"I", "'VE", " ", " been", "\n\n", "there", "!!"}));
  EXPECT_EQ(Split(pre, "a\u00A0b"), (V{"a", "\u00A0b"}));   // NBSP is not a letter: it prefixes "b"
  EXPECT_EQ(Split(pre, "x \u3000 y"), (V{"x", " \u3000", " y"}));  // ideographic space is \s
  EXPECT_EQ(Split(pre, ""), V{});
}

TEST(PreTokenizerTest, SeveralPatternsApplyInTurn) {
  const PreTokenizer pre({"[0-9]+", "."}, "test");
  EXPECT_EQ(Split(pre, "ab12c"), (std::vector<std::string>{"a", "b", "1", "2", "c"}));
  const PreTokenizer none({}, "test");
  EXPECT_EQ(Split(none, "ab 12"), (std::vector<std::string>{"ab 12"}));
}

TEST(PreTokenizerTest, GapsBetweenMatchesArePieces) {
  const PreTokenizer pre({"[0-9]+"}, "test");
  EXPECT_EQ(Split(pre, "ab12cd345"), (std::vector<std::string>{"ab", "12", "cd", "345"}));
  const PreTokenizer empty_matches({"x*"}, "test");
  EXPECT_EQ(Split(empty_matches, "axxb"), (std::vector<std::string>{"a", "xx", "b"}));
}

TEST(PreTokenizerTest, TranslatesOnigurumaEscapes) {
  EXPECT_EQ(TranslateOnigPattern(R"(a\sb)", "t").find(R"([\t-\r\x{20}\x{85})"), 1u);
  EXPECT_EQ(TranslateOnigPattern(R"(\S)", "t").rfind("[^", 0), 0u);
  EXPECT_EQ(TranslateOnigPattern(R"([^\s\p{L}])", "t").rfind(R"([^\t-\r)", 0), 0u);
  EXPECT_EQ(TranslateOnigPattern(R"(\p{L}\d\.)", "t"), R"(\p{L}\d\.)");
  EXPECT_EQ(TranslateOnigPattern(R"([]\s])", "t").find(R"(]\t-\r)"), 1u);  // ']' first is literal
  std::string message = ErrorOf(ErrorCode::kUnsupported, [] { TranslateOnigPattern(R"(\h+)", "tok.json"); });
  EXPECT_NE(message.find("tok.json"), std::string::npos) << message;
  ErrorOf(ErrorCode::kUnsupported, [] { TranslateOnigPattern(R"([\S])", "t"); });
}

TEST(PreTokenizerTest, LiteralPatternsAndBadPatterns) {
  const PreTokenizer pre({EscapeRegexLiteral("a.b")}, "test");
  EXPECT_EQ(Split(pre, "a.bxa-b"), (std::vector<std::string>{"a.b", "xa-b"}));
  const std::string message = ErrorOf(ErrorCode::kInvalidFormat, [] { PreTokenizer({"(unclosed"}, "tok.json"); });
  EXPECT_NE(message.find("tok.json: pre_tokenizer pattern '(unclosed' does not compile"), std::string::npos) << message;
}

}  // namespace
}  // namespace infernix
