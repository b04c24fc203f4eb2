#include "tokenizer/tokenizer_gguf.h"

#include <string_view>

#include "base/error.h"

namespace infernix {
namespace {

// Qwen's pre-tokenizer (tokenizer.json: a Split with this regex, Isolated, then ByteLevel without its own
// regex), which llama.cpp's converter records as tokenizer.ggml.pre = "qwen2" (Qwen1.5 to Qwen3).
constexpr std::string_view kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// llama.cpp's token types (llama_token_type / gguf-py TokenType).
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

const std::vector<std::string>& StringArray(const GgufFile& f, std::string_view key) {
  const GgufArray* a = f.GetArray(key);
  if (a == nullptr) ThrowError(ErrorCode::kInvalidFormat, "{}: missing metadata key {}", f.path(), key);
  const auto* v = std::get_if<std::vector<std::string>>(&a->values);
  if (v == nullptr)
    ThrowError(ErrorCode::kInvalidFormat, "{}: metadata key {} is an array of {}, expected an array of strings",
               f.path(), key, GgufTypeName(a->element_type));
  return *v;
}

// A special token id key: nullopt when absent; kInvalidFormat when outside the token list.
std::optional<int64_t> TokenId(const GgufFile& f, std::string_view key, size_t n_tokens) {
  std::optional<int64_t> id = f.GetInt(key);
  if (id && (*id < 0 || static_cast<uint64_t>(*id) >= n_tokens))
    ThrowError(ErrorCode::kInvalidFormat, "{}: metadata key {} is {}, outside the {} tokens of tokenizer.ggml.tokens",
               f.path(), key, *id, n_tokens);
  return id;
}

std::string TokenText(const GgufFile& f, std::string_view key, std::optional<int64_t> id) {
  if (!id) return "";
  return StringArray(f, "tokenizer.ggml.tokens")[static_cast<size_t>(*id)];
}

}  // namespace

TokenizerSpec ReadGgufTokenizerSpec(const GgufFile& f) {
  TokenizerSpec spec;
  spec.source = f.path() + " (tokenizer.ggml.*)";
  std::optional<std::string> model = f.GetString("tokenizer.ggml.model");
  if (!model) ThrowError(ErrorCode::kInvalidFormat, "{}: missing metadata key tokenizer.ggml.model", f.path());
  if (*model != "gpt2")
    ThrowError(ErrorCode::kUnsupported,
               "{}: tokenizer.ggml.model is \"{}\"; only \"gpt2\" (byte-level BPE) tokenizers are supported",
               f.path(), *model);
  std::string pre = f.GetString("tokenizer.ggml.pre").value_or("default");
  if (pre == "qwen2") {
    spec.normalizer = NormalizerKind::kNfc;
    spec.split_patterns.emplace_back(kQwen2SplitPattern);
  } else {
    ThrowError(ErrorCode::kUnsupported,
               "{}: tokenizer.ggml.pre is \"{}\"; the supported pre-tokenizers are: qwen2", f.path(), pre);
  }

  const std::vector<std::string>& tokens = StringArray(f, "tokenizer.ggml.tokens");
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    ThrowError(ErrorCode::kInvalidFormat, "{}: tokenizer.ggml.tokens has {} tokens, too many", f.path(),
               tokens.size());
  std::vector<int64_t> types(tokens.size(), kNormal);
  if (const GgufArray* a = f.GetArray("tokenizer.ggml.token_type")) {
    const auto* v = std::get_if<std::vector<int64_t>>(&a->values);
    if (v == nullptr)
      ThrowError(ErrorCode::kInvalidFormat,
                 "{}: metadata key tokenizer.ggml.token_type is an array of {}, expected integers", f.path(),
                 GgufTypeName(a->element_type));
    if (v->size() != tokens.size())
      ThrowError(ErrorCode::kInvalidFormat,
                 "{}: tokenizer.ggml.token_type has {} entries but tokenizer.ggml.tokens has {}", f.path(), v->size(),
                 tokens.size());
    types = *v;
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto id = static_cast<int32_t>(i);
    switch (types[i]) {
      case kNormal:
      case kUnknown:
      case kByte: spec.vocab.emplace_back(tokens[i], id); break;
      case kControl:
      case kUserDefined: {
        AddedToken t;
        t.id = id;
        t.content = tokens[i];
        t.special = types[i] == kControl;
        t.normalized = false;
        spec.added_tokens.push_back(std::move(t));
        break;
      }
      case kUnused: break;
      default:
        ThrowError(ErrorCode::kInvalidFormat,
                   "{}: tokenizer.ggml.token_type[{}] is {}, expected 1 to 6 (normal, unknown, control, "
                   "user-defined, unused, byte)",
                   f.path(), i, types[i]);
    }
  }

  if (f.Find("tokenizer.ggml.merges") != nullptr) {
    const std::vector<std::string>& merges = StringArray(f, "tokenizer.ggml.merges");
    spec.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const std::string& m = merges[i];
      size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
      if (space == std::string::npos || space + 1 >= m.size())
        ThrowError(ErrorCode::kInvalidFormat, "{}: tokenizer.ggml.merges[{}] is \"{}\", expected \"<left> <right>\"",
                   f.path(), i, m);
      spec.merges.emplace_back(m.substr(0, space), m.substr(space + 1));
    }
  }

  SpecialTokens& s = spec.special_tokens;
  auto text = [&](std::string_view key) -> std::optional<std::string> {
    std::optional<int64_t> id = TokenId(f, key, tokens.size());
    if (!id) return std::nullopt;
    return tokens[static_cast<size_t>(*id)];
  };
  s.bos_token = text("tokenizer.ggml.bos_token_id");
  s.eos_token = text("tokenizer.ggml.eos_token_id");
  s.pad_token = text("tokenizer.ggml.padding_token_id");
  s.unk_token = text("tokenizer.ggml.unknown_token_id");
  return spec;
}

GgufTokenizerSummary SummarizeGgufTokenizer(const GgufFile& f) {
  GgufTokenizerSummary s;
  s.model = f.GetString("tokenizer.ggml.model").value_or("");
  s.pre = f.GetString("tokenizer.ggml.pre").value_or("");
  if (const GgufArray* a = f.GetArray("tokenizer.ggml.tokens")) s.n_tokens = static_cast<int64_t>(a->size());
  if (const GgufArray* a = f.GetArray("tokenizer.ggml.merges")) s.n_merges = static_cast<int64_t>(a->size());
  s.bos_id = f.GetInt("tokenizer.ggml.bos_token_id");
  s.eos_id = f.GetInt("tokenizer.ggml.eos_token_id");
  s.pad_id = f.GetInt("tokenizer.ggml.padding_token_id");
  s.unk_id = f.GetInt("tokenizer.ggml.unknown_token_id");
  s.add_bos = f.GetBool("tokenizer.ggml.add_bos_token");
  s.add_eos = f.GetBool("tokenizer.ggml.add_eos_token");
  s.chat_template = f.GetString("tokenizer.chat_template");
  return s;
}

std::optional<GgufChatTemplateSource> ReadGgufChatTemplate(const GgufFile& f) {
  std::optional<std::string> source = f.GetString("tokenizer.chat_template");
  if (!source) return std::nullopt;
  GgufChatTemplateSource t;
  t.source = std::move(*source);
  if (f.Find("tokenizer.ggml.tokens") != nullptr) {
    size_t n = StringArray(f, "tokenizer.ggml.tokens").size();
    t.bos_token = TokenText(f, "tokenizer.ggml.bos_token_id", TokenId(f, "tokenizer.ggml.bos_token_id", n));
    t.eos_token = TokenText(f, "tokenizer.ggml.eos_token_id", TokenId(f, "tokenizer.ggml.eos_token_id", n));
  }
  return t;
}

}  // namespace infernix
