#include "tokenizer/stream_decoder.h"

#include "tokenizer/utf8.h"

namespace infernix {

std::string StreamDecoder::Push(int32_t id) {
  const std::string_view bytes = tokenizer_.TokenBytes(id);  // throws before anything changes
  if (skip_special_ && tokenizer_.IsSpecial(id)) return {};
  pending_.append(bytes);
  std::string out;
  const size_t consumed = utf8::AppendLossy(pending_, /*final=*/false, &out);
  pending_.erase(0, consumed);
  return out;
}

std::string StreamDecoder::Flush() {
  std::string out;
  utf8::AppendLossy(pending_, /*final=*/true, &out);
  pending_.clear();
  return out;
}

}  // namespace infernix
