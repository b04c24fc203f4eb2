// Tests of the config.json / generation_config.json parser on every config style real Qwen checkpoints
// use: transformers 4.x and 5.x, dense, MoE, Qwen3-Next and the nested Qwen3.5 conditional-generation
// configs, RoPE scaling variants, and the errors for malformed or unsupported files.
#include "formats/hf_config.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/file_set.h"

namespace infernix {
namespace {

using nlohmann::json;

constexpr const char* kPath = "/models/test/config.json";

// Qwen3-8B as written by transformers 4.51.
constexpr std::string_view kQwen3Dense = R"({
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 12288,
  "max_position_embeddings": 40960,
  "max_window_layers": 36,
  "model_type": "qwen3",
  "num_attention_heads": 32,
  "num_hidden_layers": 36,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

// A small Qwen3-MoE in the 4.x style, with decoder_sparse_step 2 and mlp_only_layers [0].
constexpr std::string_view kQwen3Moe4 = R"({
  "architectures": ["Qwen3MoeForCausalLM"],
  "attention_bias": false,
  "decoder_sparse_step": 2,
  "head_dim": 64,
  "hidden_act": "silu",
  "hidden_size": 512,
  "intermediate_size": 1536,
  "max_position_embeddings": 40960,
  "mlp_only_layers": [0],
  "model_type": "qwen3_moe",
  "moe_intermediate_size": 256,
  "norm_topk_prob": true,
  "num_attention_heads": 8,
  "num_experts": 16,
  "num_experts_per_tok": 4,
  "num_hidden_layers": 6,
  "num_key_value_heads": 2,
  "output_router_logits": false,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000.0,
  "router_aux_loss_coef": 0.001,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_sliding_window": false,
  "vocab_size": 151936
})";

// Qwen3-30B-A3B-like in the transformers 5.x style: num_local_experts, rope_parameters, dtype.
constexpr std::string_view kQwen3Moe5 = R"({
  "architectures": ["Qwen3MoeForCausalLM"],
  "attention_bias": false,
  "dtype": "bfloat16",
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "intermediate_size": 6144,
  "max_position_embeddings": 40960,
  "model_type": "qwen3_moe",
  "moe_intermediate_size": 768,
  "num_attention_heads": 32,
  "num_local_experts": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 48,
  "num_key_value_heads": 4,
  "rms_norm_eps": 1e-06,
  "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
  "tie_word_embeddings": false,
  "transformers_version": "5.0.0",
  "vocab_size": 151936
})";

// Qwen3-Next-80B-A3B as written by transformers 4.57.
constexpr std::string_view kQwen3Next4 = R"({
  "architectures": ["Qwen3NextForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "decoder_sparse_step": 1,
  "eos_token_id": 151645,
  "full_attention_interval": 4,
  "head_dim": 256,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 5120,
  "linear_conv_kernel_dim": 4,
  "linear_key_head_dim": 128,
  "linear_num_key_heads": 16,
  "linear_num_value_heads": 32,
  "linear_value_head_dim": 128,
  "max_position_embeddings": 262144,
  "mlp_only_layers": [],
  "model_type": "qwen3_next",
  "moe_intermediate_size": 512,
  "norm_topk_prob": true,
  "num_attention_heads": 16,
  "num_experts": 512,
  "num_experts_per_tok": 10,
  "num_hidden_layers": 48,
  "num_key_value_heads": 2,
  "output_router_logits": false,
  "partial_rotary_factor": 0.25,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 10000000,
  "router_aux_loss_coef": 0.001,
  "shared_expert_intermediate_size": 512,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.57.0.dev0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

// A small Qwen3-Next in the 5.x style: rope_parameters and an explicit, non-default layer_types.
constexpr std::string_view kQwen3Next5 = R"({
  "architectures": ["Qwen3NextForCausalLM"],
  "dtype": "bfloat16",
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "intermediate_size": 3072,
  "layer_types": ["linear_attention", "full_attention", "linear_attention", "full_attention", "linear_attention"],
  "linear_conv_kernel_dim": 4,
  "linear_key_head_dim": 64,
  "linear_num_key_heads": 4,
  "linear_num_value_heads": 8,
  "linear_value_head_dim": 32,
  "model_type": "qwen3_next",
  "moe_intermediate_size": 256,
  "num_attention_heads": 8,
  "num_experts": 32,
  "num_experts_per_tok": 4,
  "num_hidden_layers": 5,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_parameters": {"rope_theta": 5000000.0, "partial_rotary_factor": 0.5, "rope_type": "default"},
  "shared_expert_intermediate_size": 256,
  "transformers_version": "5.0.0",
  "vocab_size": 32000
})";

// Qwen3.5 (dense) conditional generation: the text model's fields live in text_config; the outer level
// holds tie_word_embeddings and the vision tower.
constexpr std::string_view kQwen35 = R"({
  "architectures": ["Qwen3_5ForConditionalGeneration"],
  "image_token_id": 248056,
  "model_type": "qwen3_5",
  "text_config": {
    "attention_bias": false,
    "attn_output_gate": true,
    "dtype": "bfloat16",
    "eos_token_id": 248044,
    "full_attention_interval": 4,
    "head_dim": 256,
    "hidden_act": "silu",
    "hidden_size": 2560,
    "intermediate_size": 9216,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention",
                    "linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_value_head_dim": 128,
    "max_position_embeddings": 262144,
    "model_type": "qwen3_5_text",
    "num_attention_heads": 16,
    "num_hidden_layers": 8,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_parameters": {
      "mrope_interleaved": true,
      "mrope_section": [11, 11, 10],
      "partial_rotary_factor": 0.25,
      "rope_theta": 10000000,
      "rope_type": "default"
    },
    "vocab_size": 248320
  },
  "tie_word_embeddings": true,
  "transformers_version": "4.57.0.dev0",
  "video_token_id": 248057,
  "vision_config": {
    "depth": 24,
    "hidden_act": "gelu_pytorch_tanh",
    "hidden_size": 1024,
    "model_type": "qwen3_5",
    "num_heads": 16,
    "out_hidden_size": 2560,
    "patch_size": 16
  },
  "vision_end_token_id": 248054,
  "vision_start_token_id": 248053
})";

// Qwen3.5 MoE conditional generation: no dense MLP, every layer MoE.
constexpr std::string_view kQwen35Moe = R"({
  "architectures": ["Qwen3_5MoeForConditionalGeneration"],
  "model_type": "qwen3_5_moe",
  "text_config": {
    "attention_bias": false,
    "dtype": "bfloat16",
    "full_attention_interval": 4,
    "head_dim": 256,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_value_head_dim": 128,
    "max_position_embeddings": 262144,
    "model_type": "qwen3_5_moe_text",
    "moe_intermediate_size": 512,
    "num_attention_heads": 16,
    "num_experts": 256,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 8,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06,
    "rope_parameters": {
      "mrope_interleaved": true,
      "mrope_section": [11, 11, 10],
      "partial_rotary_factor": 0.25,
      "rope_theta": 10000000,
      "rope_type": "default"
    },
    "shared_expert_intermediate_size": 512,
    "vocab_size": 248320
  },
  "tie_word_embeddings": false,
  "vision_config": {"depth": 27, "hidden_size": 1152, "model_type": "qwen3_5_moe"}
})";

// The dense Qwen3 config with `edit` applied to its JSON (fields set, or erased when null).
std::string EditedDense(const json& edit) {
  json j = json::parse(kQwen3Dense);
  for (const auto& [key, value] : edit.items()) {
    if (value.is_null()) {
      j.erase(key);
    } else {
      j[key] = value;
    }
  }
  return j.dump();
}

// Expects ParseModelConfig to throw Error with `code` and a message containing each of `parts`.
void ExpectParseError(std::string_view text, ErrorCode code, std::initializer_list<std::string_view> parts) {
  try {
    ParseModelConfig(text, kPath);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << "got " << ErrorCodeName(e.code()) << ": " << e.what();
    std::string message = e.what();
    for (std::string_view part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

std::vector<LayerType> Repeat(LayerType type, int n) { return std::vector<LayerType>(static_cast<size_t>(n), type); }
std::vector<MlpType> Repeat(MlpType type, int n) { return std::vector<MlpType>(static_cast<size_t>(n), type); }

// ---- transformers 4.x dense ----

TEST(HfConfig, Qwen3DenseTransformers4) {
  ModelConfig c = ParseModelConfig(kQwen3Dense, kPath);
  EXPECT_EQ(c.arch, Architecture::kQwen3);
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(ArchitectureName(c.arch), "qwen3");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_layers, 36);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, 12288);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_EQ(c.rope.type, RopeType::kDefault);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rope.partial_rotary_factor, 1.0);
  EXPECT_EQ(c.rope.rotary_dim, c.head_dim);
  EXPECT_TRUE(c.rope.mrope_section.empty());
  EXPECT_EQ(c.layer_types, Repeat(LayerType::kFullAttention, 36));
  EXPECT_EQ(c.mlp_types, Repeat(MlpType::kDense, 36));
  EXPECT_EQ(c.CountLayers(LayerType::kFullAttention), 36);
  EXPECT_EQ(c.CountLayers(LayerType::kLinearAttention), 0);
  EXPECT_EQ(c.IndexWithinType(17), 17);
  EXPECT_FALSE(c.is_hybrid());
  EXPECT_FALSE(c.zero_centered_norm);
  EXPECT_FALSE(c.gated_attention);
  EXPECT_EQ(c.num_experts, 0);
  EXPECT_EQ(c.shared_expert_intermediate_size, 0);
  EXPECT_EQ(c.linear_num_key_heads, 0);
}

TEST(HfConfig, Qwen3DenseDefaultsForOptionalFields) {
  // Qwen3-0.6B-like: tied embeddings; without head_dim, num_key_value_heads and rope_theta the
  // transformers defaults apply (hidden_size / heads, = heads, 10000).
  std::string text = EditedDense({{"hidden_size", 1024},
                                  {"num_attention_heads", 16},
                                  {"head_dim", nullptr},
                                  {"num_key_value_heads", nullptr},
                                  {"rope_theta", nullptr},
                                  {"rms_norm_eps", nullptr},
                                  {"tie_word_embeddings", true}});
  ModelConfig c = ParseModelConfig(text, kPath);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_kv_heads, 16);
  EXPECT_DOUBLE_EQ(c.rope.theta, 10000.0);
  EXPECT_EQ(c.rope.rotary_dim, 64);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_word_embeddings);
}

// ---- MoE ----

TEST(HfConfig, Qwen3MoeTransformers4SparseStepAndMlpOnlyLayers) {
  ModelConfig c = ParseModelConfig(kQwen3Moe4, kPath);
  EXPECT_EQ(c.arch, Architecture::kQwen3Moe);
  EXPECT_EQ(ArchitectureName(c.arch), "qwen3_moe");
  EXPECT_EQ(c.num_experts, 16);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.moe_intermediate_size, 256);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.shared_expert_intermediate_size, 0);
  // Layer i is MoE when i is not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0.
  EXPECT_EQ(c.mlp_types, (std::vector<MlpType>{MlpType::kDense, MlpType::kMoe, MlpType::kDense, MlpType::kMoe,
                                               MlpType::kDense, MlpType::kMoe}));
  EXPECT_EQ(c.layer_types, Repeat(LayerType::kFullAttention, 6));
  EXPECT_FALSE(c.is_hybrid());
  EXPECT_FALSE(c.zero_centered_norm);
}

TEST(HfConfig, Qwen3MoeMlpOnlyLayerOverridesSparseStep) {
  // decoder_sparse_step 1 makes every layer MoE except those in mlp_only_layers.
  json j = json::parse(kQwen3Moe4);
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = {0, 3};
  j.erase("norm_topk_prob");  // transformers' Qwen3-MoE default is false
  ModelConfig c = ParseModelConfig(j.dump(), kPath);
  EXPECT_EQ(c.mlp_types, (std::vector<MlpType>{MlpType::kDense, MlpType::kMoe, MlpType::kMoe, MlpType::kDense,
                                               MlpType::kMoe, MlpType::kMoe}));
  EXPECT_FALSE(c.norm_topk_prob);
}

TEST(HfConfig, Qwen3MoeTransformers5NumLocalExperts) {
  ModelConfig c = ParseModelConfig(kQwen3Moe5, kPath);
  EXPECT_EQ(c.arch, Architecture::kQwen3Moe);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 768);
  EXPECT_EQ(c.num_layers, 48);
  EXPECT_EQ(c.mlp_types, Repeat(MlpType::kMoe, 48));
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_EQ(c.rope.type, RopeType::kDefault);
  EXPECT_EQ(c.rope.rotary_dim, 128);
}

TEST(HfConfig, MoeWithMoreExpertsPerTokenThanExpertsIsRejected) {
  json j = json::parse(kQwen3Moe4);
  j["num_experts_per_tok"] = 17;
  ExpectParseError(j.dump(), ErrorCode::kInvalidFormat, {kPath, "num_experts_per_tok"});
}

// ---- Qwen3-Next ----

TEST(HfConfig, Qwen3NextTransformers4) {
  ModelConfig c = ParseModelConfig(kQwen3Next4, kPath);
  EXPECT_EQ(c.arch, Architecture::kQwen3Next);
  EXPECT_EQ(ArchitectureName(c.arch), "qwen3_next");
  EXPECT_TRUE(c.is_hybrid());
  ASSERT_EQ(c.layer_types.size(), 48u);
  for (int i = 0; i < 48; ++i) {
    LayerType want = (i + 1) % 4 == 0 ? LayerType::kFullAttention : LayerType::kLinearAttention;
    EXPECT_EQ(c.layer_types[static_cast<size_t>(i)], want) << "layer " << i;
  }
  EXPECT_EQ(c.CountLayers(LayerType::kFullAttention), 12);
  EXPECT_EQ(c.CountLayers(LayerType::kLinearAttention), 36);
  EXPECT_EQ(c.IndexWithinType(3), 0);  // first full-attention layer
  EXPECT_EQ(c.IndexWithinType(7), 1);  // second
  EXPECT_EQ(c.IndexWithinType(4), 3);  // linear layers 0, 1, 2 come before it
  EXPECT_EQ(c.IndexWithinType(47), 11);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_DOUBLE_EQ(c.rope.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.rope.rotary_dim, 64);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e7);
  EXPECT_EQ(c.rope.type, RopeType::kDefault);
  EXPECT_TRUE(c.zero_centered_norm);
  EXPECT_TRUE(c.gated_attention);
  EXPECT_EQ(c.num_experts, 512);
  EXPECT_EQ(c.num_experts_per_tok, 10);
  EXPECT_EQ(c.moe_intermediate_size, 512);
  EXPECT_EQ(c.shared_expert_intermediate_size, 512);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.mlp_types, Repeat(MlpType::kMoe, 48));
  EXPECT_EQ(c.linear_num_key_heads, 16);
  EXPECT_EQ(c.linear_num_value_heads, 32);
  EXPECT_EQ(c.linear_key_head_dim, 128);
  EXPECT_EQ(c.linear_value_head_dim, 128);
  EXPECT_EQ(c.linear_conv_kernel_dim, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.max_position_embeddings, 262144);
}

TEST(HfConfig, Transformers5RopeParametersAndExplicitLayerTypes) {
  ModelConfig c = ParseModelConfig(kQwen3Next5, kPath);
  EXPECT_EQ(c.arch, Architecture::kQwen3Next);
  EXPECT_EQ(c.layer_types,
            (std::vector<LayerType>{LayerType::kLinearAttention, LayerType::kFullAttention, LayerType::kLinearAttention,
                                    LayerType::kFullAttention, LayerType::kLinearAttention}));
  EXPECT_EQ(c.IndexWithinType(3), 1);
  EXPECT_EQ(c.IndexWithinType(4), 2);
  EXPECT_DOUBLE_EQ(c.rope.theta, 5e6);
  EXPECT_DOUBLE_EQ(c.rope.partial_rotary_factor, 0.5);
  EXPECT_EQ(c.rope.rotary_dim, 64);
  EXPECT_EQ(c.rope.type, RopeType::kDefault);
  EXPECT_TRUE(c.norm_topk_prob);  // Qwen3-Next's default
  EXPECT_EQ(c.shared_expert_intermediate_size, 256);
  EXPECT_EQ(c.linear_num_value_heads, 8);
  EXPECT_EQ(c.linear_value_head_dim, 32);
}

TEST(HfConfig, RopeParametersOverrideTopLevelRopeFields) {
  json j = json::parse(kQwen3Next5);
  j["rope_theta"] = 1234.0;
  j["partial_rotary_factor"] = 1.0;
  ModelConfig c = ParseModelConfig(j.dump(), kPath);
  EXPECT_DOUBLE_EQ(c.rope.theta, 5e6);
  EXPECT_EQ(c.rope.rotary_dim, 64);
}

TEST(HfConfig, LinearAttentionLayerTypeIsRejectedForDenseQwen3) {
  json j = json::parse(kQwen3Dense);
  j["num_hidden_layers"] = 2;
  j["layer_types"] = {"full_attention", "linear_attention"};
  ExpectParseError(j.dump(), ErrorCode::kUnsupported, {kPath, "layer_types", "linear_attention"});
}

// ---- Qwen3.5 conditional generation ----

TEST(HfConfig, Qwen35NestedTextConfig) {
  ModelConfig c = ParseModelConfig(kQwen35, kPath);
  EXPECT_EQ(c.arch, Architecture::kQwen35);
  EXPECT_EQ(ArchitectureName(c.arch), "qwen3_5");
  EXPECT_EQ(c.model_type, "qwen3_5");  // the outer one
  EXPECT_EQ(c.vocab_size, 248320);
  EXPECT_EQ(c.hidden_size, 2560);  // text_config's, not vision_config's 1024
  EXPECT_EQ(c.num_layers, 8);
  EXPECT_EQ(c.num_heads, 16);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.intermediate_size, 9216);
  EXPECT_TRUE(c.tie_word_embeddings);  // from the outer level; text_config has none
  EXPECT_EQ(c.rope.type, RopeType::kDefault);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e7);
  EXPECT_EQ(c.rope.rotary_dim, 64);
  EXPECT_EQ(c.rope.mrope_section, (std::vector<int>{11, 11, 10}));
  EXPECT_TRUE(c.rope.mrope_interleaved);
  EXPECT_EQ(c.CountLayers(LayerType::kFullAttention), 2);
  EXPECT_EQ(c.layer_types[3], LayerType::kFullAttention);
  EXPECT_EQ(c.layer_types[7], LayerType::kFullAttention);
  EXPECT_EQ(c.layer_types[0], LayerType::kLinearAttention);
  EXPECT_EQ(c.mlp_types, Repeat(MlpType::kDense, 8));
  EXPECT_TRUE(c.zero_centered_norm);
  EXPECT_TRUE(c.gated_attention);
  EXPECT_EQ(c.num_experts, 0);
  EXPECT_EQ(c.linear_num_key_heads, 16);
  EXPECT_EQ(c.linear_num_value_heads, 32);
  EXPECT_EQ(c.linear_conv_kernel_dim, 4);
}

TEST(HfConfig, Qwen35InnerTieWordEmbeddingsWins) {
  json j = json::parse(kQwen35);
  j["text_config"]["tie_word_embeddings"] = false;
  EXPECT_FALSE(ParseModelConfig(j.dump(), kPath).tie_word_embeddings);
  j["tie_word_embeddings"] = false;
  j["text_config"]["tie_word_embeddings"] = true;
  EXPECT_TRUE(ParseModelConfig(j.dump(), kPath).tie_word_embeddings);
}

TEST(HfConfig, Qwen35MoeNestedEveryLayerMoe) {
  ModelConfig c = ParseModelConfig(kQwen35Moe, kPath);
  EXPECT_EQ(c.arch, Architecture::kQwen35Moe);
  EXPECT_EQ(ArchitectureName(c.arch), "qwen3_5_moe");
  EXPECT_EQ(c.model_type, "qwen3_5_moe");
  EXPECT_TRUE(c.is_hybrid());
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.intermediate_size, 0);
  EXPECT_EQ(c.mlp_types, Repeat(MlpType::kMoe, 8));
  EXPECT_EQ(c.num_experts, 256);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 512);
  EXPECT_EQ(c.shared_expert_intermediate_size, 512);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FALSE(c.tie_word_embeddings);
  // No layer_types: full_attention_interval 4 gives layers 3 and 7 full attention.
  EXPECT_EQ(c.layer_types, (std::vector<LayerType>{LayerType::kLinearAttention, LayerType::kLinearAttention,
                                                   LayerType::kLinearAttention, LayerType::kFullAttention,
                                                   LayerType::kLinearAttention, LayerType::kLinearAttention,
                                                   LayerType::kLinearAttention, LayerType::kFullAttention}));
  EXPECT_EQ(c.rope.rotary_dim, 64);
  EXPECT_EQ(c.rope.mrope_section, (std::vector<int>{11, 11, 10}));
}

TEST(HfConfig, NestedFieldErrorsNameTheTextConfigField) {
  json j = json::parse(kQwen35);
  j["text_config"].erase("hidden_size");
  ExpectParseError(j.dump(), ErrorCode::kInvalidFormat, {kPath, "text_config.hidden_size"});
}

// ---- RoPE scaling ----

TEST(HfConfig, YarnRopeScaling) {
  std::string text =
      EditedDense({{"rope_scaling", {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}}},
                   {"max_position_embeddings", 131072}});
  ModelConfig c = ParseModelConfig(text, kPath);
  EXPECT_EQ(c.rope.type, RopeType::kYarn);
  EXPECT_DOUBLE_EQ(c.rope.factor, 4.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);  // still the top-level rope_theta
  EXPECT_DOUBLE_EQ(c.rope.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c.rope.beta_slow, 1.0);
  EXPECT_DOUBLE_EQ(c.rope.attention_factor, 0.0);
  EXPECT_TRUE(c.rope.truncate);
  EXPECT_EQ(c.rope.rotary_dim, 128);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.ContextLimit(), 131072);  // 32,768 x 4, no more than max_position_embeddings
}

TEST(HfConfig, ContextLimitFollowsRopeScaling) {
  // Qwen3's YaRN recipe: max_position_embeddings stays 40,960, rope_scaling adds factor 4 over 32,768.
  ModelConfig yarn = ParseModelConfig(
      EditedDense({{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}}},
                   {"max_position_embeddings", 40960}}),
      kPath);
  EXPECT_EQ(yarn.ContextLimit(), 131072);
  ModelConfig linear = ParseModelConfig(
      EditedDense({{"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}}, {"max_position_embeddings", 4096}}),
      kPath);
  EXPECT_EQ(linear.ContextLimit(), 8192);
  ModelConfig plain = ParseModelConfig(EditedDense({{"max_position_embeddings", 40960}}), kPath);
  EXPECT_EQ(plain.ContextLimit(), 40960);
  // CheckedContextSize: 0 takes the limit, up to it is kept, beyond it is an error naming both.
  EXPECT_EQ(yarn.CheckedContextSize(0, "ctx"), 131072);
  EXPECT_EQ(yarn.CheckedContextSize(65536, "ctx"), 65536);
  try {
    plain.CheckedContextSize(65536, "--ctx-size 65536");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("--ctx-size 65536 exceeds the 40960 tokens"), std::string::npos) << e.what();
  }
}

TEST(HfConfig, YarnViaRopeTypeWithExplicitParameters) {
  std::string text = EditedDense({{"rope_scaling",
                                   {{"rope_type", "yarn"},
                                    {"factor", 2.5},
                                    {"original_max_position_embeddings", 4096},
                                    {"beta_fast", 16},
                                    {"beta_slow", 2},
                                    {"attention_factor", 1.1},
                                    {"truncate", false}}}});
  ModelConfig c = ParseModelConfig(text, kPath);
  EXPECT_EQ(c.rope.type, RopeType::kYarn);
  EXPECT_DOUBLE_EQ(c.rope.factor, 2.5);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rope.beta_fast, 16.0);
  EXPECT_DOUBLE_EQ(c.rope.beta_slow, 2.0);
  EXPECT_DOUBLE_EQ(c.rope.attention_factor, 1.1);
  EXPECT_FALSE(c.rope.truncate);
}

TEST(HfConfig, LinearRopeScaling) {
  std::string text = EditedDense({{"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}}});
  ModelConfig c = ParseModelConfig(text, kPath);
  EXPECT_EQ(c.rope.type, RopeType::kLinear);
  EXPECT_DOUBLE_EQ(c.rope.factor, 2.0);
}

TEST(HfConfig, UnknownRopeTypeIsUnsupported) {
  std::string text = EditedDense({{"rope_scaling", {{"rope_type", "dynamic"}, {"factor", 2.0}}}});
  ExpectParseError(text, ErrorCode::kUnsupported, {kPath, "dynamic"});
  std::string v5 = EditedDense({{"rope_parameters", {{"rope_type", "longrope"}, {"rope_theta", 1e6}}}});
  ExpectParseError(v5, ErrorCode::kUnsupported, {kPath, "longrope"});
}

// ---- errors ----

TEST(HfConfigErrors, MalformedJson) {
  ExpectParseError(R"({"model_type": "qwen3", "hidden_size": )", ErrorCode::kInvalidFormat, {kPath});
  ExpectParseError("[1, 2]", ErrorCode::kInvalidFormat, {kPath});
}

TEST(HfConfigErrors, UnknownModelType) {
  ExpectParseError(EditedDense({{"model_type", "llama"}}), ErrorCode::kUnsupported, {kPath, "model_type", "llama"});
}

TEST(HfConfigErrors, MissingModelType) {
  ExpectParseError(EditedDense({{"model_type", nullptr}}), ErrorCode::kInvalidFormat, {kPath, "model_type"});
}

TEST(HfConfigErrors, MissingHiddenSize) {
  ExpectParseError(EditedDense({{"hidden_size", nullptr}}), ErrorCode::kInvalidFormat, {kPath, "hidden_size"});
}

TEST(HfConfigErrors, WrongFieldType) {
  ExpectParseError(EditedDense({{"hidden_size", "big"}}), ErrorCode::kInvalidFormat, {kPath, "hidden_size", "big"});
  ExpectParseError(EditedDense({{"num_hidden_layers", 2.5}}), ErrorCode::kInvalidFormat, {kPath, "num_hidden_layers"});
  ExpectParseError(EditedDense({{"tie_word_embeddings", "yes"}}), ErrorCode::kInvalidFormat,
                   {kPath, "tie_word_embeddings"});
  ExpectParseError(EditedDense({{"rope_theta", "fast"}}), ErrorCode::kInvalidFormat, {kPath, "rope_theta"});
  ExpectParseError(EditedDense({{"vocab_size", 0}}), ErrorCode::kInvalidFormat, {kPath, "vocab_size"});
  ExpectParseError(EditedDense({{"layer_types", "full_attention"}}), ErrorCode::kInvalidFormat, {kPath, "layer_types"});
  ExpectParseError(EditedDense({{"rope_scaling", "yarn"}}), ErrorCode::kInvalidFormat, {kPath, "rope_scaling"});
}

TEST(HfConfigErrors, OutOfRangeSizes) {
  // Negative, beyond int (truncated by a cast before), beyond int64, and absurd layer counts.
  ExpectParseError(EditedDense({{"num_hidden_layers", -3}}), ErrorCode::kInvalidFormat, {kPath, "num_hidden_layers"});
  ExpectParseError(EditedDense({{"num_hidden_layers", 1000000000}}), ErrorCode::kInvalidFormat,
                   {kPath, "num_hidden_layers", "an integer in [1, 4096]", "1000000000"});
  ExpectParseError(EditedDense({{"num_attention_heads", int64_t{1} << 32}}), ErrorCode::kInvalidFormat,
                   {kPath, "num_attention_heads", "2147483647"});
  ExpectParseError(EditedDense({{"vocab_size", uint64_t{1} << 63}}), ErrorCode::kInvalidFormat, {kPath, "vocab_size"});
  ExpectParseError(EditedDense({{"hidden_size", 0}}), ErrorCode::kInvalidFormat, {kPath, "hidden_size"});
}

TEST(HfConfigErrors, LayerTypesOfWrongLength) {
  json j = json::parse(kQwen3Next5);
  j["layer_types"] = {"linear_attention", "full_attention", "linear_attention", "full_attention"};  // 4, not 5
  ExpectParseError(j.dump(), ErrorCode::kInvalidFormat, {kPath, "layer_types", "num_hidden_layers"});
}

TEST(HfConfigErrors, HeadsNotAMultipleOfKvHeads) {
  ExpectParseError(EditedDense({{"num_attention_heads", 10}, {"num_key_value_heads", 4}}), ErrorCode::kInvalidFormat,
                   {kPath, "num_attention_heads", "num_key_value_heads"});
}

TEST(HfConfigErrors, UnsupportedHiddenAct) {
  ExpectParseError(EditedDense({{"hidden_act", "gelu"}}), ErrorCode::kUnsupported, {kPath, "hidden_act", "gelu"});
}

TEST(HfConfigErrors, UnsupportedAttentionOptions) {
  ExpectParseError(EditedDense({{"attention_bias", true}}), ErrorCode::kUnsupported, {kPath, "attention_bias"});
  ExpectParseError(EditedDense({{"use_sliding_window", true}}), ErrorCode::kUnsupported, {kPath, "use_sliding_window"});
}

TEST(HfConfigErrors, DenseLayerWithoutIntermediateSize) {
  ExpectParseError(EditedDense({{"intermediate_size", nullptr}}), ErrorCode::kInvalidFormat,
                   {kPath, "intermediate_size"});
}

TEST(HfConfigErrors, PartialRotaryFactorOutOfRange) {
  json j = json::parse(kQwen3Next4);
  j["partial_rotary_factor"] = 1.5;
  ExpectParseError(j.dump(), ErrorCode::kInvalidFormat, {kPath, "partial_rotary_factor"});
}

// ---- loading through a FileSet ----

TEST(HfConfigFiles, LoadModelConfigNamesTheFileInErrors) {
  MemoryFileSet files("<mem>");
  files.AddCopy("config.json", kQwen3Dense);
  EXPECT_EQ(LoadModelConfig(files).hidden_size, 4096);
  MemoryFileSet bad("<mem>");
  bad.AddCopy("config.json", EditedDense({{"hidden_size", nullptr}}));
  try {
    LoadModelConfig(bad);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidFormat);
    EXPECT_NE(std::string(e.what()).find("<mem>/config.json"), std::string::npos) << e.what();
  }
}

TEST(HfConfigFiles, GenerationDefaultsEosList) {
  MemoryFileSet files("<mem>");
  files.AddCopy("generation_config.json", R"({
  "bos_token_id": 151643,
  "do_sample": true,
  "eos_token_id": [151645, 151643],
  "pad_token_id": 151643,
  "temperature": 0.6,
  "top_k": 20,
  "top_p": 0.95,
  "transformers_version": "4.51.0"
})");
  GenerationDefaults g = LoadGenerationDefaults(files);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  EXPECT_TRUE(g.do_sample);
  EXPECT_DOUBLE_EQ(g.temperature, 0.6);
  EXPECT_EQ(g.top_k, 20);
  EXPECT_DOUBLE_EQ(g.top_p, 0.95);
  EXPECT_DOUBLE_EQ(g.min_p, 0.0);
  EXPECT_DOUBLE_EQ(g.repetition_penalty, 1.0);
}

TEST(HfConfigFiles, GenerationDefaultsEosInt) {
  MemoryFileSet files("<mem>");
  files.AddCopy("generation_config.json",
                R"({"bos_token_id": 151643, "eos_token_id": 151643, "max_new_tokens": 2048, "min_p": 0.05,
                    "repetition_penalty": 1.05})");
  GenerationDefaults g = LoadGenerationDefaults(files);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int32_t>{151643}));
  EXPECT_FALSE(g.do_sample);
  EXPECT_DOUBLE_EQ(g.temperature, 1.0);
  EXPECT_DOUBLE_EQ(g.min_p, 0.05);
  EXPECT_DOUBLE_EQ(g.repetition_penalty, 1.05);
  EXPECT_EQ(g.top_k, 0);
}

TEST(HfConfigFiles, GenerationDefaultsAbsentFile) {
  MemoryFileSet files("<mem>");
  files.AddCopy("config.json", kQwen3Dense);
  GenerationDefaults g = LoadGenerationDefaults(files);
  EXPECT_TRUE(g.eos_token_ids.empty());
  EXPECT_FALSE(g.do_sample);
  EXPECT_DOUBLE_EQ(g.temperature, 1.0);
  EXPECT_DOUBLE_EQ(g.top_p, 1.0);
  EXPECT_DOUBLE_EQ(g.min_p, 0.0);
  EXPECT_DOUBLE_EQ(g.repetition_penalty, 1.0);
  EXPECT_EQ(g.top_k, 0);
}

TEST(HfConfigFiles, GenerationDefaultsMalformed) {
  // Not integers, negative, or past int32 (which a cast used to wrap into range).
  for (const char* text : {R"({"eos_token_id": [1, "two"]})", R"({"eos_token_id": "two"})", R"({"eos_token_id": -1})",
                           R"({"eos_token_id": [1, 4294967298]})", R"({"eos_token_id": 18446744073709551615})"}) {
    SCOPED_TRACE(text);
    MemoryFileSet files("<mem>");
    files.AddCopy("generation_config.json", text);
    try {
      LoadGenerationDefaults(files);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidFormat);
      std::string message = e.what();
      EXPECT_NE(message.find("<mem>/generation_config.json"), std::string::npos) << message;
      EXPECT_NE(message.find("eos_token_id"), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace infernix

namespace infernix {
namespace {

// A number beyond double range is malformed JSON for us (nlohmann reports it as out_of_range).
TEST(HfConfig, NumberOutOfRangeIsInvalidFormat) {
  try {
    ParseModelConfig(R"({"model_type": "qwen3", "hidden_size": 2e999})", "config.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidFormat);
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace infernix

namespace infernix {
namespace {

// ---- quantization_config ----

const json kFp8Quant = {{"quant_method", "fp8"},
                        {"fmt", "e4m3"},
                        {"activation_scheme", "dynamic"},
                        {"weight_block_size", {128, 128}},
                        {"modules_to_not_convert", {"lm_head", "model.layers.0.mlp.gate"}}};

TEST(HfConfigQuantization, NoQuantizationConfigIsNotFp8) {
  EXPECT_EQ(ParseModelConfig(kQwen3Dense, kPath).fp8_block_size, 0);
  EXPECT_EQ(ParseModelConfig(EditedDense({{"quantization_config", nullptr}}), kPath).fp8_block_size, 0);
}

TEST(HfConfigQuantization, QwenFp8BlockConfig) {
  EXPECT_EQ(ParseModelConfig(EditedDense({{"quantization_config", kFp8Quant}}), kPath).fp8_block_size, 128);
  json minimal = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  EXPECT_EQ(ParseModelConfig(EditedDense({{"quantization_config", minimal}}), kPath).fp8_block_size, 128);
}

TEST(HfConfigQuantization, NestedInTextConfig) {
  json j = json::parse(kQwen3Dense);
  json nested = {{"model_type", "qwen3"}, {"text_config", j}};
  nested["text_config"]["quantization_config"] = kFp8Quant;
  EXPECT_EQ(ParseModelConfig(nested.dump(), kPath).fp8_block_size, 128);
  nested["text_config"]["quantization_config"]["quant_method"] = "awq";
  ExpectParseError(nested.dump(), ErrorCode::kUnsupported, {kPath, "text_config.quantization_config.quant_method", "awq"});
}

TEST(HfConfigQuantization, OtherMethodsAreUnsupportedByName) {
  for (const char* method : {"gptq", "awq", "bitsandbytes", "compressed-tensors", "mxfp4"}) {
    json q = {{"quant_method", method}, {"bits", 4}};
    ExpectParseError(EditedDense({{"quantization_config", q}}), ErrorCode::kUnsupported,
                     {kPath, "quantization_config.quant_method", method});
  }
}

TEST(HfConfigQuantization, OtherFp8VariantsAreUnsupported) {
  json q = kFp8Quant;
  q["weight_block_size"] = {64, 64};
  ExpectParseError(EditedDense({{"quantization_config", q}}), ErrorCode::kUnsupported,
                   {kPath, "weight_block_size", "[64,64]", "[128, 128]"});
  q["weight_block_size"] = {128};
  ExpectParseError(EditedDense({{"quantization_config", q}}), ErrorCode::kUnsupported, {"weight_block_size", "[128]"});
  q.erase("weight_block_size");
  ExpectParseError(EditedDense({{"quantization_config", q}}), ErrorCode::kUnsupported,
                   {"weight_block_size' is missing", "per-tensor"});
  q = kFp8Quant;
  q["fmt"] = "e5m2";
  ExpectParseError(EditedDense({{"quantization_config", q}}), ErrorCode::kUnsupported, {"quantization_config.fmt", "e5m2"});
  q = kFp8Quant;
  q["activation_scheme"] = "static";
  ExpectParseError(EditedDense({{"quantization_config", q}}), ErrorCode::kUnsupported,
                   {"quantization_config.activation_scheme", "static"});
  ExpectParseError(EditedDense({{"quantization_config", "fp8"}}), ErrorCode::kInvalidFormat,
                   {"quantization_config", "expected an object"});
}

}  // namespace
}  // namespace infernix
