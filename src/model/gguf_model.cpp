#include "model/gguf_model.h"

#include <cmath>
#include <map>
#include <variant>

#include <fmt/format.h>

#include "base/error.h"
#include "model/model.h"

namespace infernix {
namespace {

std::string Key(const std::string& arch, std::string_view key) { return arch + "." + std::string(key); }

int64_t RequirePositive(const GgufFile& f, const std::string& key) {
  int64_t v = f.RequireInt(key);
  if (v <= 0) ThrowError(ErrorCode::kInvalidFormat, "{}: metadata {} = {} must be positive", f.path(), key, v);
  return v;
}

int64_t TensorRows(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.FindTensor(name);
  if (t == nullptr) ThrowError(ErrorCode::kNotFound, "{}: tensor '{}' is missing", f.path(), name);
  return t->shape[0];
}

RopeConfig GgufRope(const GgufFile& f, const std::string& arch, int head_dim) {
  RopeConfig rope;
  rope.theta = f.GetFloat(Key(arch, "rope.freq_base")).value_or(10000.0);
  rope.rotary_dim = static_cast<int>(f.GetInt(Key(arch, "rope.dimension_count")).value_or(head_dim));
  if (rope.rotary_dim < 2 || rope.rotary_dim > head_dim || rope.rotary_dim % 2 != 0)
    ThrowError(ErrorCode::kInvalidFormat, "{}: {} = {} must be even and at most the head size {}", f.path(),
               Key(arch, "rope.dimension_count"), rope.rotary_dim, head_dim);
  rope.partial_rotary_factor = static_cast<double>(rope.rotary_dim) / head_dim;
  std::string type = f.GetString(Key(arch, "rope.scaling.type")).value_or("none");
  if (type == "none") return rope;
  rope.factor = f.GetFloat(Key(arch, "rope.scaling.factor")).value_or(1.0);
  if (type == "linear") {
    rope.type = RopeType::kLinear;
  } else if (type == "yarn") {
    rope.type = RopeType::kYarn;
    rope.original_max_position_embeddings = f.RequireInt(Key(arch, "rope.scaling.original_context_length"));
    rope.beta_fast = f.GetFloat(Key(arch, "rope.scaling.yarn_beta_fast")).value_or(32.0);
    rope.beta_slow = f.GetFloat(Key(arch, "rope.scaling.yarn_beta_slow")).value_or(1.0);
  } else {
    ThrowError(ErrorCode::kUnsupported, "{}: {} '{}' is not supported (none, linear, yarn)", f.path(),
               Key(arch, "rope.scaling.type"), type);
  }
  return rope;
}

// A tensor of the source: a view of the file's data (possibly reshaped), or a buffer computed at load.
struct Entry {
  const GgufTensorInfo* info = nullptr;
  Shape shape;          // the HF shape (same bytes as the file's tensor)
  int64_t slice = -1;   // >= 0: expert `slice` of a [E, rows, cols] tensor
  int owned = -1;       // >= 0: index into owned buffers
};

class GgufWeightSource final : public WeightSource {
 public:
  GgufWeightSource(std::shared_ptr<const GgufFile> file, const ModelConfig& c) : file_(std::move(file)) {
    Map("model.embed_tokens.weight", "token_embd.weight");
    Map("model.norm.weight", "output_norm.weight");
    if (file_->FindTensor("output.weight") != nullptr) Map("lm_head.weight", "output.weight");
    for (int l = 0; l < c.num_layers; ++l) MapLayer(c, l);
  }

  bool Contains(const std::string& name) const override { return entries_.count(name) > 0; }

  Tensor Get(const std::string& name, const Shape&) override {
    const Entry& e = entries_.at(name);
    if (e.owned >= 0) return owned_[static_cast<size_t>(e.owned)].view();
    Tensor t = file_->View(*e.info);
    if (e.slice >= 0) t = t.SliceRows(e.slice, 1);
    return Tensor{t.data, t.dtype, e.shape};
  }

  std::vector<std::string> Names() const override {
    std::vector<std::string> names;
    for (const auto& [name, e] : entries_) names.push_back(name);
    return names;
  }

  std::string FileOf(const std::string& name) const override {
    auto it = entries_.find(name);
    if (it == entries_.end() || it->second.info == nullptr) return file_->path();
    return fmt::format("{} (tensor {})", file_->path(), it->second.info->name);
  }
  std::string Describe() const override { return file_->path(); }

 private:
  const GgufTensorInfo* Find(const std::string& gguf_name) const { return file_->FindTensor(gguf_name); }

  // Maps `hf` to the file's tensor `gguf` when the file has it (the binder reports what is missing).
  void Map(const std::string& hf, const std::string& gguf) {
    const GgufTensorInfo* info = Find(gguf);
    if (info != nullptr) entries_[hf] = Entry{info, info->shape, -1, -1};
  }

  void MapReshaped(const std::string& hf, const std::string& gguf, Shape shape) {
    const GgufTensorInfo* info = Find(gguf);
    if (info == nullptr) return;
    if (shape.numel() != info->shape.numel())
      ThrowError(ErrorCode::kInvalidFormat, "{}: tensor '{}' has shape {}, expected {} elements", file_->path(), gguf,
                 info->shape.ToString(), shape.numel());
    entries_[hf] = Entry{info, shape, -1, -1};
  }

  int Own(HostBuffer buffer) {
    owned_.push_back(std::move(buffer));
    return static_cast<int>(owned_.size()) - 1;
  }

  // A float tensor of the file as f32 values (small tensors: gates, biases).
  std::vector<float> FloatValues(const GgufTensorInfo& info) const {
    Tensor t = file_->View(info);
    if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16)
      ThrowError(ErrorCode::kUnsupported, "{}: tensor '{}' is {}, expected a float type", file_->path(), info.name,
                 DTypeName(t.dtype));
    std::vector<float> v(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = LoadAsFloat(t, i);
    return v;
  }

  void MapLayer(const ModelConfig& c, int l) {
    std::string b = "blk." + std::to_string(l) + ".";
    std::string p = "model.layers." + std::to_string(l) + ".";
    Map(p + "input_layernorm.weight", b + "attn_norm.weight");
    Map(p + "post_attention_layernorm.weight", b + (c.is_hybrid() ? "post_attention_norm.weight" : "ffn_norm.weight"));
    if (c.layer_types[static_cast<size_t>(l)] == LayerType::kFullAttention) {
      std::string a = p + "self_attn.";
      Map(a + "q_proj.weight", b + "attn_q.weight");
      Map(a + "k_proj.weight", b + "attn_k.weight");
      Map(a + "v_proj.weight", b + "attn_v.weight");
      Map(a + "o_proj.weight", b + "attn_output.weight");
      Map(a + "q_norm.weight", b + "attn_q_norm.weight");
      Map(a + "k_norm.weight", b + "attn_k_norm.weight");
    } else {
      MapDeltaNet(c, b, p + "linear_attn.");
    }
    if (c.mlp_types[static_cast<size_t>(l)] == MlpType::kDense) {
      Map(p + "mlp.gate_proj.weight", b + "ffn_gate.weight");
      Map(p + "mlp.up_proj.weight", b + "ffn_up.weight");
      Map(p + "mlp.down_proj.weight", b + "ffn_down.weight");
      return;
    }
    Map(p + "mlp.gate.weight", b + "ffn_gate_inp.weight");
    MapExperts(c, b, p + "mlp.experts.");
    Map(p + "mlp.shared_expert.gate_proj.weight", b + "ffn_gate_shexp.weight");
    Map(p + "mlp.shared_expert.up_proj.weight", b + "ffn_up_shexp.weight");
    Map(p + "mlp.shared_expert.down_proj.weight", b + "ffn_down_shexp.weight");
    MapReshaped(p + "mlp.shared_expert_gate.weight", b + "ffn_gate_inp_shexp.weight", Shape{1, c.hidden_size});
  }

  // ffn_{gate,up,down}_exps hold all experts: [E, I, H] and [E, H, I]; each expert is a slice.
  void MapExperts(const ModelConfig& c, const std::string& b, const std::string& p) {
    const char* names[3][2] = {{"gate_proj", "ffn_gate_exps.weight"},
                               {"up_proj", "ffn_up_exps.weight"},
                               {"down_proj", "ffn_down_exps.weight"}};
    for (auto& [hf, gguf] : names) {
      const GgufTensorInfo* info = Find(b + gguf);
      if (info == nullptr) continue;
      if (info->shape.ndim != 3 || info->shape[0] != c.num_experts)
        ThrowError(ErrorCode::kInvalidFormat, "{}: tensor '{}{}' has shape {}, expected [{}, rows, cols]", file_->path(),
                   b, gguf, info->shape.ToString(), c.num_experts);
      for (int64_t e = 0; e < c.num_experts; ++e)
        entries_[p + std::to_string(e) + "." + hf + ".weight"] =
            Entry{info, Shape{info->shape[1], info->shape[2]}, e, -1};
    }
  }

  // Qwen3-Next's converter splits in_proj_qkvz into attn_qkv (q, k, v of all heads, the layout of
  // Qwen3.5's in_proj_qkv) and attn_gate (z), keeps in_proj_ba as ssm_ba, stores ssm_a = -exp(A_log),
  // renames dt_bias to ssm_dt.bias and squeezes the conv weight to [C, K]. Qwen3.5's (qwen35,
  // qwen35moe) writes in_proj_b / in_proj_a as ssm_beta / ssm_alpha and otherwise does the same, after
  // reordering every per-value-head tensor into tiled order (c.linear_value_heads_tiled): the tensors
  // are used as stored, and the delta rule maps value head h to key head h % nk.
  void MapDeltaNet(const ModelConfig& c, const std::string& b, const std::string& p) {
    int64_t nk = c.linear_num_key_heads, nv = c.linear_num_value_heads, r = nv / nk;
    int64_t conv_dim = 2 * nk * c.linear_key_head_dim + nv * c.linear_value_head_dim;
    Map(p + "in_proj_qkv.weight", b + "attn_qkv.weight");
    Map(p + "in_proj_z.weight", b + "attn_gate.weight");
    Map(p + "out_proj.weight", b + "ssm_out.weight");
    Map(p + "norm.weight", b + "ssm_norm.weight");
    Map(p + "dt_bias", b + "ssm_dt.bias");
    Map(p + "in_proj_b.weight", b + "ssm_beta.weight");
    Map(p + "in_proj_a.weight", b + "ssm_alpha.weight");
    MapReshaped(p + "conv1d.weight", b + "ssm_conv1d.weight", Shape{conv_dim, 1, c.linear_conv_kernel_dim});
    if (const GgufTensorInfo* a = Find(b + "ssm_a")) {
      std::vector<float> values = FloatValues(*a);
      HostBuffer a_log(DType::kF32, Shape{static_cast<int64_t>(values.size())});
      for (size_t i = 0; i < values.size(); ++i) {
        if (!(values[i] < 0))
          ThrowError(ErrorCode::kInvalidFormat, "{}: tensor '{}ssm_a' element {} is {}, expected -exp(A_log) < 0",
                     file_->path(), b, i, values[i]);
        a_log.view().as<float>()[i] = std::log(-values[i]);
      }
      entries_[p + "A_log"] = Entry{nullptr, a_log.view().shape, -1, Own(std::move(a_log))};
    }
    // ssm_ba rows, per key head g: b_g [r], a_g [r] (Qwen3-Next's in_proj_ba, unchanged).
    if (const GgufTensorInfo* ba = Find(b + "ssm_ba.weight")) {
      if (ba->shape.ndim != 2 || ba->shape[0] != 2 * nv)
        ThrowError(ErrorCode::kInvalidFormat, "{}: tensor '{}ssm_ba.weight' has shape {}, expected [{}, hidden]",
                   file_->path(), b, ba->shape.ToString(), 2 * nv);
      Tensor t = file_->View(*ba);
      HostBuffer bw = GatherWeightRows(t, InterleavedRows(nk, 2 * r, 0, r));
      HostBuffer aw = GatherWeightRows(t, InterleavedRows(nk, 2 * r, r, r));
      Shape shape = bw.view().shape;
      entries_[p + "in_proj_b.weight"] = Entry{ba, shape, -1, Own(std::move(bw))};
      entries_[p + "in_proj_a.weight"] = Entry{ba, shape, -1, Own(std::move(aw))};
    }
  }

  std::shared_ptr<const GgufFile> file_;
  std::map<std::string, Entry> entries_;
  std::vector<HostBuffer> owned_;
};

}  // namespace

ModelConfig GgufModelConfig(const GgufFile& f) {
  ModelConfig c;
  std::string arch = f.architecture();
  c.model_type = arch;
  if (arch == "qwen3") {
    c.arch = Architecture::kQwen3;
  } else if (arch == "qwen3moe") {
    c.arch = Architecture::kQwen3Moe;
  } else if (arch == "qwen3next") {
    c.arch = Architecture::kQwen3Next;
  } else if (arch == "qwen35") {
    c.arch = Architecture::kQwen35;
  } else if (arch == "qwen35moe") {
    c.arch = Architecture::kQwen35Moe;
  } else {
    ThrowError(ErrorCode::kUnsupported,
               "{}: GGUF architecture '{}' is not supported (qwen3, qwen3moe, qwen3next, qwen35, qwen35moe)", f.path(),
               arch);
  }
  const bool qwen35 = c.arch == Architecture::kQwen35 || c.arch == Architecture::kQwen35Moe;
  c.vocab_size = TensorRows(f, "token_embd.weight");
  c.hidden_size = RequirePositive(f, Key(arch, "embedding_length"));
  // Qwen3.5's converter appends its multi-token-prediction layers to the blocks (block_count includes
  // them, nextn_predict_layers counts them); the model runs the others and ignores those.
  int64_t block_count = RequirePositive(f, Key(arch, "block_count"));
  int64_t nextn = f.GetInt(Key(arch, "nextn_predict_layers")).value_or(0);
  if (nextn < 0 || nextn >= block_count)
    ThrowError(ErrorCode::kInvalidFormat, "{}: {} = {} must be in [0, block_count {})", f.path(),
               Key(arch, "nextn_predict_layers"), nextn, block_count);
  c.num_layers = static_cast<int>(block_count - nextn);
  c.num_heads = static_cast<int>(RequirePositive(f, Key(arch, "attention.head_count")));
  c.num_kv_heads = static_cast<int>(f.GetInt(Key(arch, "attention.head_count_kv")).value_or(c.num_heads));
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0)
    ThrowError(ErrorCode::kInvalidFormat, "{}: head_count {} is not a multiple of head_count_kv {}", f.path(),
               c.num_heads, c.num_kv_heads);
  c.head_dim = static_cast<int>(f.GetInt(Key(arch, "attention.key_length")).value_or(c.hidden_size / c.num_heads));
  int64_t value_length = f.GetInt(Key(arch, "attention.value_length")).value_or(c.head_dim);
  if (value_length != c.head_dim)
    ThrowError(ErrorCode::kUnsupported, "{}: attention.value_length {} differs from key_length {}", f.path(),
               value_length, c.head_dim);
  c.rms_norm_eps = f.GetFloat(Key(arch, "attention.layer_norm_rms_epsilon")).value_or(1e-6);
  c.max_position_embeddings = f.GetInt(Key(arch, "context_length")).value_or(32768);
  c.tie_word_embeddings = f.FindTensor("output.weight") == nullptr;
  c.rope = GgufRope(f, arch, c.head_dim);
  if (qwen35) {
    // Interleaved MRoPE; for text the three position streams are equal and it is ordinary RoPE on the
    // rotary dims (as for the Hugging Face checkpoints). Recorded for completeness.
    c.rope.mrope_interleaved = true;
    if (const GgufArray* sections = f.GetArray(Key(arch, "rope.dimension_sections"))) {
      const auto* values = std::get_if<std::vector<int64_t>>(&sections->values);
      if (values == nullptr)
        ThrowError(ErrorCode::kInvalidFormat, "{}: {} must be an integer array", f.path(),
                   Key(arch, "rope.dimension_sections"));
      for (int64_t v : *values) c.rope.mrope_section.push_back(static_cast<int>(v));
    }
  }
  c.intermediate_size = f.GetInt(Key(arch, "feed_forward_length")).value_or(0);

  if (c.is_hybrid()) {
    int64_t interval = f.GetInt(Key(arch, "full_attention_interval")).value_or(4);
    if (interval <= 0)
      ThrowError(ErrorCode::kInvalidFormat, "{}: full_attention_interval {} must be positive", f.path(), interval);
    for (int i = 0; i < c.num_layers; ++i)
      c.layer_types.push_back((i + 1) % interval == 0 ? LayerType::kFullAttention : LayerType::kLinearAttention);
    c.linear_conv_kernel_dim = static_cast<int>(RequirePositive(f, Key(arch, "ssm.conv_kernel")));
    c.linear_key_head_dim = static_cast<int>(RequirePositive(f, Key(arch, "ssm.state_size")));
    c.linear_num_key_heads = static_cast<int>(RequirePositive(f, Key(arch, "ssm.group_count")));
    c.linear_num_value_heads = static_cast<int>(RequirePositive(f, Key(arch, "ssm.time_step_rank")));
    int64_t inner = RequirePositive(f, Key(arch, "ssm.inner_size"));
    if (inner % c.linear_num_value_heads != 0 || c.linear_num_value_heads % c.linear_num_key_heads != 0)
      ThrowError(ErrorCode::kInvalidFormat, "{}: ssm.inner_size {}, time_step_rank {}, group_count {} do not divide",
                 f.path(), inner, c.linear_num_value_heads, c.linear_num_key_heads);
    c.linear_value_head_dim = static_cast<int>(inner / c.linear_num_value_heads);
    c.gated_attention = true;
    // The converter stores the zero-centred norms' weights as 1 + w (in f32), so the standard convention
    // applies to this file.
    c.zero_centered_norm = false;
    // Qwen3.5's converter reorders the DeltaNet value heads from grouped to tiled order (when nk != nv;
    // when they are equal the two orders are the same).
    c.linear_value_heads_tiled = qwen35;
  } else {
    c.layer_types.assign(static_cast<size_t>(c.num_layers), LayerType::kFullAttention);
  }

  if (c.arch != Architecture::kQwen3 && c.arch != Architecture::kQwen35) {
    c.num_experts = static_cast<int>(RequirePositive(f, Key(arch, "expert_count")));
    c.num_experts_per_tok = static_cast<int>(RequirePositive(f, Key(arch, "expert_used_count")));
    if (c.num_experts_per_tok > c.num_experts)
      ThrowError(ErrorCode::kInvalidFormat, "{}: expert_used_count {} exceeds expert_count {}", f.path(),
                 c.num_experts_per_tok, c.num_experts);
    c.moe_intermediate_size = RequirePositive(f, Key(arch, "expert_feed_forward_length"));
    c.shared_expert_intermediate_size = f.GetInt(Key(arch, "expert_shared_feed_forward_length")).value_or(0);
    // llama.cpp renormalises the top-k weights of both architectures, as their configs ask.
    c.norm_topk_prob = f.GetBool(Key(arch, "expert_weights_norm")).value_or(true);
  }
  for (int l = 0; l < c.num_layers; ++l) {
    bool moe = c.num_experts > 0 && f.FindTensor("blk." + std::to_string(l) + ".ffn_gate_inp.weight") != nullptr;
    c.mlp_types.push_back(moe ? MlpType::kMoe : MlpType::kDense);
    if (!moe && c.intermediate_size <= 0)
      ThrowError(ErrorCode::kInvalidFormat, "{}: layer {} has a dense MLP but {} is missing", f.path(), l,
                 Key(arch, "feed_forward_length"));
  }
  return c;
}

std::unique_ptr<WeightSource> MakeGgufWeightSource(std::shared_ptr<const GgufFile> file, const ModelConfig& config) {
  return std::make_unique<GgufWeightSource>(std::move(file), config);
}

std::unique_ptr<Model> LoadGgufModel(std::shared_ptr<const GgufFile> file, Backend& backend) {
  ModelConfig config = GgufModelConfig(*file);
  return LoadGgufModel(std::move(file), std::move(config), backend);
}

std::unique_ptr<Model> LoadGgufModel(std::shared_ptr<const GgufFile> file, ModelConfig config, Backend& backend) {
  auto weights = MakeGgufWeightSource(std::move(file), config);
  return std::make_unique<Model>(std::move(config), std::move(weights), backend);
}

}  // namespace infernix
