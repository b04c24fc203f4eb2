// Reading a Hugging Face tokenizer folder into a TokenizerSpec: "tokenizer.json" (normalizer,
// pre_tokenizer, model, decoder, added_tokens) and, when present, "tokenizer_config.json" (the named
// special tokens, split_special_tokens). Options Infernix does not implement are refused with
// Error(kUnsupported) rather than ignored; see docs/tokenizer.md for what is ignored on purpose.
#pragma once

#include "base/file_set.h"
#include "tokenizer/tokenizer.h"

namespace infernix {

// Throws Error(kNotFound) when tokenizer.json is missing, Error(kInvalidFormat) for malformed JSON or
// a field of the wrong type, Error(kUnsupported) for a model / normalizer / pre-tokenizer / decoder
// that is not implemented; messages name the file and the field.
TokenizerSpec ReadTokenizerSpec(const FileSet& files);

}  // namespace infernix
