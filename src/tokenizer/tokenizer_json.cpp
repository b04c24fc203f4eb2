#include "tokenizer/tokenizer_json.h"

#include <cstdint>
#include <limits>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "tokenizer/pre_tokenizer.h"

namespace infernix {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kTokenizerFile = "tokenizer.json";
constexpr std::string_view kConfigFile = "tokenizer_config.json";

// Typed access to the fields of one JSON file; every error names the file and the field path.
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  [[noreturn]] void Invalid(std::string_view field, std::string_view expected, const Json& found) const {
    std::string shown = found.dump();
    if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
    ThrowError(ErrorCode::kInvalidFormat, "{}: field '{}': expected {}, found {} {}", path_, field, expected,
               found.type_name(), shown);
  }
  [[noreturn]] void Unsupported(std::string_view field, std::string_view found, std::string_view supported) const {
    ThrowError(ErrorCode::kUnsupported, "{}: field '{}' is {}; Infernix supports {}", path_, field, found, supported);
  }

  // The member `key` of `object` (which must be an object), or nullptr when absent or null.
  const Json* Find(const Json& object, std::string_view field, const char* key) const {
    if (!object.is_object()) Invalid(field, "an object", object);
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
  }
  const Json& Require(const Json& object, std::string_view field, const char* key) const {
    const Json* value = Find(object, field, key);
    if (value == nullptr) ThrowError(ErrorCode::kInvalidFormat, "{}: field '{}' is missing", path_, Join(field, key));
    return *value;
  }
  bool Bool(const Json& object, std::string_view field, const char* key, bool fallback) const {
    const Json* value = Find(object, field, key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) Invalid(Join(field, key), "a boolean", *value);
    return value->get<bool>();
  }
  std::string String(const Json& value, std::string_view field) const {
    if (!value.is_string()) Invalid(field, "a string", value);
    return value.get<std::string>();
  }
  std::optional<std::string> OptString(const Json& object, std::string_view field, const char* key) const {
    const Json* value = Find(object, field, key);
    if (value == nullptr) return std::nullopt;
    return String(*value, Join(field, key));
  }
  int32_t Id(const Json& value, std::string_view field) const {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        value.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      Invalid(field, "a token id (an integer in [0, 2^31))", value);
    }
    return static_cast<int32_t>(value.get<int64_t>());
  }
  static std::string Join(std::string_view field, std::string_view key) {
    return field.empty() ? std::string(key) : fmt::format("{}.{}", field, key);
  }

 private:
  std::string path_;
};

Json ParseJsonFile(const FileSet& files, std::string_view name) {
  const std::shared_ptr<const Blob> blob = files.Open(name);
  const std::string_view text = blob->text();
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    ThrowError(ErrorCode::kInvalidFormat, "{}: not valid JSON: {}", files.DisplayPath(name), e.what());
  }
}

NormalizerKind ReadNormalizer(const Reader& r, const Json& normalizer, const std::string& field) {
  const std::string type = r.String(r.Require(normalizer, field, "type"), field + ".type");
  if (type == "NFC") return NormalizerKind::kNfc;
  if (type == "Sequence") {
    NormalizerKind kind = NormalizerKind::kNone;
    const Json& list = r.Require(normalizer, field, "normalizers");
    if (!list.is_array()) r.Invalid(field + ".normalizers", "an array", list);
    for (size_t i = 0; i < list.size(); ++i) kind = ReadNormalizer(r, list[i], fmt::format("{}.normalizers[{}]", field, i));
    return kind;
  }
  r.Unsupported(field + ".type", fmt::format("'{}'", type), "only NFC normalization");
}

// Appends the split patterns of a pre-tokenizer (recursively for Sequence) to spec->split_patterns;
// *byte_level becomes true at the ByteLevel step, which must come last.
void ReadPreTokenizer(const Reader& r, const Json& pre, const std::string& field, TokenizerSpec* spec,
                      bool* byte_level) {
  const std::string type = r.String(r.Require(pre, field, "type"), field + ".type");
  if (*byte_level) r.Unsupported(field, fmt::format("a '{}' step after ByteLevel", type), "ByteLevel as the last step");
  if (type == "Sequence") {
    const Json& list = r.Require(pre, field, "pretokenizers");
    if (!list.is_array()) r.Invalid(field + ".pretokenizers", "an array", list);
    for (size_t i = 0; i < list.size(); ++i) {
      ReadPreTokenizer(r, list[i], fmt::format("{}.pretokenizers[{}]", field, i), spec, byte_level);
    }
  } else if (type == "Split") {
    const Json& pattern = r.Require(pre, field, "pattern");
    if (const Json* regex = r.Find(pattern, field + ".pattern", "Regex")) {
      spec->split_patterns.push_back(r.String(*regex, field + ".pattern.Regex"));
    } else if (const Json* literal = r.Find(pattern, field + ".pattern", "String")) {
      spec->split_patterns.push_back(EscapeRegexLiteral(r.String(*literal, field + ".pattern.String")));
    } else {
      r.Invalid(field + ".pattern", "{\"Regex\": ...} or {\"String\": ...}", pattern);
    }
    const std::string behavior = r.String(r.Require(pre, field, "behavior"), field + ".behavior");
    if (behavior != "Isolated") r.Unsupported(field + ".behavior", fmt::format("'{}'", behavior), "'Isolated'");
    if (r.Bool(pre, field, "invert", false)) r.Unsupported(field + ".invert", "true", "false");
  } else if (type == "ByteLevel") {
    if (r.Bool(pre, field, "add_prefix_space", true)) r.Unsupported(field + ".add_prefix_space", "true", "false");
    if (r.Bool(pre, field, "use_regex", true)) spec->split_patterns.emplace_back(kGpt2SplitPattern);
    *byte_level = true;
  } else {
    r.Unsupported(field + ".type", fmt::format("'{}'", type), "Sequence, Split and ByteLevel pre-tokenizers");
  }
}

void ReadModel(const Reader& r, const Json& model, TokenizerSpec* spec) {
  const std::optional<std::string> type = r.OptString(model, "model", "type");
  if (type ? *type != "BPE" : r.Find(model, "model", "merges") == nullptr) {
    r.Unsupported("model.type", type ? fmt::format("'{}'", *type) : "absent (and there are no merges)",
                  "only 'BPE' models");
  }
  if (const Json* dropout = r.Find(model, "model", "dropout")) {
    if (!dropout->is_number()) r.Invalid("model.dropout", "a number or null", *dropout);
    if (dropout->get<double>() != 0.0) r.Unsupported("model.dropout", dropout->dump(), "null (no BPE dropout)");
  }
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const std::optional<std::string> value = r.OptString(model, "model", affix);
    if (value && !value->empty()) r.Unsupported(Reader::Join("model", affix), fmt::format("'{}'", *value), "\"\" or null");
  }
  spec->bpe.unk_token = r.OptString(model, "model", "unk_token");
  spec->bpe.fuse_unk = r.Bool(model, "model", "fuse_unk", false);
  spec->bpe.byte_fallback = r.Bool(model, "model", "byte_fallback", false);
  spec->bpe.ignore_merges = r.Bool(model, "model", "ignore_merges", false);

  const Json& vocab = r.Require(model, "model", "vocab");
  if (!vocab.is_object()) r.Invalid("model.vocab", "an object of token: id", vocab);
  spec->vocab.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    spec->vocab.emplace_back(token, r.Id(id, fmt::format("model.vocab[\"{}\"]", token)));
  }
  const Json& merges = r.Require(model, "model", "merges");
  if (!merges.is_array()) r.Invalid("model.merges", "an array", merges);
  spec->merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const Json& merge = merges[i];
    if (merge.is_string()) {  // "left right": exactly one space, as Hugging Face requires
      const std::string& text = merge.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        r.Invalid(fmt::format("model.merges[{}]", i), "\"left right\" (two tokens, one space)", merge);
      }
      spec->merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      spec->merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      r.Invalid(fmt::format("model.merges[{}]", i), "\"left right\" or [\"left\", \"right\"]", merge);
    }
  }
}

void ReadAddedTokens(const Reader& r, const Json& list, TokenizerSpec* spec) {
  if (!list.is_array()) r.Invalid("added_tokens", "an array", list);
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string field = fmt::format("added_tokens[{}]", i);
    const Json& item = list[i];
    AddedToken token;
    token.id = r.Id(r.Require(item, field, "id"), field + ".id");
    token.content = r.String(r.Require(item, field, "content"), field + ".content");
    token.special = r.Bool(item, field, "special", false);
    token.lstrip = r.Bool(item, field, "lstrip", false);
    token.rstrip = r.Bool(item, field, "rstrip", false);
    token.normalized = r.Bool(item, field, "normalized", !token.special);
    token.single_word = r.Bool(item, field, "single_word", false);
    spec->added_tokens.push_back(std::move(token));
  }
}

// A named special token of tokenizer_config.json: a string, null, or an AddedToken object.
std::optional<std::string> ReadNamedToken(const Reader& r, const Json& config, const char* key) {
  const Json* value = r.Find(config, "", key);
  if (value == nullptr) return std::nullopt;
  if (value->is_object()) return r.String(r.Require(*value, key, "content"), Reader::Join(key, "content"));
  return r.String(*value, key);
}

void ReadConfig(const FileSet& files, TokenizerSpec* spec) {
  const Reader r(files.DisplayPath(kConfigFile));
  const Json config = ParseJsonFile(files, kConfigFile);
  if (!config.is_object()) r.Invalid("(top level)", "an object", config);
  SpecialTokens& named = spec->special_tokens;
  named.bos_token = ReadNamedToken(r, config, "bos_token");
  named.eos_token = ReadNamedToken(r, config, "eos_token");
  named.pad_token = ReadNamedToken(r, config, "pad_token");
  named.unk_token = ReadNamedToken(r, config, "unk_token");
  spec->split_special_tokens = r.Bool(config, "", "split_special_tokens", false);
}

}  // namespace

TokenizerSpec ReadTokenizerSpec(const FileSet& files) {
  TokenizerSpec spec;
  spec.source = files.DisplayPath(kTokenizerFile);
  const Reader r(spec.source);
  {
    Json root = ParseJsonFile(files, kTokenizerFile);
    if (!root.is_object()) r.Invalid("(top level)", "an object", root);
    if (const Json* normalizer = r.Find(root, "", "normalizer")) {
      spec.normalizer = ReadNormalizer(r, *normalizer, "normalizer");
    }
    bool byte_level = false;
    if (const Json* pre = r.Find(root, "", "pre_tokenizer")) ReadPreTokenizer(r, *pre, "pre_tokenizer", &spec, &byte_level);
    if (!byte_level) r.Unsupported("pre_tokenizer", "without a ByteLevel step", "only byte-level BPE tokenizers");
    const Json* decoder = r.Find(root, "", "decoder");
    const std::optional<std::string> decoder_type = decoder ? r.OptString(*decoder, "decoder", "type") : std::nullopt;
    if (decoder_type != "ByteLevel") {
      r.Unsupported("decoder.type", decoder_type ? fmt::format("'{}'", *decoder_type) : "absent", "'ByteLevel'");
    }
    ReadModel(r, r.Require(root, "", "model"), &spec);
    if (const Json* added = r.Find(root, "", "added_tokens")) ReadAddedTokens(r, *added, &spec);
  }
  if (files.Exists(kConfigFile)) ReadConfig(files, &spec);
  return spec;
}

}  // namespace infernix
