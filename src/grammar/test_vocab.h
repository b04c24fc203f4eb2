// The real Qwen3 tokenizer and its grammar vocabulary, loaded once per test binary (header-only,
// for *_test.cpp files). The fixtures folder comes from $INFERNIX_FIXTURES_DIR or the build.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "base/file_set.h"
#include "grammar/token_matcher.h"
#include "tokenizer/tokenizer.h"

namespace infernix::grammar::testing {

inline constexpr int32_t kEndOfText = 151643, kImEnd = 151645;

inline const Tokenizer& Qwen() {
  static const std::unique_ptr<Tokenizer> tokenizer = [] {
    const char* env = std::getenv("INFERNIX_FIXTURES_DIR");
    const std::string dir = env != nullptr && *env != '\0' ? env : INFERNIX_FIXTURES_DIR;
    return Tokenizer::Load(DirFileSet(dir + "/tokenizers/qwen3"));
  }();
  return *tokenizer;
}

inline const std::shared_ptr<const TokenVocabulary>& Vocab() {
  static const std::shared_ptr<const TokenVocabulary> vocab = TokenVocabulary::FromTokenizer(Qwen());
  return vocab;
}

}  // namespace infernix::grammar::testing
