// Test helpers of the tokenizer tests: the Qwen3 tokenizer fixture and the Hugging Face reference
// lines of text/tokenize.jsonl. Header-only, for *_test.cpp files.
#pragma once

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file_set.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace infernix::testing {

inline std::string FixturesDir() {
  const char* env = std::getenv("INFERNIX_FIXTURES_DIR");
  return env != nullptr && *env != '\0' ? env : INFERNIX_FIXTURES_DIR;
}

// The real Qwen3 tokenizer, loaded once per test binary (immutable after that; shared by tests).
inline const Tokenizer& QwenTokenizer() {
  static const std::unique_ptr<Tokenizer> tokenizer =
      Tokenizer::Load(DirFileSet(FixturesDir() + "/tokenizers/qwen3"));
  return *tokenizer;
}

// One line of tokenize.jsonl: Hugging Face's encode(text, add_special_tokens=False) and
// decode(ids, skip_special_tokens=False).
struct ReferenceCase {
  int line;  // 1-based
  std::string text;
  std::vector<int32_t> ids;
  std::string decoded;
};

inline std::vector<ReferenceCase> ReadReferenceCases() {
  const std::string path = FixturesDir() + "/text/tokenize.jsonl";
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::vector<ReferenceCase> cases;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    cases.push_back({number, j.at("text").get<std::string>(), j.at("ids").get<std::vector<int32_t>>(),
                     j.at("decoded").get<std::string>()});
  }
  return cases;
}

// `text` with control characters escaped and cut to `limit` bytes, for failure messages.
inline std::string Escaped(std::string_view text, size_t limit = 200) {
  std::string out;
  for (char c : text.substr(0, limit)) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u == 0x7F) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  if (text.size() > limit) out += "...";
  return out;
}

// The byte-level spelling of `text` (" the" -> "Ġthe").
inline std::string Spell(std::string_view text) {
  std::string out;
  byte_level::Encode(text, &out);
  return out;
}

// A small byte-level BPE tokenizer.json: the 256 byte characters have ids 0..255 (the id of a byte is
// its value: 'a' is 97), and merge i ("left right", in byte-level spelling) makes token 256 + i.
// GPT-2 split (ByteLevel with use_regex), no normalizer, no added tokens. Tests edit the result.
inline nlohmann::json SmallTokenizerJson(const std::vector<std::string>& merges) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[Spell(std::string(1, static_cast<char>(b)))] = b;
  for (size_t i = 0; i < merges.size(); ++i) {
    std::string joined = merges[i];
    joined.erase(joined.find(' '), 1);
    vocab[joined] = 256 + static_cast<int>(i);
  }
  return {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
        {"ignore_merges", false}, {"vocab", vocab}, {"merges", merges}}},
  };
}

// The files of a tokenizer folder held in memory ("<test>/tokenizer.json", ...).
inline std::unique_ptr<MemoryFileSet> TokenizerFiles(std::string_view tokenizer_json,
                                                     std::string_view config_json = {}) {
  auto files = std::make_unique<MemoryFileSet>("<test>");
  files->AddCopy("tokenizer.json", tokenizer_json);
  if (!config_json.empty()) files->AddCopy("tokenizer_config.json", config_json);
  return files;
}

inline std::unique_ptr<Tokenizer> LoadJson(const nlohmann::json& tokenizer, const nlohmann::json& config = nullptr) {
  return Tokenizer::Load(*TokenizerFiles(tokenizer.dump(), config.is_null() ? "" : config.dump()));
}

// Runs `fn`, which must throw infernix::Error with `code`; returns the message ("" and a test
// failure otherwise).
template <typename Fn>
std::string ErrorOf(ErrorCode code, Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an infernix::Error with code " << ErrorCodeName(code);
  return "";
}

}  // namespace infernix::testing
