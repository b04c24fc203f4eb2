// libFuzzer target: arbitrary bytes as a JSON schema (the `response_format` / strict-tool path of the
// APIs): parsed, converted to a grammar (JsonSchemaGrammar, with its limits, $refs, patterns through the
// regex engine), then matched token by token over a small vocabulary. At every step the mask must agree
// with AcceptToken on every token, and rolling a token back must restore the mask. An Error from the
// conversion is an accepted outcome; a crash, a sanitizer report, a failed check, another exception or a
// disagreement is a bug. The tokens taken are chosen by the input's last bytes, so the fuzzer steers the
// walk too. Built by scripts/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "grammar/json_schema.h"
#include "grammar/token_matcher.h"

namespace {

using infernix::grammar::TokenMatcher;
using infernix::grammar::TokenVocabulary;

// Every single byte, pieces that JSON documents are made of, and an end-of-text token (last id).
const std::shared_ptr<const TokenVocabulary>& Vocabulary() {
  static const std::shared_ptr<const TokenVocabulary> vocab = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
    for (const char* piece :
         {"{\"", "\":",   "\": ", ", \"", "\"}", "}",  "true", "false", "null", "12",          "-0.5",
          "1e3", "\\u00", "\\n",  "ab",   "  ",  "\n", "[{",   "}]",    "é",    "\xe4\xb8\xad"})
      bytes.emplace_back(piece);
    bytes.emplace_back("<eos>");
    std::vector<bool> special(bytes.size(), false);
    special.back() = true;
    return std::make_shared<const TokenVocabulary>(std::move(bytes), std::move(special));
  }();
  return vocab;
}

bool Allowed(const std::vector<uint32_t>& mask, int32_t id) {
  return ((mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1) != 0;
}

[[noreturn]] void Fail(const char* what, int32_t id, size_t step) {
  std::fprintf(stderr, "schema_fuzz: %s (token %d, step %zu)\n", what, id, step);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  std::unique_ptr<TokenMatcher> matcher;
  try {
    auto grammar =
        std::make_shared<const infernix::grammar::CompiledGrammar>(infernix::grammar::JsonSchemaGrammar(schema));
    const auto eos = static_cast<int32_t>(Vocabulary()->size() - 1);
    matcher = std::make_unique<TokenMatcher>(std::move(grammar), Vocabulary(), std::vector<int32_t>{eos});
  } catch (const infernix::Error&) {
    return 0;
  }
  const auto vocab = static_cast<int32_t>(Vocabulary()->size());
  std::vector<uint32_t> mask(matcher->mask_words()), again(matcher->mask_words());
  for (size_t step = 0; step < 16; ++step) {
    matcher->FillNextTokenBitmask(mask);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < vocab; ++id) {
      const bool accepted = matcher->AcceptToken(id);
      if (accepted != Allowed(mask, id))
        Fail(accepted ? "accepted a token the mask refused" : "refused an allowed token", id, step);
      if (!accepted) continue;
      allowed.push_back(id);
      matcher->Rollback(1);
      matcher->FillNextTokenBitmask(again);
      if (again != mask) Fail("the mask changed after a rollback", id, step);
    }
    if (allowed.empty() || matcher->IsTerminated()) break;
    const uint8_t pick = size > step ? data[size - 1 - step] : 0;
    if (!matcher->AcceptToken(allowed[pick % allowed.size()]))
      Fail("an allowed token was refused", allowed[pick % allowed.size()], step);
  }
  return 0;
}
