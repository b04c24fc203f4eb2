// GGUF files of every architecture, checked without llama.cpp (whose real files, read from ../shared
// when present, gguf_model_test checks): the tiny fixtures of tests/fixtures/models are converted here
// the way llama.cpp's converter converts them (docs/gguf.md), then loaded through LoadGgufModel and
// compared with transformers' logits. Qwen3 / Qwen3-MoE: tensors renamed, experts stacked. Qwen3-Next:
// in_proj_qkvz split into attn_qkv (q, k, v of all key-head groups) and attn_gate (z), in_proj_ba kept as
// ssm_ba, and the conventions below. Qwen3.5 (qwen35 / qwen35moe): tensors renamed; the DeltaNet value
// heads reordered from grouped to tiled
// order (the v rows of in_proj_qkv, the rows of in_proj_z/b/a, A_log, dt_bias, the v channels of conv1d,
// the columns of out_proj); ssm_a = -exp(A_log); 1 + w for the zero-centred norms (f32); the conv weight
// squeezed to [C, K]; the experts stacked into ffn_*_exps [E, rows, cols]; MTP layers appended to the blocks.
// The file is then loaded through LoadGgufModel and must reproduce transformers' logits
// (reference.safetensors) to the bound the safetensors models meet, 1e-3 * max(1, max |ref|), and the greedy
// tokens. Both fixtures have 2 key heads and 4 value heads, so the tiled order differs from the grouped one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "backend/cpu/cpu_backend.h"
#include "base/error.h"
#include "engine/generator.h"
#include "formats/gguf_test_builder.h"
#include "model/gguf_model.h"
#include "model/model.h"
#include "model_check.h"
#include "test_util.h"

namespace infernix {
namespace {

constexpr uint32_t kGgmlF32 = 0, kGgmlQ8_0 = 8, kGgmlBf16 = 30;

// A tensor on its way into the file: the Hugging Face (row-major) shape and f32 values (exactly the
// checkpoint's bf16 values, or what the converter computes from them in f32).
struct Host {
  std::vector<int64_t> shape;
  std::vector<float> v;
  int64_t cols() const { return shape.size() == 1 ? 1 : shape.back(); }  // a vector is one column
  int64_t rows() const { return static_cast<int64_t>(v.size()) / cols(); }
};

// The converter's _reorder_v_heads along rows [row_begin, row_begin + nv * hd) (`by_columns`: along
// columns instead): the tiled head j * nk + g takes the grouped head g * r + j (r = nv / nk).
void TileHeads(Host& h, int64_t begin, int64_t nk, int64_t nv, int64_t hd, bool by_columns) {
  const int64_t r = nv / nk, rows = h.rows(), cols = h.cols();
  const std::vector<float> old = h.v;
  for (int64_t g = 0; g < nk; ++g)
    for (int64_t j = 0; j < r; ++j)
      for (int64_t d = 0; d < hd; ++d) {
        int64_t from = begin + (g * r + j) * hd + d, to = begin + (j * nk + g) * hd + d;
        if (by_columns) {
          for (int64_t row = 0; row < rows; ++row) h.v[size_t(row * cols + to)] = old[size_t(row * cols + from)];
        } else {
          for (int64_t c = 0; c < cols; ++c) h.v[size_t(to * cols + c)] = old[size_t(from * cols + c)];
        }
      }
}

std::string Bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

// Reference Q8_0 quantizer (ggml's): per block of 32, d = max|x| / 127 stored as f16, q = round(x / d).
// Returns the blocks; `dequantized` gets d * q, the values the file then holds.
std::string QuantizeQ8_0(const std::vector<float>& x, std::vector<float>& dequantized) {
  EXPECT_EQ(x.size() % 32, 0u);
  std::string out;
  dequantized.resize(x.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::abs(x[b + i]));
    float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    uint16_t d16 = F32ToF16(d);
    out += Bytes(&d16, 2);
    for (size_t i = 0; i < 32; ++i) {
      auto q = static_cast<int8_t>(std::lround(std::clamp(x[b + i] * id, -127.0f, 127.0f)));
      out += Bytes(&q, 1);
      dequantized[b + i] = F16ToF32(d16) * q;
    }
  }
  return out;
}

struct ConvertOptions {
  std::set<std::string> q8_0;     // GGUF tensor names to store as Q8_0
  bool q8_0_as_f32 = false;       // store those tensors' Q8_0 values dequantized, as F32, instead
  bool mtp_layer = false;         // append one (unused) MTP block, as the converter does for Qwen3.5
};

class Converter {
 public:
  Converter(const std::string& model, ConvertOptions options)
      : files_(testing::ModelDir(model)),
        st_(files_.Open("model.safetensors"), files_.DisplayPath("model.safetensors")),
        c_(LoadModelConfig(files_)),
        options_(std::move(options)) {}

  const ModelConfig& config() const { return c_; }

  // Writes the GGUF file to `path`.
  void Write(const std::string& path) {
    const bool is35 = c_.arch == Architecture::kQwen35 || c_.arch == Architecture::kQwen35Moe;
    const bool hybrid = c_.is_hybrid(), moe = c_.num_experts > 0;
    const std::string arch = c_.arch == Architecture::kQwen3      ? "qwen3"
                             : c_.arch == Architecture::kQwen3Moe ? "qwen3moe"
                             : c_.arch == Architecture::kQwen3Next ? "qwen3next"
                             : moe                                 ? "qwen35moe"
                                                                   : "qwen35";
    const std::string a = arch + ".";
    const int blocks = c_.num_layers + (options_.mtp_layer ? 1 : 0);
    b_.KvString("general.architecture", arch);
    b_.KvU32(a + "block_count", static_cast<uint32_t>(blocks));
    if (options_.mtp_layer) b_.KvU32(a + "nextn_predict_layers", 1);
    b_.KvU32(a + "context_length", static_cast<uint32_t>(c_.max_position_embeddings));
    b_.KvU32(a + "embedding_length", static_cast<uint32_t>(c_.hidden_size));
    b_.KvU32(a + "attention.head_count", static_cast<uint32_t>(c_.num_heads));
    b_.KvU32(a + "attention.head_count_kv", static_cast<uint32_t>(c_.num_kv_heads));
    b_.KvU32(a + "attention.key_length", static_cast<uint32_t>(c_.head_dim));
    b_.KvU32(a + "attention.value_length", static_cast<uint32_t>(c_.head_dim));
    b_.KvF32(a + "attention.layer_norm_rms_epsilon", static_cast<float>(c_.rms_norm_eps));
    b_.KvF32(a + "rope.freq_base", static_cast<float>(c_.rope.theta));
    b_.KvU32(a + "rope.dimension_count", static_cast<uint32_t>(c_.rope.rotary_dim));
    if (is35) b_.KvI32s(a + "rope.dimension_sections", {11, 11, 10, 0});  // the converter's default
    if (hybrid) {
      b_.KvU32(a + "ssm.conv_kernel", static_cast<uint32_t>(c_.linear_conv_kernel_dim));
      b_.KvU32(a + "ssm.state_size", static_cast<uint32_t>(c_.linear_key_head_dim));
      b_.KvU32(a + "ssm.group_count", static_cast<uint32_t>(c_.linear_num_key_heads));
      b_.KvU32(a + "ssm.time_step_rank", static_cast<uint32_t>(c_.linear_num_value_heads));
      b_.KvU32(a + "ssm.inner_size", static_cast<uint32_t>(c_.linear_num_value_heads * c_.linear_value_head_dim));
      b_.KvU32(a + "full_attention_interval", 4);
    }
    if (moe) {
      b_.KvU32(a + "expert_count", static_cast<uint32_t>(c_.num_experts));
      b_.KvU32(a + "expert_used_count", static_cast<uint32_t>(c_.num_experts_per_tok));
      b_.KvU32(a + "expert_feed_forward_length", static_cast<uint32_t>(c_.moe_intermediate_size));
      if (c_.shared_expert_intermediate_size > 0)
        b_.KvU32(a + "expert_shared_feed_forward_length", static_cast<uint32_t>(c_.shared_expert_intermediate_size));
    }
    if (c_.intermediate_size > 0) b_.KvU32(a + "feed_forward_length", static_cast<uint32_t>(c_.intermediate_size));
    const std::string m = is35 ? "model.language_model." : "model.";
    Add("token_embd.weight", Get(m + "embed_tokens.weight"));
    Add("output_norm.weight", Norm(Get(m + "norm.weight")));
    Add("output.weight", Get("lm_head.weight"));
    for (int l = 0; l < c_.num_layers; ++l) Layer(l, m + "layers." + std::to_string(l) + ".");
    if (options_.mtp_layer) {
      // A stand-in for the MTP block's tensors: present in the file, never bound.
      std::string blk = "blk." + std::to_string(c_.num_layers) + ".";
      Add(blk + "attn_norm.weight", Norm(Get(m + "norm.weight")));
      Add(blk + "nextn.eh_proj.weight", Host{{c_.hidden_size, 2 * c_.hidden_size},
                                               std::vector<float>(size_t(2 * c_.hidden_size * c_.hidden_size), 0.5f)});
    }
    std::ofstream(path, std::ios::binary | std::ios::trunc) << b_.Build();
  }

 private:
  Host Get(const std::string& name) const {
    const SafetensorsEntry* e = st_.Find(name);
    if (e == nullptr) throw std::runtime_error("the fixture has no " + name);
    Tensor t = st_.View(*e);
    Host h{e->shape, std::vector<float>(static_cast<size_t>(t.numel()))};
    for (int64_t i = 0; i < t.numel(); ++i) h.v[size_t(i)] = LoadAsFloat(t, i);
    return h;
  }

  // The converter stores Qwen3-Next / 3.5's zero-centred norm weights as 1 + w (in f32); Qwen3's as they are.
  Host Norm(Host h) const {
    if (c_.zero_centered_norm)
      for (float& x : h.v) x += 1.0f;
    return h;
  }

  // 1-D tensors in f32 (as the converter stores them), others in bf16 (exact: they hold bf16 values),
  // or Q8_0 when asked.
  void Add(const std::string& name, const Host& h) {
    std::vector<uint64_t> ne(h.shape.rbegin(), h.shape.rend());
    if (options_.q8_0.count(name)) {
      std::vector<float> dequantized;
      std::string blocks = QuantizeQ8_0(h.v, dequantized);
      if (options_.q8_0_as_f32) {
        b_.TensorData(name, ne, kGgmlF32, Bytes(dequantized.data(), dequantized.size() * 4));
      } else {
        b_.TensorData(name, ne, kGgmlQ8_0, blocks);
      }
      return;
    }
    if (h.shape.size() == 1) {
      b_.TensorData(name, ne, kGgmlF32, Bytes(h.v.data(), h.v.size() * 4));
      return;
    }
    std::string bytes;
    for (float x : h.v) {
      uint16_t v = F32ToBf16(x);
      EXPECT_EQ(Bf16ToF32(v), x) << name << " is not exact in bf16";
      bytes += Bytes(&v, 2);
    }
    b_.TensorData(name, ne, kGgmlBf16, bytes);
  }

  void Layer(int l, const std::string& p) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    Add(blk + "attn_norm.weight", Norm(Get(p + "input_layernorm.weight")));
    Add(blk + (c_.is_hybrid() ? "post_attention_norm.weight" : "ffn_norm.weight"),
        Norm(Get(p + "post_attention_layernorm.weight")));
    if (c_.layer_types[size_t(l)] == LayerType::kFullAttention) {
      Add(blk + "attn_q.weight", Get(p + "self_attn.q_proj.weight"));
      Add(blk + "attn_k.weight", Get(p + "self_attn.k_proj.weight"));
      Add(blk + "attn_v.weight", Get(p + "self_attn.v_proj.weight"));
      Add(blk + "attn_output.weight", Get(p + "self_attn.o_proj.weight"));
      Add(blk + "attn_q_norm.weight", Norm(Get(p + "self_attn.q_norm.weight")));
      Add(blk + "attn_k_norm.weight", Norm(Get(p + "self_attn.k_norm.weight")));
    } else {
      DeltaNet(blk, p + "linear_attn.");
    }
    if (c_.mlp_types[size_t(l)] == MlpType::kDense) {
      Add(blk + "ffn_gate.weight", Get(p + "mlp.gate_proj.weight"));
      Add(blk + "ffn_up.weight", Get(p + "mlp.up_proj.weight"));
      Add(blk + "ffn_down.weight", Get(p + "mlp.down_proj.weight"));
      return;
    }
    Add(blk + "ffn_gate_inp.weight", Get(p + "mlp.gate.weight"));
    for (const char* proj : {"gate", "up", "down"}) {
      Host stacked;
      for (int e = 0; e < c_.num_experts; ++e) {
        Host x = Get(p + "mlp.experts." + std::to_string(e) + "." + proj + "_proj.weight");
        if (e == 0) stacked.shape = {c_.num_experts, x.shape[0], x.shape[1]};
        stacked.v.insert(stacked.v.end(), x.v.begin(), x.v.end());
      }
      Add(blk + "ffn_" + proj + "_exps.weight", stacked);
      if (c_.shared_expert_intermediate_size > 0)
        Add(blk + "ffn_" + proj + "_shexp.weight", Get(p + "mlp.shared_expert." + proj + "_proj.weight"));
    }
    if (c_.shared_expert_intermediate_size == 0) return;
    Host gate = Get(p + "mlp.shared_expert_gate.weight");
    gate.shape = {gate.shape[1]};  // [1, H] squeezed
    Add(blk + "ffn_gate_inp_shexp.weight", gate);
  }

  // Qwen3-Next: in_proj_qkvz rows per key head g: q_g [dk], k_g [dk], v_g [r dv], z_g [r dv]; the
  // converter writes attn_qkv = [q of all g, k of all g, v of all g] and attn_gate = [z of all g], keeps
  // in_proj_ba as ssm_ba, and reorders no head (no tiling).
  void DeltaNetNext(const std::string& blk, const std::string& p) {
    const int64_t nk = c_.linear_num_key_heads, nv = c_.linear_num_value_heads, r = nv / nk;
    const int64_t dk = c_.linear_key_head_dim, dv = c_.linear_value_head_dim, group = 2 * dk + 2 * r * dv;
    Host qkvz = Get(p + "in_proj_qkvz.weight");
    const int64_t cols = qkvz.cols();
    auto rows = [&](int64_t part_begin, int64_t part_len) {
      Host h{{nk * part_len, cols}, {}};
      for (int64_t g = 0; g < nk; ++g)
        for (int64_t i = 0; i < part_len; ++i) {
          auto row = qkvz.v.begin() + (g * group + part_begin + i) * cols;
          h.v.insert(h.v.end(), row, row + cols);
        }
      return h;
    };
    Host q = rows(0, dk), k = rows(dk, dk), v = rows(2 * dk, r * dv), z = rows(2 * dk + r * dv, r * dv);
    Host qkv{{q.shape[0] + k.shape[0] + v.shape[0], cols}, q.v};
    qkv.v.insert(qkv.v.end(), k.v.begin(), k.v.end());
    qkv.v.insert(qkv.v.end(), v.v.begin(), v.v.end());
    Add(blk + "attn_qkv.weight", qkv);
    Add(blk + "attn_gate.weight", z);
    Add(blk + "ssm_ba.weight", Get(p + "in_proj_ba.weight"));
    Host a = Get(p + "A_log");
    for (float& x : a.v) x = -std::exp(x);
    Add(blk + "ssm_a", a);
    Add(blk + "ssm_dt.bias", Get(p + "dt_bias"));
    Host conv = Get(p + "conv1d.weight");
    conv.shape = {conv.shape[0], conv.shape[2]};  // [C, 1, K] squeezed
    Add(blk + "ssm_conv1d.weight", conv);
    Add(blk + "ssm_norm.weight", Get(p + "norm.weight"));
    Add(blk + "ssm_out.weight", Get(p + "out_proj.weight"));
  }

  void DeltaNet(const std::string& blk, const std::string& p) {
    if (c_.arch == Architecture::kQwen3Next) return DeltaNetNext(blk, p);
    const int64_t nk = c_.linear_num_key_heads, nv = c_.linear_num_value_heads;
    const int64_t dk = c_.linear_key_head_dim, dv = c_.linear_value_head_dim;
    Host qkv = Get(p + "in_proj_qkv.weight");
    TileHeads(qkv, 2 * nk * dk, nk, nv, dv, false);
    Add(blk + "attn_qkv.weight", qkv);
    Host z = Get(p + "in_proj_z.weight");
    TileHeads(z, 0, nk, nv, dv, false);
    Add(blk + "attn_gate.weight", z);
    Host beta = Get(p + "in_proj_b.weight"), alpha = Get(p + "in_proj_a.weight");
    TileHeads(beta, 0, nk, nv, 1, false);
    TileHeads(alpha, 0, nk, nv, 1, false);
    Add(blk + "ssm_beta.weight", beta);
    Add(blk + "ssm_alpha.weight", alpha);
    Host a = Get(p + "A_log");
    for (float& x : a.v) x = -std::exp(x);
    TileHeads(a, 0, nk, nv, 1, false);
    Add(blk + "ssm_a", a);
    Host dt = Get(p + "dt_bias");
    TileHeads(dt, 0, nk, nv, 1, false);
    Add(blk + "ssm_dt.bias", dt);
    Host conv = Get(p + "conv1d.weight");
    conv.shape = {conv.shape[0], conv.shape[2]};  // [C, 1, K] squeezed
    TileHeads(conv, 2 * nk * dk, nk, nv, dv, false);
    Add(blk + "ssm_conv1d.weight", conv);
    Add(blk + "ssm_norm.weight", Get(p + "norm.weight"));  // the gated norm: plain w, no + 1
    Host out = Get(p + "out_proj.weight");
    TileHeads(out, 0, nk, nv, dv, true);
    Add(blk + "ssm_out.weight", out);
  }

  DirFileSet files_;
  SafetensorsFile st_;
  ModelConfig c_;
  ConvertOptions options_;
  testing_gguf::Builder b_;
};

std::string Convert(const std::string& model, const ConvertOptions& options, const std::string& tag) {
  std::string path = ::testing::TempDir() + "/" + testing::ParamName(model) + "-" + tag + ".gguf";
  Converter(model, options).Write(path);
  return path;
}

using Comparison = testing::LogitComparison;
using testing::ComparePromptLogits;

class Qwen35Gguf : public ::testing::TestWithParam<std::string> {};

TEST_P(Qwen35Gguf, ReproducesTransformers) {
  const std::string model = GetParam();
  ConvertOptions options;
  options.mtp_layer = true;
  Converter converter(model, options);
  const ModelConfig& hf = converter.config();
  // The fixture must make the mapping matter.
  ASSERT_LT(hf.linear_num_key_heads, hf.linear_num_value_heads);
  std::string path = ::testing::TempDir() + "/" + testing::ParamName(model) + "-bf16.gguf";
  converter.Write(path);

  std::shared_ptr<const GgufFile> file = GgufFile::Open(path);
  ModelConfig c = GgufModelConfig(*file);
  EXPECT_EQ(c.arch, hf.arch);
  EXPECT_TRUE(c.linear_value_heads_tiled);
  EXPECT_EQ(c.num_layers, hf.num_layers);  // the MTP block is not a layer
  EXPECT_EQ(c.layer_types, hf.layer_types);
  EXPECT_EQ(c.mlp_types, hf.mlp_types);
  EXPECT_EQ(c.rope.rotary_dim, hf.rope.rotary_dim);
  EXPECT_EQ(c.rope.mrope_section, (std::vector<int>{11, 11, 10, 0}));
  EXPECT_FALSE(c.zero_centered_norm);  // the file holds 1 + w

  CpuBackend backend(2);
  auto loaded = LoadGgufModel(file, backend);
  testing::Reference ref(model);
  testing::ExpectReproducesReference(*loaded, ref, model + " as qwen35 GGUF (bf16, tiled heads)");

  // The same file run with the grouped mapping is wrong: the test sees the mapping.
  ModelConfig grouped = c;
  grouped.linear_value_heads_tiled = false;
  Model wrong(grouped, MakeGgufWeightSource(file, grouped), backend);
  Comparison bad = ComparePromptLogits(wrong, ref);
  std::cout << "[ metric ]   the same file with grouped heads: max |logit - ref| " << bad.max_abs_diff << "\n";
  EXPECT_GT(bad.max_abs_diff, 1e-2 * std::max(1.0, bad.max_abs_ref));
}

// Q8_0 weights whose value heads are tiled: in_proj_qkv (tiled rows) and out_proj (tiled columns) of the
// first DeltaNet layer. The model must compute what it computes from those weights dequantized to f32
// (the same file otherwise), whose tiled float path ReproducesTransformers checks. The distance to
// transformers is only reported: these random models' DeltaNet layers amplify weight rounding over long
// prompts (Q8_0 of one DeltaNet projection of layer 0 moves the logits by 0.2 to 2.8; of layer 3's
// attention output, by 0.01), so it measures the models, not the loader.
TEST_P(Qwen35Gguf, Q8_0WeightsWithTiledHeads) {
  const std::string model = GetParam();
  ConvertOptions options;
  options.q8_0 = {"blk.0.attn_qkv.weight", "blk.0.ssm_out.weight"};
  std::string q8_path = Convert(model, options, "q8_0");
  options.q8_0_as_f32 = true;
  std::string f32_path = Convert(model, options, "q8_0-dequantized");

  std::shared_ptr<const GgufFile> q8_file = GgufFile::Open(q8_path);
  for (const std::string& name : options.q8_0) {
    const GgufTensorInfo* t = q8_file->FindTensor(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type_name, "Q8_0") << name;
  }
  CpuBackend backend(2);
  auto quantized = LoadGgufModel(q8_file, backend);
  auto dequantized = LoadGgufModel(GgufFile::Open(f32_path), backend);
  testing::Reference ref(model);
  Comparison same = ComparePromptLogits(*quantized, ref, dequantized.get());
  Comparison vs_ref = ComparePromptLogits(*quantized, ref);
  std::cout << "[ metric ] " << model << " as qwen35 GGUF with two Q8_0 tensors: max |logit - dequantized f32 run| "
            << same.max_abs_diff << "; max |logit - ref| " << vs_ref.max_abs_diff << " (max |ref| "
            << vs_ref.max_abs_ref << "), argmax mismatches " << vs_ref.argmax_mismatches << "\n";
  EXPECT_EQ(same.argmax_mismatches, 0);
  EXPECT_LE(same.max_abs_diff, 1e-4 * std::max(1.0, same.max_abs_ref));
  EXPECT_GT(vs_ref.max_abs_diff, 0.0);  // the Q8_0 tensors are really in use
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Qwen35Gguf, ::testing::Values("qwen3.5-tiny", "qwen3.5-moe-tiny"),
                         [](const auto& info) { return testing::ParamName(info.param); });

// Qwen3, Qwen3-MoE and Qwen3-Next files converted from their fixtures reproduce transformers.
class ConvertedGguf : public ::testing::TestWithParam<std::string> {};

TEST_P(ConvertedGguf, ReproducesTransformers) {
  const std::string model = GetParam();
  Converter converter(model, ConvertOptions{});
  const ModelConfig& hf = converter.config();
  std::string path = ::testing::TempDir() + "/" + testing::ParamName(model) + "-converted.gguf";
  converter.Write(path);
  std::shared_ptr<const GgufFile> file = GgufFile::Open(path);
  ModelConfig c = GgufModelConfig(*file);
  EXPECT_EQ(c.arch, hf.arch);
  EXPECT_EQ(c.layer_types, hf.layer_types);
  EXPECT_EQ(c.mlp_types, hf.mlp_types);
  EXPECT_EQ(c.norm_topk_prob, hf.norm_topk_prob);
  EXPECT_FALSE(c.zero_centered_norm);
  EXPECT_FALSE(c.linear_value_heads_tiled);
  CpuBackend backend(2);
  auto loaded = LoadGgufModel(file, backend);
  testing::ExpectReproducesReference(*loaded, testing::Reference(model),
                                     model + " as " + file->architecture() + " GGUF (bf16)");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ConvertedGguf, ::testing::Values("qwen3-tiny", "qwen3-moe-tiny", "qwen3-next-tiny"),
                         [](const auto& info) { return testing::ParamName(info.param); });

// An architecture other than the five is still refused, naming it and the supported ones.
TEST(Qwen35GgufConfig, OtherArchitecturesAreRefused) {
  testing_gguf::Builder b;
  b.KvString("general.architecture", "qwen4");
  b.TensorData("token_embd.weight", {32, 8}, kGgmlF32, std::string(32 * 8 * 4, '\0'));
  std::string path = ::testing::TempDir() + "/qwen4.gguf";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << b.Build();
  try {
    GgufModelConfig(*GgufFile::Open(path));
    FAIL() << "qwen4 loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("'qwen4'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("qwen35moe"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace infernix
