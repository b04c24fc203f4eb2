// Reading the tokenizer (and the chat template's text) that llama.cpp's converter stores in a GGUF file
// under tokenizer.ggml.* / tokenizer.chat_template, as a TokenizerSpec equal to the one the model's
// tokenizer.json gives. Only byte-level BPE ("gpt2") with Qwen's pre-tokenizer is supported; anything
// else is Error(kUnsupported) naming the key and the value. See docs/tokenizer.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

namespace infernix {

// tokenizer.ggml.model must be "gpt2"; tokenizer.ggml.pre a name we map to split regexes ("qwen2");
// tokenizer.ggml.tokens / .merges ("a b" strings) / .token_type (llama.cpp's types: 1 normal, 2 unknown,
// 3 control, 4 user-defined, 5 unused, 6 byte): normal, unknown and byte tokens form the BPE vocabulary;
// control tokens become special added tokens and user-defined ones non-special added tokens (as HF's
// `special` flag, which the converter maps to control); unused tokens (the converter's "[PAD<id>]"
// fillers up to the embedding size) are left out, as tokenizer.json does not have them. The special
// token strings come from tokenizer.ggml.{bos,eos,padding,unknown}_token_id. Throws Error
// (kInvalidFormat / kUnsupported) naming the file and the key.
TokenizerSpec ReadGgufTokenizerSpec(const GgufFile& file);

// What inspect shows, without building the tokenizer. Absent keys stay empty / nullopt.
struct GgufTokenizerSummary {
  std::string model, pre;
  int64_t n_tokens = 0, n_merges = 0;
  std::optional<int64_t> bos_id, eos_id, pad_id, unk_id;
  std::optional<bool> add_bos, add_eos;
  std::optional<std::string> chat_template;
};
GgufTokenizerSummary SummarizeGgufTokenizer(const GgufFile& file);

// The chat template's source (tokenizer.chat_template) and the special-token strings transformers
// passes to it (bos_token / eos_token: "" when the tokenizer has none); nullopt without a template.
struct GgufChatTemplateSource {
  std::string source, bos_token, eos_token;
};
std::optional<GgufChatTemplateSource> ReadGgufChatTemplate(const GgufFile& file);

}  // namespace infernix
