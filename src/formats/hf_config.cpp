#include "formats/hf_config.h"

#include <algorithm>
#include <cmath>

#include <limits>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace infernix {
namespace {

using nlohmann::json;

// Far above any real model (the largest have ~100 layers); per-layer tables are built before weights are read.
constexpr int64_t kMaxLayers = 4096;

// Typed field access that names the file and field in every error.
class Fields {
 public:
  Fields(const json& obj, std::string path, std::string prefix)
      : obj_(obj), path_(std::move(path)), prefix_(std::move(prefix)) {}

  bool Has(const char* key) const { return obj_.contains(key) && !obj_[key].is_null(); }
  const json& Raw(const char* key) const { return obj_[key]; }

  [[noreturn]] void Fail(const char* key, std::string_view expected) const {
    std::string got = Has(key) ? obj_[key].dump() : "nothing";
    if (got.size() > 60) got = got.substr(0, 57) + "...";
    ThrowError(ErrorCode::kInvalidFormat, "{}: field '{}{}': expected {}, got {}", path_, prefix_, key, expected, got);
  }

  // Sizes and counts end up in int (and loops and allocations), so they stop at INT32_MAX.
  int64_t Int(const char* key, std::optional<int64_t> fallback = std::nullopt, int64_t min = 1,
              int64_t max = std::numeric_limits<int32_t>::max()) const {
    if (!Has(key)) {
      if (fallback) return *fallback;
      Fail(key, "an integer");
    }
    const json& v = obj_[key];
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max)) ||
        v.get<int64_t>() < min || v.get<int64_t>() > max)
      Fail(key, fmt::format("an integer in [{}, {}]", min, max));
    return v.get<int64_t>();
  }
  double Number(const char* key, double fallback) const {
    if (!Has(key)) return fallback;
    if (!obj_[key].is_number()) Fail(key, "a number");
    return obj_[key].get<double>();
  }
  bool Bool(const char* key, bool fallback) const {
    if (!Has(key)) return fallback;
    if (!obj_[key].is_boolean()) Fail(key, "true or false");
    return obj_[key].get<bool>();
  }
  std::string String(const char* key, std::string fallback) const {
    if (!Has(key)) return fallback;
    if (!obj_[key].is_string()) Fail(key, "a string");
    return obj_[key].get<std::string>();
  }
  std::vector<int64_t> IntList(const char* key) const {
    std::vector<int64_t> out;
    if (!Has(key)) return out;
    if (!obj_[key].is_array()) Fail(key, "a list of integers");
    for (const auto& v : obj_[key]) {
      if (!v.is_number_integer()) Fail(key, "a list of integers");
      out.push_back(v.get<int64_t>());
    }
    return out;
  }
  const std::string& path() const { return path_; }
  const std::string& prefix() const { return prefix_; }

 private:
  const json& obj_;
  std::string path_;
  std::string prefix_;
};

Architecture ArchitectureFromModelType(const std::string& type, const std::string& path) {
  if (type == "qwen3") return Architecture::kQwen3;
  if (type == "qwen3_moe") return Architecture::kQwen3Moe;
  if (type == "qwen3_next") return Architecture::kQwen3Next;
  if (type == "qwen3_5" || type == "qwen3_5_text") return Architecture::kQwen35;
  if (type == "qwen3_5_moe" || type == "qwen3_5_moe_text") return Architecture::kQwen35Moe;
  ThrowError(ErrorCode::kUnsupported,
             "{}: model_type '{}' is not supported (supported: qwen3, qwen3_moe, qwen3_next, qwen3_5, qwen3_5_moe)",
             path, type);
}

// RoPE from rope_parameters (5.x) or rope_theta / rope_scaling / partial_rotary_factor (4.x).
RopeConfig ParseRope(const Fields& f, int head_dim) {
  RopeConfig rope;
  rope.theta = f.Number("rope_theta", 10000.0);
  rope.partial_rotary_factor = f.Number("partial_rotary_factor", 1.0);
  std::string type = "default";
  std::string type_field = "rope_type";
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!f.Has(key)) continue;
    if (!f.Raw(key).is_object()) f.Fail(key, "an object");
    Fields r(f.Raw(key), f.path(), f.prefix() + key + ".");
    if (r.Has("rope_type") || r.Has("type")) type_field = f.prefix() + key + (r.Has("rope_type") ? ".rope_type" : ".type");
    rope.theta = r.Number("rope_theta", rope.theta);
    rope.partial_rotary_factor = r.Number("partial_rotary_factor", rope.partial_rotary_factor);
    type = r.String("rope_type", r.String("type", type));
    rope.factor = r.Number("factor", rope.factor);
    rope.original_max_position_embeddings =
        r.Int("original_max_position_embeddings", rope.original_max_position_embeddings, 0);
    rope.beta_fast = r.Number("beta_fast", rope.beta_fast);
    rope.beta_slow = r.Number("beta_slow", rope.beta_slow);
    rope.attention_factor = r.Number("attention_factor", rope.attention_factor);
    rope.truncate = r.Bool("truncate", rope.truncate);
    if (r.Has("mrope_section")) {
      rope.mrope_section.clear();
      for (int64_t v : r.IntList("mrope_section")) rope.mrope_section.push_back(static_cast<int>(v));
    }
    rope.mrope_interleaved = r.Bool("mrope_interleaved", rope.mrope_interleaved);
  }
  if (type == "default" || type == "mrope") {
    rope.type = RopeType::kDefault;
  } else if (type == "linear") {
    rope.type = RopeType::kLinear;
  } else if (type == "yarn") {
    rope.type = RopeType::kYarn;
  } else {
    ThrowError(ErrorCode::kUnsupported, "{}: field '{}': rope type '{}' is not supported (default, linear, yarn)",
               f.path(), type_field, type);
  }
  if (rope.theta <= 0) ThrowError(ErrorCode::kInvalidFormat, "{}: rope_theta must be positive, got {}", f.path(), rope.theta);
  if (rope.partial_rotary_factor <= 0 || rope.partial_rotary_factor > 1)
    ThrowError(ErrorCode::kInvalidFormat, "{}: partial_rotary_factor must be in (0, 1], got {}", f.path(),
               rope.partial_rotary_factor);
  rope.rotary_dim = static_cast<int>(head_dim * rope.partial_rotary_factor);
  if (rope.rotary_dim < 2 || rope.rotary_dim % 2 != 0)
    ThrowError(ErrorCode::kInvalidFormat, "{}: rotary dimension {} (head_dim {} x partial_rotary_factor {}) must be even",
               f.path(), rope.rotary_dim, head_dim, rope.partial_rotary_factor);
  if ((rope.type == RopeType::kLinear || rope.type == RopeType::kYarn) && rope.factor <= 0)
    ThrowError(ErrorCode::kInvalidFormat, "{}: rope scaling factor must be positive, got {}", f.path(), rope.factor);
  return rope;
}

std::vector<LayerType> ParseLayerTypes(const Fields& f, const ModelConfig& c) {
  std::vector<LayerType> types;
  if (f.Has("layer_types")) {
    const json& lt = f.Raw("layer_types");
    if (!lt.is_array()) f.Fail("layer_types", "a list of strings");
    for (const auto& v : lt) {
      std::string s = v.is_string() ? v.get<std::string>() : v.dump();
      if (s == "full_attention") {
        types.push_back(LayerType::kFullAttention);
      } else if (s == "linear_attention" && c.is_hybrid()) {
        types.push_back(LayerType::kLinearAttention);
      } else {
        ThrowError(ErrorCode::kUnsupported, "{}: layer_types: layer type '{}' is not supported for {}", f.path(), s,
                   c.model_type);
      }
    }
    if (static_cast<int>(types.size()) != c.num_layers)
      ThrowError(ErrorCode::kInvalidFormat, "{}: layer_types has {} entries but num_hidden_layers is {}", f.path(),
                 types.size(), c.num_layers);
    return types;
  }
  int64_t interval = c.is_hybrid() ? f.Int("full_attention_interval", 4) : 1;
  for (int i = 0; i < c.num_layers; ++i)
    types.push_back((i + 1) % interval == 0 ? LayerType::kFullAttention : LayerType::kLinearAttention);
  return types;
}

// quantization_config (top level, or inside text_config): FP8 with 128x128 weight blocks, as Qwen
// publishes its FP8 checkpoints, is the one scheme supported; anything else is refused by name.
// Returns the block size (0: no quantization_config).
int ParseQuantization(const json& root, const json& text, const std::string& path) {
  const json* q = nullptr;
  std::string prefix = "quantization_config.";
  if (root.contains("quantization_config") && !root["quantization_config"].is_null()) {
    q = &root["quantization_config"];
  } else if (&text != &root && text.contains("quantization_config") && !text["quantization_config"].is_null()) {
    q = &text["quantization_config"];
    prefix = "text_config.quantization_config.";
  }
  if (q == nullptr) return 0;
  if (!q->is_object())
    ThrowError(ErrorCode::kInvalidFormat, "{}: field '{}': expected an object, got {}", path,
               prefix.substr(0, prefix.size() - 1), q->dump());
  Fields f(*q, path, prefix);
  std::string method = f.String("quant_method", "");
  if (method != "fp8")
    ThrowError(ErrorCode::kUnsupported,
               "{}: field '{}quant_method': quantization method '{}' is not supported (supported: fp8 with "
               "weight_block_size [128, 128]; GGUF files for other quantizations)",
               path, prefix, method);
  std::string fmt = f.String("fmt", "e4m3");
  if (fmt != "e4m3")
    ThrowError(ErrorCode::kUnsupported, "{}: field '{}fmt': FP8 format '{}' is not supported (e4m3)", path, prefix, fmt);
  std::string activations = f.String("activation_scheme", "dynamic");
  if (activations != "dynamic")
    ThrowError(ErrorCode::kUnsupported, "{}: field '{}activation_scheme': '{}' is not supported (dynamic)", path,
               prefix, activations);
  if (!f.Has("weight_block_size"))
    ThrowError(ErrorCode::kUnsupported,
               "{}: field '{}weight_block_size' is missing: per-tensor FP8 scales are not supported (blocks of "
               "[128, 128])",
               path, prefix);
  std::vector<int64_t> block = f.IntList("weight_block_size");
  if (block != std::vector<int64_t>{128, 128})
    ThrowError(ErrorCode::kUnsupported, "{}: field '{}weight_block_size': {} is not supported (only [128, 128])", path,
               prefix, f.Raw("weight_block_size").dump());
  return 128;
}

}  // namespace

std::string_view ArchitectureName(Architecture arch) {
  switch (arch) {
    case Architecture::kQwen3: return "qwen3";
    case Architecture::kQwen3Moe: return "qwen3_moe";
    case Architecture::kQwen3Next: return "qwen3_next";
    case Architecture::kQwen35: return "qwen3_5";
    case Architecture::kQwen35Moe: return "qwen3_5_moe";
  }
  return "?";
}

int ModelConfig::CountLayers(LayerType type) const {
  return static_cast<int>(std::count(layer_types.begin(), layer_types.end(), type));
}

int ModelConfig::IndexWithinType(int layer) const {
  int index = 0;
  for (int i = 0; i < layer; ++i)
    if (layer_types[static_cast<size_t>(i)] == layer_types[static_cast<size_t>(layer)]) ++index;
  return index;
}

int64_t ModelConfig::ContextLimit() const {
  if (rope.type == RopeType::kDefault || !(rope.factor > 1.0)) return max_position_embeddings;
  const int64_t unscaled = rope.type == RopeType::kYarn && rope.original_max_position_embeddings > 0
                               ? rope.original_max_position_embeddings
                               : max_position_embeddings;
  return std::max(max_position_embeddings, static_cast<int64_t>(std::llround(static_cast<double>(unscaled) * rope.factor)));
}

int64_t ModelConfig::CheckedContextSize(int64_t requested, std::string_view label) const {
  const int64_t limit = ContextLimit();
  if (requested > limit)
    ThrowError(ErrorCode::kInvalidArgument,
               "{} exceeds the {} tokens the model is configured for (max_position_embeddings, or with RoPE scaling "
               "the scaled length)",
               label, limit);
  return requested > 0 ? requested : limit;
}

ModelConfig ParseModelConfig(std::string_view json_text, const std::string& path) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number beyond double
    ThrowError(ErrorCode::kInvalidFormat, "{}: malformed JSON: {}", path, e.what());
  }
  if (!root.is_object()) ThrowError(ErrorCode::kInvalidFormat, "{}: expected a JSON object", path);
  Fields outer(root, path, "");
  if (!outer.Has("model_type")) ThrowError(ErrorCode::kInvalidFormat, "{}: missing field 'model_type'", path);
  ModelConfig c;
  c.model_type = outer.String("model_type", "");
  c.arch = ArchitectureFromModelType(c.model_type, path);

  bool nested = root.contains("text_config") && root["text_config"].is_object();
  const json& text = nested ? root["text_config"] : root;
  Fields f(text, path, nested ? "text_config." : "");

  c.vocab_size = f.Int("vocab_size");
  c.hidden_size = f.Int("hidden_size");
  c.num_layers = static_cast<int>(f.Int("num_hidden_layers", std::nullopt, 1, kMaxLayers));
  c.num_heads = static_cast<int>(f.Int("num_attention_heads"));
  c.num_kv_heads = static_cast<int>(f.Int("num_key_value_heads", c.num_heads));
  c.head_dim = static_cast<int>(f.Int("head_dim", c.hidden_size / c.num_heads));
  c.rms_norm_eps = f.Number("rms_norm_eps", 1e-6);
  c.tie_word_embeddings = f.Bool("tie_word_embeddings", outer.Bool("tie_word_embeddings", false));
  c.max_position_embeddings = f.Int("max_position_embeddings", 32768);
  if (c.num_heads % c.num_kv_heads != 0)
    ThrowError(ErrorCode::kInvalidFormat, "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}",
               path, c.num_heads, c.num_kv_heads);
  if (f.String("hidden_act", "silu") != "silu")
    ThrowError(ErrorCode::kUnsupported, "{}: hidden_act '{}' is not supported (silu)", path, f.String("hidden_act", ""));
  if (f.Bool("attention_bias", false))
    ThrowError(ErrorCode::kUnsupported, "{}: attention_bias=true is not supported", path);
  if (f.Bool("use_sliding_window", false))
    ThrowError(ErrorCode::kUnsupported, "{}: use_sliding_window=true is not supported", path);
  c.rope = ParseRope(f, c.head_dim);
  c.layer_types = ParseLayerTypes(f, c);
  c.fp8_block_size = ParseQuantization(root, text, path);

  c.zero_centered_norm = c.is_hybrid();
  c.gated_attention = c.is_hybrid();

  bool has_moe = c.arch == Architecture::kQwen3Moe || c.arch == Architecture::kQwen3Next ||
                 c.arch == Architecture::kQwen35Moe;
  c.intermediate_size = f.Int("intermediate_size", 0, 0);  // checked below for layers with a dense MLP
  if (has_moe) {
    c.num_experts = static_cast<int>(f.Has("num_experts") ? f.Int("num_experts") : f.Int("num_local_experts"));
    c.num_experts_per_tok = static_cast<int>(f.Int("num_experts_per_tok"));
    if (c.num_experts_per_tok > c.num_experts)
      ThrowError(ErrorCode::kInvalidFormat, "{}: num_experts_per_tok {} exceeds num_experts {}", path,
                 c.num_experts_per_tok, c.num_experts);
    c.moe_intermediate_size = f.Int("moe_intermediate_size");
    c.norm_topk_prob = f.Bool("norm_topk_prob", c.arch != Architecture::kQwen3Moe);
    if (c.arch != Architecture::kQwen3Moe) c.shared_expert_intermediate_size = f.Int("shared_expert_intermediate_size", 0, 0);
  }
  int64_t sparse_step = has_moe && c.arch != Architecture::kQwen35Moe ? f.Int("decoder_sparse_step", 1) : 1;
  std::vector<int64_t> mlp_only = f.IntList("mlp_only_layers");
  for (int i = 0; i < c.num_layers; ++i) {
    bool moe = has_moe && std::find(mlp_only.begin(), mlp_only.end(), i) == mlp_only.end() &&
               (i + 1) % sparse_step == 0;
    c.mlp_types.push_back(moe ? MlpType::kMoe : MlpType::kDense);
    if (!moe && c.intermediate_size <= 0)
      ThrowError(ErrorCode::kInvalidFormat, "{}: layer {} has a dense MLP but intermediate_size is missing", path, i);
  }
  if (c.is_hybrid() && c.CountLayers(LayerType::kLinearAttention) > 0) {
    c.linear_num_key_heads = static_cast<int>(f.Int("linear_num_key_heads"));
    c.linear_num_value_heads = static_cast<int>(f.Int("linear_num_value_heads"));
    c.linear_key_head_dim = static_cast<int>(f.Int("linear_key_head_dim"));
    c.linear_value_head_dim = static_cast<int>(f.Int("linear_value_head_dim"));
    c.linear_conv_kernel_dim = static_cast<int>(f.Int("linear_conv_kernel_dim", 4));
    if (c.linear_num_value_heads % c.linear_num_key_heads != 0)
      ThrowError(ErrorCode::kInvalidFormat, "{}: linear_num_value_heads {} is not a multiple of linear_num_key_heads {}",
                 path, c.linear_num_value_heads, c.linear_num_key_heads);
  }
  return c;
}

ModelConfig LoadModelConfig(const FileSet& files) {
  return ParseModelConfig(ReadText(files, "config.json"), files.DisplayPath("config.json"));
}

GenerationDefaults LoadGenerationDefaults(const FileSet& files) {
  GenerationDefaults g;
  if (!files.Exists("generation_config.json")) return g;
  std::string path = files.DisplayPath("generation_config.json");
  json root;
  try {
    root = json::parse(ReadText(files, "generation_config.json"));
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number beyond double
    ThrowError(ErrorCode::kInvalidFormat, "{}: malformed JSON: {}", path, e.what());
  }
  if (!root.is_object()) ThrowError(ErrorCode::kInvalidFormat, "{}: expected a JSON object", path);
  Fields f(root, path, "");
  if (f.Has("eos_token_id")) {
    const json& e = root["eos_token_id"];
    auto id = [&](const json& v) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > std::numeric_limits<int32_t>::max())
        f.Fail("eos_token_id", "a token id or a list of them (integers in [0, 2147483647])");
      return static_cast<int32_t>(v.get<int64_t>());
    };
    if (e.is_array()) {
      for (const json& v : e) g.eos_token_ids.push_back(id(v));
    } else {
      g.eos_token_ids.push_back(id(e));
    }
  }
  g.do_sample = f.Bool("do_sample", false);
  g.temperature = f.Number("temperature", 1.0);
  g.top_p = f.Number("top_p", 1.0);
  g.min_p = f.Number("min_p", 0.0);
  g.top_k = static_cast<int>(f.Int("top_k", 0, 0));
  g.repetition_penalty = f.Number("repetition_penalty", 1.0);
  return g;
}

}  // namespace infernix
