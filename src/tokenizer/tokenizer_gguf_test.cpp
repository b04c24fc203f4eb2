#include "tokenizer/tokenizer_gguf.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "chat/chat_template.h"
#include "formats/gguf_test_builder.h"
#include "tokenizer/test_util.h"

namespace infernix {
namespace {

using testing::FixturesDir;
using testing::ReadReferenceCases;
using testing_gguf::Builder;

// The metadata-only copies of the reference GGUFs (scripts/make_gguf_tokenizer_fixture.py).
const GgufFile& E2eGguf() {
  static const auto f = GgufFile::Open(FixturesDir() + "/gguf/qwen3-e2e-tokenizer.gguf");
  return *f;
}
const GgufFile& Gguf2k() {
  static const auto f = GgufFile::Open(FixturesDir() + "/gguf/g-qwen3-tokenizer.gguf");
  return *f;
}

// The GGUF tokenizer `a` and the tokenizer.json one `b` agree on every id's bytes and lookup, and on the
// special tokens. They agree on speciality except where llama.cpp's converter made a non-special added
// token that looks special ("<|fim_prefix|>") a control token: those ids are returned.
std::vector<int32_t> ExpectSameVocabulary(const Tokenizer& a, const Tokenizer& b) {
  std::vector<int32_t> looks_special;
  EXPECT_EQ(a.vocab_size(), b.vocab_size());
  for (int32_t id = 0; id < a.vocab_size(); ++id) {
    EXPECT_EQ(a.TokenBytes(id), b.TokenBytes(id)) << "id " << id;
    EXPECT_EQ(a.IdToToken(id), b.IdToToken(id)) << "id " << id;
    if (a.IsSpecial(id) != b.IsSpecial(id)) {
      std::string_view text = b.TokenBytes(id);
      EXPECT_TRUE(a.IsSpecial(id) && text.starts_with("<|") && text.ends_with("|>")) << "id " << id;
      looks_special.push_back(id);
    }
  }
  const SpecialTokens& sa = a.special_tokens();
  const SpecialTokens& sb = b.special_tokens();
  EXPECT_EQ(sa.eos_id, sb.eos_id);
  EXPECT_EQ(sa.bos_id, sb.bos_id);
  EXPECT_EQ(sa.pad_id, sb.pad_id);
  EXPECT_EQ(sa.eos_token, sb.eos_token);
  return looks_special;
}

TEST(TokenizerGgufTest, Qwen3GgufTokenizesTheFixturesLikeTokenizerJson) {
  TokenizerSpec spec = ReadGgufTokenizerSpec(E2eGguf());
  EXPECT_EQ(spec.vocab.size(), 151643u);  // the 267 "[PAD<id>]" fillers are left out
  EXPECT_EQ(spec.added_tokens.size(), 26u);
  EXPECT_EQ(spec.merges.size(), 151387u);
  auto tokenizer = Tokenizer::Create(std::move(spec));
  const Tokenizer& reference = testing::QwenTokenizer();
  // <|fim_prefix|> <|fim_middle|> <|fim_suffix|> <|fim_pad|> <|repo_name|> <|file_sep|>
  EXPECT_EQ(ExpectSameVocabulary(*tokenizer, reference),
            (std::vector<int32_t>{151659, 151660, 151661, 151662, 151663, 151664}));
  EXPECT_EQ(tokenizer->special_tokens().eos_id, 151645);
  EXPECT_EQ(tokenizer->special_tokens().pad_id, 151643);
  EXPECT_FALSE(tokenizer->special_tokens().bos_id.has_value());
  EXPECT_TRUE(tokenizer->IsSpecial(151644));   // <|im_start|>: control
  EXPECT_FALSE(tokenizer->IsSpecial(151667));  // <think>: user-defined
  auto cases = ReadReferenceCases();
  ASSERT_GT(cases.size(), 10u);
  for (const auto& c : cases) {
    EXPECT_EQ(tokenizer->Encode(c.text), c.ids) << "line " << c.line << ": " << testing::Escaped(c.text);
    EXPECT_EQ(tokenizer->Decode(c.ids), c.decoded) << "line " << c.line;
  }
}

TEST(TokenizerGgufTest, TwoKGgufTokenizesLikeItsTokenizerJson) {
  auto tokenizer = Tokenizer::Create(ReadGgufTokenizerSpec(Gguf2k()));
  auto reference = Tokenizer::Load(DirFileSet(FixturesDir() + "/tokenizers/tokenizer-2k"));
  EXPECT_EQ(ExpectSameVocabulary(*tokenizer, *reference), (std::vector<int32_t>{2016, 2017, 2018, 2019, 2020, 2021}));
  EXPECT_EQ(tokenizer->vocab_size(), 2026);
  size_t n_multi_token = 0;
  for (const auto& c : ReadReferenceCases()) {
    std::vector<int32_t> ids = reference->Encode(c.text);
    n_multi_token += ids.size() > 1;
    EXPECT_EQ(tokenizer->Encode(c.text), ids) << "line " << c.line << ": " << testing::Escaped(c.text);
    EXPECT_EQ(tokenizer->Decode(ids), reference->Decode(ids)) << "line " << c.line;
    if (c.text.find("<|fim_") == std::string::npos && c.text.find("<|repo_name|>") == std::string::npos &&
        c.text.find("<|file_sep|>") == std::string::npos) {
      EXPECT_EQ(tokenizer->Decode(ids, true), reference->Decode(ids, true)) << "line " << c.line;
    }
  }
  EXPECT_GT(n_multi_token, 10u);
}

std::vector<nlohmann::ordered_json> ChatCases() {
  std::ifstream in(FixturesDir() + "/text/chat-template.jsonl");
  EXPECT_TRUE(in);
  std::vector<nlohmann::ordered_json> cases;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) cases.push_back(nlohmann::ordered_json::parse(line));
  return cases;
}

void ExpectSameTemplate(const GgufFile& gguf, const std::string& folder) {
  auto source = ReadGgufChatTemplate(gguf);
  ASSERT_TRUE(source.has_value());
  EXPECT_EQ(source->bos_token, "");
  EXPECT_EQ(source->eos_token, "<|im_end|>");
  auto from_gguf = ChatTemplate::FromString(source->source, source->bos_token, source->eos_token);
  auto reference = ChatTemplate::Load(DirFileSet(folder));
  auto cases = ChatCases();
  ASSERT_GE(cases.size(), 3u);
  for (const auto& c : cases) {
    std::string rendered = from_gguf->Render(c["messages"], c["tools"], c["kwargs"]);
    EXPECT_EQ(rendered, reference->Render(c["messages"], c["tools"], c["kwargs"]));
    EXPECT_EQ(rendered, c["rendered"].get<std::string>());  // the fixture is Qwen3's template
  }
}

TEST(TokenizerGgufTest, ChatTemplateRendersLikeTokenizerConfig) {
  ExpectSameTemplate(Gguf2k(), FixturesDir() + "/tokenizers/tokenizer-2k");
  ExpectSameTemplate(E2eGguf(), FixturesDir() + "/tokenizers/qwen3");
}

TEST(TokenizerGgufTest, Summary) {
  GgufTokenizerSummary s = SummarizeGgufTokenizer(Gguf2k());
  EXPECT_EQ(s.model, "gpt2");
  EXPECT_EQ(s.pre, "qwen2");
  EXPECT_EQ(s.n_tokens, 2048);
  EXPECT_EQ(s.n_merges, 1744);
  EXPECT_EQ(s.eos_id, 2002);
  EXPECT_EQ(s.bos_id, std::nullopt);
  EXPECT_EQ(s.add_bos, false);
  ASSERT_TRUE(s.chat_template.has_value());
  EXPECT_NE(s.chat_template->find("<|im_start|>"), std::string::npos);
}

// A tiny valid gpt2/qwen2 tokenizer; `edit` changes it before it is built.
Builder TinyTokenizer() {
  Builder b;
  b.KvString("tokenizer.ggml.model", "gpt2")
      .KvString("tokenizer.ggml.pre", "qwen2")
      .KvStrings("tokenizer.ggml.tokens", {"a", "b", "ab", "<|end|>", "[PAD4]"})
      .KvI32s("tokenizer.ggml.token_type", {1, 1, 1, 3, 5})
      .KvStrings("tokenizer.ggml.merges", {"a b"})
      .KvU32("tokenizer.ggml.eos_token_id", 3);
  return b;
}

TokenizerSpec ReadFrom(const Builder& b) {
  auto f = GgufFile::FromBlob(CopyToBlob(b.Build()), "t.gguf");
  return ReadGgufTokenizerSpec(*f);
}

void ExpectError(const Builder& b, ErrorCode code, std::initializer_list<std::string> parts) {
  try {
    ReadFrom(b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(TokenizerGgufTest, TinyTokenizer) {
  auto t = Tokenizer::Create(ReadFrom(TinyTokenizer()));
  EXPECT_EQ(t->Encode("ab<|end|>ba"), (std::vector<int32_t>{2, 3, 1, 0}));
  EXPECT_EQ(t->special_tokens().eos_id, 3);
  EXPECT_EQ(t->vocab_size(), 4);  // the unused filler is not a token
  EXPECT_EQ(t->Decode(std::vector<int32_t>{2, 3}, true), "ab");
}

TEST(TokenizerGgufTest, Errors) {
  Builder b;
  b.KvString("tokenizer.ggml.model", "llama");
  ExpectError(b, ErrorCode::kUnsupported, {"t.gguf", "tokenizer.ggml.model", "\"llama\""});
  Builder c;
  c.KvString("tokenizer.ggml.model", "gpt2").KvString("tokenizer.ggml.pre", "llama-bpe");
  ExpectError(c, ErrorCode::kUnsupported, {"t.gguf", "tokenizer.ggml.pre", "\"llama-bpe\"", "qwen2"});
  ExpectError(Builder(), ErrorCode::kInvalidFormat, {"missing metadata key tokenizer.ggml.model"});
  Builder d = TinyTokenizer();
  d.KvI32s("tokenizer.ggml.token_type", {1});
  // A duplicate key is the GGUF reader's error.
  EXPECT_THROW(ReadFrom(d), Error);
  Builder e;
  e.KvString("tokenizer.ggml.model", "gpt2")
      .KvString("tokenizer.ggml.pre", "qwen2")
      .KvStrings("tokenizer.ggml.tokens", {"a", "b"})
      .KvI32s("tokenizer.ggml.token_type", {1});
  ExpectError(e, ErrorCode::kInvalidFormat, {"token_type has 1 entries", "tokens has 2"});
  Builder f;
  f.KvString("tokenizer.ggml.model", "gpt2")
      .KvString("tokenizer.ggml.pre", "qwen2")
      .KvStrings("tokenizer.ggml.tokens", {"a", "b"})
      .KvI32s("tokenizer.ggml.token_type", {1, 9});
  ExpectError(f, ErrorCode::kInvalidFormat, {"token_type[1] is 9"});
  Builder g;
  g.KvString("tokenizer.ggml.model", "gpt2")
      .KvString("tokenizer.ggml.pre", "qwen2")
      .KvStrings("tokenizer.ggml.tokens", {"a", "b"})
      .KvStrings("tokenizer.ggml.merges", {"ab"});
  ExpectError(g, ErrorCode::kInvalidFormat, {"tokenizer.ggml.merges[0]", "\"ab\""});
  Builder h;
  h.KvString("tokenizer.ggml.model", "gpt2")
      .KvString("tokenizer.ggml.pre", "qwen2")
      .KvStrings("tokenizer.ggml.tokens", {"a", "b"})
      .KvU32("tokenizer.ggml.eos_token_id", 7);
  ExpectError(h, ErrorCode::kInvalidFormat, {"tokenizer.ggml.eos_token_id is 7", "2 tokens"});
  Builder i;
  i.KvString("tokenizer.ggml.model", "gpt2")
      .KvString("tokenizer.ggml.pre", "qwen2")
      .KvI32s("tokenizer.ggml.tokens", {1, 2});
  ExpectError(i, ErrorCode::kInvalidFormat, {"tokenizer.ggml.tokens", "array of i32"});
}

}  // namespace
}  // namespace infernix
