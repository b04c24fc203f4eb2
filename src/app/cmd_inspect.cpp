// `infernix inspect [PATH]`: what a model file or folder holds, without loading the weights. A .gguf
// file: architecture, name, hyper-parameters (every <arch>.* key), tensors per type, tokenizer summary,
// chat template. A Hugging Face folder (no PATH: the embedded model) or a .safetensors file: the parsed
// config, tensors per dtype, tokenizer and template. --tensors lists every tensor; --json prints one
// JSON object instead of text (docs/cli.md).
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "base/error.h"
#include "chat/chat_template.h"
#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "formats/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_gguf.h"

namespace infernix {
namespace {

using Json = nlohmann::ordered_json;

struct InspectOptions {
  std::string path;
  bool tensors = false;
  bool json = false;
};

// Arrays longer than this are summarised ("[151936 x string]") rather than listed.
constexpr size_t kMaxListedArray = 64;

Json ValueToJson(const GgufValue& v);

Json ArrayToJson(const GgufArray& a) {
  if (a.size() > kMaxListedArray)
    return fmt::format("[{} x {}]", a.size(), GgufTypeName(a.element_type));
  Json out = Json::array();
  std::visit(
      [&](const auto& values) {
        for (const auto& x : values) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, GgufValue>) {
            out.push_back(ValueToJson(x));
          } else if constexpr (std::is_same_v<T, double>) {
            out.push_back(a.element_type == GgufType::kF32 ? Json(static_cast<float>(x)) : Json(x));
          } else {
            out.push_back(static_cast<T>(x));
          }
        }
      },
      a.values);
  return out;
}

Json ValueToJson(const GgufValue& v) {
  return std::visit(
      [&](const auto& x) -> Json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::shared_ptr<GgufArray>>) {
          return ArrayToJson(*x);
        } else if constexpr (std::is_same_v<T, double>) {
          return v.type == GgufType::kF32 ? Json(static_cast<float>(x)) : Json(x);
        } else {
          return Json(x);
        }
      },
      v.value);
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string Plain(const Json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

// Everything inspect reports, as JSON; the text form is printed from it.
Json InspectGguf(const std::string& path, bool list_tensors) {
  auto file = GgufFile::Open(path);
  Json out;
  out["format"] = "gguf";
  out["path"] = path;
  out["version"] = file->version();
  out["file_bytes"] = file->file_size();
  out["alignment"] = file->alignment();
  out["data_offset"] = file->data_offset();
  std::string arch = file->GetString("general.architecture").value_or("");
  out["architecture"] = arch;
  out["name"] = file->GetString("general.name").value_or("");
  Json general = Json::object(), hparams = Json::object();
  for (const auto& [key, value] : file->metadata()) {
    if (key.starts_with("general.")) general[key] = ValueToJson(value);
    if (!arch.empty() && key.starts_with(arch + ".")) hparams[key] = ValueToJson(value);
  }
  out["general"] = general;
  out["hyperparameters"] = hparams;

  uint64_t total = 0;
  Json tensors = Json::array(), types = Json::object();
  for (const auto& t : file->tensors()) {
    Json& type = types[t.type_name];
    if (type.is_null()) type = {{"count", 0}, {"bytes", 0}, {"supported", t.dtype.has_value()}};
    type["count"] = type["count"].get<int64_t>() + 1;
    type["bytes"] = type["bytes"].get<uint64_t>() + t.size_bytes;
    total += t.size_bytes;
    if (list_tensors)
      tensors.push_back({{"name", t.name},
                         {"type", t.type_name},
                         {"shape", std::vector<int64_t>(t.ne.rbegin(), t.ne.rend())},  // row-major
                         {"offset", t.offset},
                         {"bytes", t.size_bytes}});
  }
  out["tensor_count"] = file->tensors().size();
  out["tensor_bytes"] = total;
  out["types"] = types;

  GgufTokenizerSummary tok = SummarizeGgufTokenizer(*file);
  Json tokenizer = Json::object();
  if (!tok.model.empty()) {
    tokenizer["model"] = tok.model;
    tokenizer["pre"] = tok.pre;
    tokenizer["tokens"] = tok.n_tokens;
    tokenizer["merges"] = tok.n_merges;
    const GgufArray* strings = file->GetArray("tokenizer.ggml.tokens");
    const auto* list = strings ? std::get_if<std::vector<std::string>>(&strings->values) : nullptr;
    auto id = [&](const char* name, const std::optional<int64_t>& v) {
      if (!v) return;
      tokenizer[name] = *v;
      if (list && *v >= 0 && static_cast<size_t>(*v) < list->size())
        tokenizer[std::string(name) + "_token"] = (*list)[static_cast<size_t>(*v)];
    };
    id("bos_id", tok.bos_id);
    id("eos_id", tok.eos_id);
    id("pad_id", tok.pad_id);
    id("unk_id", tok.unk_id);
    if (tok.add_bos) tokenizer["add_bos"] = *tok.add_bos;
    try {
      (void)ReadGgufTokenizerSpec(*file);
      tokenizer["supported"] = true;
    } catch (const Error& e) {
      tokenizer["supported"] = false;
      tokenizer["problem"] = e.what();
    }
  }
  out["tokenizer"] = tokenizer;
  out["chat_template"] = tok.chat_template ? Json{{"present", true}, {"length", tok.chat_template->size()}}
                                           : Json{{"present", false}};
  if (list_tensors) out["tensors"] = tensors;
  return out;
}

void AddSafetensors(Json& out, const std::vector<const SafetensorsEntry*>& entries, bool list_tensors) {
  std::map<std::string, std::pair<int64_t, uint64_t>> by_dtype;
  uint64_t total = 0;
  Json tensors = Json::array();
  for (const SafetensorsEntry* e : entries) {
    auto& [count, bytes] = by_dtype[e->dtype_name];
    ++count;
    bytes += e->size_bytes;
    total += e->size_bytes;
    if (list_tensors)
      tensors.push_back({{"name", e->name}, {"type", e->dtype_name}, {"shape", e->shape}, {"bytes", e->size_bytes}});
  }
  out["tensor_count"] = entries.size();
  out["tensor_bytes"] = total;
  Json types = Json::object();
  for (const auto& [name, cb] : by_dtype) types[name] = {{"count", cb.first}, {"bytes", cb.second}};
  out["types"] = types;
  if (list_tensors) out["tensors"] = tensors;
}

Json ConfigToJson(const ModelConfig& c) {
  Json j;
  j["architecture"] = std::string(ArchitectureName(c.arch));
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_layers"] = c.num_layers;
  j["full_attention_layers"] = c.CountLayers(LayerType::kFullAttention);
  j["linear_attention_layers"] = c.CountLayers(LayerType::kLinearAttention);
  j["num_heads"] = c.num_heads;
  j["num_kv_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["intermediate_size"] = c.intermediate_size;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rope_theta"] = c.rope.theta;
  j["rotary_dim"] = c.rope.rotary_dim;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.num_experts > 0) {
    j["num_experts"] = c.num_experts;
    j["num_experts_per_tok"] = c.num_experts_per_tok;
    j["moe_intermediate_size"] = c.moe_intermediate_size;
    j["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
  }
  if (c.linear_num_value_heads > 0) {
    j["linear_num_key_heads"] = c.linear_num_key_heads;
    j["linear_num_value_heads"] = c.linear_num_value_heads;
    j["linear_key_head_dim"] = c.linear_key_head_dim;
    j["linear_value_head_dim"] = c.linear_value_head_dim;
    j["linear_conv_kernel_dim"] = c.linear_conv_kernel_dim;
  }
  return j;
}

// The chat template's origin and source length, as ChatTemplate::Load chooses it.
Json TemplateSummary(const FileSet& files) {
  try {
    (void)ChatTemplate::Load(files);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kNotFound) return Json{{"present", false}};
    return Json{{"present", true}, {"problem", e.what()}};
  }
  if (files.Exists("chat_template.jinja"))
    return Json{{"present", true}, {"file", "chat_template.jinja"},
                {"length", ReadText(files, "chat_template.jinja").size()}};
  Json config = Json::parse(ReadText(files, "tokenizer_config.json"), nullptr, false);
  Json out{{"present", true}, {"file", "tokenizer_config.json"}};
  if (config.is_object() && config["chat_template"].is_string())
    out["length"] = config["chat_template"].get<std::string>().size();
  return out;
}

Json InspectFolder(const std::string& path, bool list_tensors) {
  std::unique_ptr<FileSet> files = OpenModelFiles(path);
  Json out;
  out["format"] = "huggingface";
  out["path"] = files->Describe();
  out["config"] = ConfigToJson(LoadModelConfig(*files));
  WeightFiles weights(*files);
  std::vector<const SafetensorsEntry*> entries;
  for (const auto& name : weights.Names()) entries.push_back(weights.Find(name));
  AddSafetensors(out, entries, list_tensors);
  Json tokenizer = Json::object();
  tokenizer["present"] = files->Exists("tokenizer.json");
  if (files->Exists("tokenizer.json")) {
    try {
      auto t = Tokenizer::Load(*files);
      tokenizer["vocab_size"] = t->vocab_size();
      const SpecialTokens& s = t->special_tokens();
      if (s.bos_id) tokenizer["bos_id"] = *s.bos_id;
      if (s.eos_id) tokenizer["eos_id"] = *s.eos_id;
      if (s.eos_token) tokenizer["eos_id_token"] = *s.eos_token;
      if (s.pad_id) tokenizer["pad_id"] = *s.pad_id;
    } catch (const Error& e) {
      tokenizer["problem"] = e.what();
    }
  }
  out["tokenizer"] = tokenizer;
  out["chat_template"] = TemplateSummary(*files);
  return out;
}

Json InspectSafetensorsFile(const std::string& path, bool list_tensors) {
  auto parent = std::filesystem::path(path).parent_path().string();
  DirFileSet dir(parent.empty() ? "." : parent);
  std::string name = std::filesystem::path(path).filename().string();
  SafetensorsFile file(dir.Open(name), path);
  Json out;
  out["format"] = "safetensors";
  out["path"] = path;
  std::vector<const SafetensorsEntry*> entries;
  for (const auto& [n, e] : file.entries()) entries.push_back(&e);
  AddSafetensors(out, entries, list_tensors);
  return out;
}

std::string Bytes(uint64_t n) {
  if (n < 10 * 1024) return fmt::format("{} B", n);
  if (n < 10ull * 1024 * 1024) return fmt::format("{} B ({:.1f} KiB)", n, n / 1024.0);
  return fmt::format("{} B ({:.1f} MiB)", n, n / (1024.0 * 1024.0));
}

std::string Text(const Json& j) {
  std::string s;
  auto line = [&](const std::string& l) { s += l + "\n"; };
  const std::string format = j["format"];
  if (format == "gguf") {
    line(fmt::format("file: {} (GGUF v{}, {}, alignment {}, data at byte {})", Plain(j["path"]), Plain(j["version"]),
                     Bytes(j["file_bytes"].get<uint64_t>()), Plain(j["alignment"]), Plain(j["data_offset"])));
    line("architecture: " + Plain(j["architecture"]));
    line("name: " + Plain(j["name"]));
    line("hyper-parameters:");
    for (const auto& [k, v] : j["hyperparameters"].items()) line(fmt::format("  {} = {}", k, Plain(v)));
  } else if (format == "huggingface") {
    line("folder: " + Plain(j["path"]));
    const Json& c = j["config"];
    line(fmt::format("architecture: {} (model_type {})", Plain(c["architecture"]), Plain(c["model_type"])));
    line("config:");
    for (const auto& [k, v] : c.items())
      if (k != "architecture" && k != "model_type") line(fmt::format("  {} = {}", k, Plain(v)));
  } else {
    line("file: " + Plain(j["path"]) + " (safetensors)");
  }
  line(fmt::format("tensors: {}, {}", Plain(j["tensor_count"]), Bytes(j["tensor_bytes"].get<uint64_t>())));
  for (const auto& [type, info] : j["types"].items())
    line(fmt::format("  {:<8} {:>5} tensors  {}{}", type, Plain(info["count"]), Bytes(info["bytes"].get<uint64_t>()),
                     info.contains("supported") && !info["supported"].get<bool>() ? "  (not supported)" : ""));
  if (j.contains("tokenizer")) {
    const Json& t = j["tokenizer"];
    std::string desc;
    if (format == "gguf") {
      if (t.empty()) {
        desc = "none";
      } else {
        desc = fmt::format("{}, pre {}, {} tokens, {} merges", Plain(t["model"]), Plain(t["pre"]), Plain(t["tokens"]),
                           Plain(t["merges"]));
      }
    } else {
      desc = t["present"].get<bool>() ? "tokenizer.json" : "none";
      if (t.contains("vocab_size")) desc += fmt::format(", vocab size {}", Plain(t["vocab_size"]));
    }
    for (const char* k : {"bos_id", "eos_id", "pad_id", "unk_id"}) {
      if (!t.contains(k)) continue;
      std::string token_key = std::string(k) + "_token";
      desc += fmt::format(", {} {}", std::string_view(k).substr(0, 3), Plain(t[k]));
      if (t.contains(token_key)) desc += " " + Plain(t[token_key]);
    }
    if (t.contains("problem")) desc += " (" + Plain(t["problem"]) + ")";
    line("tokenizer: " + desc);
    const Json& ct = j["chat_template"];
    std::string tdesc = ct["present"].get<bool>() ? "present" : "none";
    if (ct.contains("length")) tdesc += fmt::format(" ({} chars)", Plain(ct["length"]));
    if (ct.contains("file")) tdesc += " in " + Plain(ct["file"]);
    if (ct.contains("problem")) tdesc += " (" + Plain(ct["problem"]) + ")";
    line("chat template: " + tdesc);
  }
  if (j.contains("tensors")) {
    line("tensor list (name, type, shape, bytes):");
    for (const Json& t : j["tensors"])
      line(fmt::format("  {}  {}  {}  {}", Plain(t["name"]), Plain(t["type"]),
                       ShapeText(t["shape"].get<std::vector<int64_t>>()), Plain(t["bytes"])));
  }
  return s;
}

void RunInspect(const InspectOptions& o) {
  Json j;
  std::error_code ec;
  bool is_file = !o.path.empty() && std::filesystem::is_regular_file(o.path, ec);
  if (is_file && o.path.ends_with(".safetensors")) {
    j = InspectSafetensorsFile(o.path, o.tensors);
  } else if (is_file) {
    j = InspectGguf(o.path, o.tensors);  // any other file: GGUF, or a clear "not a GGUF file" error
  } else {
    j = InspectFolder(o.path, o.tensors);
  }
  WriteStdout(o.json ? j.dump(2) + "\n" : Text(j));
}

}  // namespace

void RegisterInspectCommand(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Show what a model holds: a .gguf or .safetensors file, or a model folder (default: the embedded model)");
  CLI::Option* path = cmd->add_option("path", options->path, "A .gguf file, a .safetensors file or a model folder");
  cmd->add_option("--model", options->path, "Same as PATH")->excludes(path);
  cmd->add_flag("--tensors", options->tensors, "List every tensor (name, type, shape, bytes)");
  cmd->add_flag("--json", options->json, "Print one JSON object instead of text");
  cmd->callback([options] { RunInspect(*options); });
}

}  // namespace infernix
