#include "server/openai/openai_common.h"

namespace infernix {
namespace {

// A token that is part of a character is not valid UTF-8 on its own: the JSON writer replaces such
// bytes in `token`, and `bytes` carries them exactly.
Json TokenEntry(const Tokenizer& tokenizer, int32_t id, float logprob) {
  std::string_view bytes = TokenBytesOrNothing(tokenizer, id);
  Json b = Json::array();
  for (unsigned char c : bytes) b.push_back(static_cast<int>(c));
  return {{"token", std::string(bytes)}, {"logprob", logprob}, {"bytes", b}};
}

}  // namespace

std::string_view TokenBytesOrNothing(const Tokenizer& tokenizer, int32_t id) {
  return id >= 0 && id < tokenizer.vocab_size() ? tokenizer.TokenBytes(id) : std::string_view();
}

Json LogprobsContent(const Tokenizer& tokenizer, const std::vector<TokenOutput>& tokens) {
  Json out = Json::array();
  for (const auto& t : tokens) {
    Json e = TokenEntry(tokenizer, t.token, t.logprob);
    Json top = Json::array();
    for (const auto& alt : t.top_logprobs) top.push_back(TokenEntry(tokenizer, alt.token, alt.logprob));
    e["top_logprobs"] = top;
    out.push_back(std::move(e));
  }
  return out;
}

Json OpenAiUsage(const RunResult& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"total_tokens", r.prompt_tokens + r.completion_tokens}};
}

bool EndOpenAiStream(SseWriter& sse, const Json& head, bool include_usage, const RunResult& r) {
  if (include_usage) {
    Json j = head;
    j["choices"] = Json::array();
    j["usage"] = OpenAiUsage(r);
    sse.Data(j);
  }
  return sse.Raw("data: [DONE]\n\n");
}

}  // namespace infernix
