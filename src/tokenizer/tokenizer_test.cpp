// The public Tokenizer API on the real Qwen3 tokenizer, bad input, and the loader's refusals.
#include "tokenizer/tokenizer.h"

#include <thread>

#include <gtest/gtest.h>

#include "tokenizer/test_util.h"

namespace infernix {
namespace {

using testing::ErrorOf;
using testing::FixturesDir;
using testing::LoadJson;
using testing::QwenTokenizer;
using testing::ReadReferenceCases;
using testing::SmallTokenizerJson;
using testing::TokenizerFiles;

bool Contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(TokenizerTest, QwenVocabularyAndSpecialTokens) {
  const Tokenizer& tok = QwenTokenizer();
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.Encode("Hello world"), (std::vector<int32_t>{9707, 1879}));
  EXPECT_EQ(tok.TokenToId("Hello"), 9707);
  EXPECT_EQ(tok.TokenToId("<|im_end|>"), 151645);
  EXPECT_EQ(tok.TokenToId("no such token"), std::nullopt);
  EXPECT_EQ(tok.IdToToken(1879), "Ġworld");
  EXPECT_EQ(tok.IdToToken(151667), "<think>");
  EXPECT_EQ(tok.IdToToken(-5), "");
  EXPECT_EQ(tok.TokenBytes(1879), " world");
  EXPECT_TRUE(tok.IsSpecial(151643));
  EXPECT_TRUE(tok.IsSpecial(151645));
  EXPECT_FALSE(tok.IsSpecial(151657));  // <tool_call> is an added token but not special
  EXPECT_FALSE(tok.IsSpecial(9707));
  EXPECT_FALSE(tok.IsSpecial(1 << 30));
  const SpecialTokens& named = tok.special_tokens();
  EXPECT_EQ(named.eos_token, "<|im_end|>");
  EXPECT_EQ(named.eos_id, 151645);
  EXPECT_EQ(named.pad_token, "<|endoftext|>");
  EXPECT_EQ(named.pad_id, 151643);
  EXPECT_EQ(named.bos_token, std::nullopt);
  EXPECT_EQ(named.unk_token, std::nullopt);
}

TEST(TokenizerTest, EmbeddedModelFolderHasTheSameTokenizer) {
  const auto tok = Tokenizer::Load(DirFileSet(FixturesDir() + "/models/qwen3-next-e2e"));
  EXPECT_EQ(tok->Encode("Hello world<|im_end|>"), (std::vector<int32_t>{9707, 1879, 151645}));
}

TEST(TokenizerTest, InvalidUtf8NamesTheOffset) {
  const std::string message =
      ErrorOf(ErrorCode::kInvalidArgument, [] { QwenTokenizer().Encode("abc\xC3(def"); });
  EXPECT_TRUE(Contains(message, "offset 3")) << message;
  EXPECT_TRUE(Contains(message, "0xC3")) << message;
}

TEST(TokenizerTest, DecodeRejectsOutOfRangeIds) {
  const Tokenizer& tok = QwenTokenizer();
  std::string message = ErrorOf(ErrorCode::kOutOfRange, [&] { tok.Decode(std::vector<int32_t>{9707, 151669}); });
  EXPECT_TRUE(Contains(message, "151669")) << message;
  EXPECT_TRUE(Contains(message, "index 1")) << message;
  ErrorOf(ErrorCode::kOutOfRange, [&] { tok.Decode(std::vector<int32_t>{-1}); });
  ErrorOf(ErrorCode::kOutOfRange, [&] { tok.TokenBytes(151669); });
  EXPECT_EQ(tok.Decode(std::vector<int32_t>{}), "");
}

TEST(TokenizerTest, GapsInTheIdsDecodeToNothing) {
  nlohmann::json j = SmallTokenizerJson({});
  j["added_tokens"] = {{{"id", 300}, {"content", "<x>"}, {"special", true}}};
  const auto tok = LoadJson(j);
  EXPECT_EQ(tok->vocab_size(), 301);
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{'a', 280, 'b'}), "ab");
  EXPECT_EQ(tok->IdToToken(280), "");
}

TEST(TokenizerTest, ConcurrentEncodesAgree) {
  const Tokenizer& tok = QwenTokenizer();
  const std::vector<testing::ReferenceCase> cases = ReadReferenceCases();
  tok.ClearCache();
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (size_t i = t; i < cases.size() + t; ++i) {
          const auto& c = cases[i % cases.size()];
          if (tok.Encode(c.text) != c.ids || tok.Decode(c.ids) != c.decoded) ++failures[t];
        }
        if (t == 0) tok.ClearCache();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures, (std::vector<int>{0, 0, 0, 0}));
}

TEST(TokenizerTest, LongAndOddInputsRoundTrip) {
  const Tokenizer& tok = QwenTokenizer();
  std::string mixed;
  for (int i = 0; i < 2000; ++i) mixed += "word\t\u00A0 \u4F60\U0001F600 \r\n";
  const std::vector<std::string> texts = {
      std::string(300000, ' '),         std::string(300000, 'a'),   std::string(100000, '\n') + "x",
      std::string(50000, ' ') + "word", std::string("\0a\0", 3), mixed,
  };
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = tok.Encode(text);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(tok.Decode(ids), text) << testing::Escaped(text, 40);
  }
}

TEST(TokenizerLoadTest, MissingTokenizerJson) {
  MemoryFileSet empty("<empty>");
  const std::string message = ErrorOf(ErrorCode::kNotFound, [&] { Tokenizer::Load(empty); });
  EXPECT_TRUE(Contains(message, "<empty>/tokenizer.json")) << message;
}

TEST(TokenizerLoadTest, MalformedJsonNamesTheFile) {
  std::string message = ErrorOf(ErrorCode::kInvalidFormat, [] { Tokenizer::Load(*TokenizerFiles("{\"model\": [")); });
  EXPECT_TRUE(Contains(message, "<test>/tokenizer.json: not valid JSON")) << message;
  const std::string good = SmallTokenizerJson({}).dump();
  message = ErrorOf(ErrorCode::kInvalidFormat, [&] { Tokenizer::Load(*TokenizerFiles(good, "{oops")); });
  EXPECT_TRUE(Contains(message, "<test>/tokenizer_config.json: not valid JSON")) << message;
}

TEST(TokenizerLoadTest, UnsupportedModelTypesAreNamed) {
  for (const char* type : {"Unigram", "WordPiece", "WordLevel"}) {
    nlohmann::json j = SmallTokenizerJson({});
    j["model"]["type"] = type;
    const std::string message = ErrorOf(ErrorCode::kUnsupported, [&] { LoadJson(j); });
    EXPECT_TRUE(Contains(message, "model.type")) << message;
    EXPECT_TRUE(Contains(message, type)) << message;
  }
}

// Each edit makes the small tokenizer.json use an option Infernix does not implement.
TEST(TokenizerLoadTest, UnsupportedOptionsAreRefused) {
  const std::vector<std::pair<std::string, nlohmann::json>> edits = {
      {"/model/dropout", 0.1},
      {"/model/continuing_subword_prefix", "##"},
      {"/model/end_of_word_suffix", "</w>"},
      {"/normalizer", {{"type", "NFKC"}}},
      {"/normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Lowercase"}}}}}},
      {"/pre_tokenizer/add_prefix_space", true},
      {"/pre_tokenizer", {{"type", "Metaspace"}}},
      {"/pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Removed"}}},
      {"/pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Isolated"}}},
      {"/pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", {{{"type", "ByteLevel"}, {"add_prefix_space", false}}, {{"type", "Digits"}}}}}},
      {"/decoder", {{"type", "WordPiece"}}},
      {"/decoder", nullptr},
  };
  for (const auto& [pointer, value] : edits) {
    nlohmann::json j = SmallTokenizerJson({});
    j[nlohmann::json::json_pointer(pointer)] = value;
    const std::string message = ErrorOf(ErrorCode::kUnsupported, [&] { LoadJson(j); });
    EXPECT_TRUE(Contains(message, "<test>/tokenizer.json: field ")) << pointer << ": " << message;
  }
}

TEST(TokenizerLoadTest, WrongTypesAreInvalidFormat) {
  const std::vector<std::pair<std::string, nlohmann::json>> edits = {
      {"/model/vocab", nlohmann::json::array()},
      {"/model/vocab/a", "not an id"},
      {"/model/byte_fallback", "yes"},
      {"/added_tokens", {{{"content", "<x>"}}}},
      {"/added_tokens", {{{"id", -3}, {"content", "<x>"}}}},
      {"/model/unk_token", 5},
  };
  for (const auto& [pointer, value] : edits) {
    nlohmann::json j = SmallTokenizerJson({});
    j[nlohmann::json::json_pointer(pointer)] = value;
    const std::string message = ErrorOf(ErrorCode::kInvalidFormat, [&] { LoadJson(j); });
    EXPECT_TRUE(Contains(message, "<test>/tokenizer.json: field '")) << pointer << ": " << message;
  }
  nlohmann::json no_model = SmallTokenizerJson({});
  no_model.erase("model");
  EXPECT_TRUE(Contains(ErrorOf(ErrorCode::kInvalidFormat, [&] { LoadJson(no_model); }), "field 'model' is missing"));
}

TEST(TokenizerLoadTest, ConfigTokensAsStringsObjectsOrNull) {
  const nlohmann::json config = {{"bos_token", {{"__type", "AddedToken"}, {"content", "a"}}},
                                 {"eos_token", "b"},
                                 {"pad_token", nullptr},
                                 {"unk_token", "not in vocab"}};
  const auto tok = LoadJson(SmallTokenizerJson({}), config);
  const SpecialTokens& named = tok->special_tokens();
  EXPECT_EQ(named.bos_token, "a");
  EXPECT_EQ(named.bos_id, 'a');
  EXPECT_EQ(named.eos_id, 'b');
  EXPECT_EQ(named.pad_token, std::nullopt);
  EXPECT_EQ(named.unk_token, "not in vocab");
  EXPECT_EQ(named.unk_id, std::nullopt);
  const std::string message = ErrorOf(ErrorCode::kInvalidFormat, [] {
    LoadJson(SmallTokenizerJson({}), {{"eos_token", 7}});
  });
  EXPECT_TRUE(Contains(message, "tokenizer_config.json: field 'eos_token'")) << message;
}

TEST(TokenizerLoadTest, ByteLevelWithoutRegexAndSplitLiterals) {
  nlohmann::json j = SmallTokenizerJson({"Ġ x"});
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"String", "|"}}}, {"behavior", "Isolated"}},
                          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  const auto tok = LoadJson(j);
  // No GPT-2 split: " x" stays one piece and merges; "|" is split off as a literal.
  EXPECT_EQ(tok->Encode("a x|b"), (std::vector<int32_t>{'a', 256, '|', 'b'}));
}

}  // namespace
}  // namespace infernix
