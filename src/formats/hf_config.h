// The hyper-parameters of a model, parsed from a Hugging Face config.json in every style real Qwen
// checkpoints use: transformers 4.x (top-level rope_theta / rope_scaling / partial_rotary_factor),
// 5.x (rope_parameters), the nested text_config of the Qwen3.5 conditional-generation models, and
// layer_types or full_attention_interval for hybrid layouts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/file_set.h"

namespace infernix {

enum class Architecture { kQwen3, kQwen3Moe, kQwen3Next, kQwen35, kQwen35Moe };
std::string_view ArchitectureName(Architecture arch);  // "qwen3", "qwen3_moe", ...

enum class LayerType { kFullAttention, kLinearAttention };
enum class MlpType { kDense, kMoe };

enum class RopeType { kDefault, kLinear, kYarn };

struct RopeConfig {
  RopeType type = RopeType::kDefault;
  double theta = 10000.0;
  double partial_rotary_factor = 1.0;
  int rotary_dim = 0;  // int(head_dim * partial_rotary_factor), even
  double factor = 1.0;                              // linear / yarn
  int64_t original_max_position_embeddings = 0;     // yarn
  double beta_fast = 32.0, beta_slow = 1.0;         // yarn
  double attention_factor = 0.0;                    // yarn; 0 = derive from factor
  bool truncate = true;                             // yarn
  // Multimodal RoPE sections (Qwen3.5). For text all three position streams are equal, so MRoPE
  // reduces to ordinary RoPE on the rotary dims; recorded for completeness.
  std::vector<int> mrope_section;
  bool mrope_interleaved = false;
};

struct ModelConfig {
  Architecture arch = Architecture::kQwen3;
  std::string model_type;  // as written (outer one for nested configs)

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int64_t intermediate_size = 0;  // dense MLP (0 when the model has none)
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 0;
  RopeConfig rope;

  std::vector<LayerType> layer_types;  // one per layer
  std::vector<MlpType> mlp_types;      // one per layer

  // Mixture of experts.
  int num_experts = 0;
  int num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;  // 0: no shared expert
  bool norm_topk_prob = false;

  // Gated DeltaNet (linear attention) layers.
  int linear_num_key_heads = 0;
  int linear_num_value_heads = 0;
  int linear_key_head_dim = 0;
  int linear_value_head_dim = 0;
  int linear_conv_kernel_dim = 0;
  // Order of the value heads in every per-value-head weight (in_proj_qkv's v rows, in_proj_z/b/a,
  // A_log, dt_bias, conv1d's v channels, out_proj's columns). false: grouped by key head (Hugging Face;
  // value head h uses key head h / (nv / nk)); true: tiled (llama.cpp's qwen35 GGUF files; value head h
  // uses key head h % nk). See backend/ops.h GdnHeadMapping.
  bool linear_value_heads_tiled = false;

  // Qwen3-Next / 3.5 conventions.
  bool zero_centered_norm = false;  // RMSNorm scales by (1 + w)
  bool gated_attention = false;     // q_proj also yields a sigmoid output gate

  // FP8 checkpoints (quantization_config {quant_method: fp8, fmt: e4m3, weight_block_size: [128, 128]}):
  // the edge of the square weight blocks that share one weight_scale_inv entry; 0 when the checkpoint
  // is not quantized. The loader repacks such weights into DType::kF8E4M3B128 (model/fp8_weights.h).
  int fp8_block_size = 0;

  // The longest context the model is configured for: max_position_embeddings, or with linear or YaRN RoPE
  // scaling the unscaled length (YaRN's original_max_position_embeddings, else max_position_embeddings) times
  // the factor where that is longer (Qwen3's YaRN recipe keeps max_position_embeddings at 40,960 and adds
  // factor 4 over 32,768: 131,072). The default and the bound of --ctx-size.
  int64_t ContextLimit() const;
  // A context size asked for, checked against ContextLimit(): `requested` when > 0, else the limit. Throws
  // Error(kInvalidArgument) "<label> exceeds the N tokens the model is configured for (...)" when it is longer.
  int64_t CheckedContextSize(int64_t requested, std::string_view label) const;
  bool is_hybrid() const { return arch == Architecture::kQwen3Next || arch == Architecture::kQwen35 || arch == Architecture::kQwen35Moe; }
  int CountLayers(LayerType type) const;
  // Index of layer `layer` among the layers of its own type (its KV-cache or state slot row).
  int IndexWithinType(int layer) const;
};

// Parses config.json text. `path` names the file in error messages. Errors: kInvalidFormat for
// malformed JSON or a field of the wrong type/value, kUnsupported for an unknown model_type or an
// option we do not implement (each naming the file and the field).
ModelConfig ParseModelConfig(std::string_view json_text, const std::string& path);
ModelConfig LoadModelConfig(const FileSet& files);

// From generation_config.json (optional file): end-of-sequence ids and sampling defaults.
struct GenerationDefaults {
  std::vector<int32_t> eos_token_ids;
  double temperature = 1.0, top_p = 1.0, min_p = 0.0, repetition_penalty = 1.0;
  int top_k = 0;
  bool do_sample = false;
};
GenerationDefaults LoadGenerationDefaults(const FileSet& files);

}  // namespace infernix
