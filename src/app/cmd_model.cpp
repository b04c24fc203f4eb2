// `infernix logits` and `infernix generate`: the model-level CLI contract, and the options every
// model-running subcommand shares (model_options.h).
//   logits   writes the f32 logits of every position, little-endian, row-major [n_tokens, vocab_size]
//   generate prints the greedily generated token ids as a JSON array
#include <cstdio>
#include <fstream>
#include <memory>

#include "app/cli_checks.h"
#include "app/commands.h"
#include "app/model_options.h"
#include "base/error.h"
#include "engine/backend_factory.h"
#include "engine/generator.h"
#include "formats/hf_config.h"
#include "model/model.h"

namespace infernix {
namespace {

struct CommonOptions {
  std::string model_path;
  std::string tokens;
  BackendOptions backend;
  bool dummy_weights = false;
  KvCacheType kv_cache_type = KvCacheType::kActivation;
};

void AddCommonOptions(CLI::App* cmd, CommonOptions& o) {
  cmd->add_option("--model", o.model_path,
                  "Model folder (config.json + *.safetensors); default: the embedded qwen3-next-e2e model");
  cmd->add_option("--tokens", o.tokens, "Prompt token ids, comma-separated (e.g. 1,2,3)")->required();
  AddBackendOptions(cmd, o.backend, o.dummy_weights);
  AddKvCacheOption(cmd, o.kv_cache_type);
}

struct Loaded {
  std::unique_ptr<ModelPackage> package;  // null with --dummy-weights
  std::unique_ptr<FileSet> files;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};

Loaded Load(const CommonOptions& o) {
  Loaded l;
  if (!o.dummy_weights) l.package = OpenModel(o.model_path);
  l.backend = CreateBackend(o.backend);
  if (o.dummy_weights) {
    l.model = LoadModelWithDummyWeights(LoadConfigForDummyWeights(o.model_path, &l.files), *l.backend);
  } else {
    l.model = l.package->LoadModel(*l.backend);
  }
  return l;
}

}  // namespace

void AddDeviceOptions(CLI::App* cmd, BackendOptions& backend) {
  cmd->add_option("--backend", backend.name, "Compute backend: auto (cuda when a usable GPU is present, else cpu), cpu or cuda")
      ->capture_default_str();
  cmd->add_option("--threads", backend.n_threads, "CPU threads (0 = one per hardware thread)")
      ->capture_default_str()
      ->check(WholeNumber(0, static_cast<int64_t>(BackendOptions::kMaxThreads)));
  cmd->add_option("--gpu", backend.cuda_device, "CUDA: which GPU")->capture_default_str()->check(WholeNumber(0, 1023));
  cmd->add_flag("!--no-cuda-graphs", backend.cuda_graphs, "CUDA: launch decode steps op by op instead of replaying graphs");
}

void AddBackendOptions(CLI::App* cmd, BackendOptions& backend, bool& dummy_weights) {
  AddDeviceOptions(cmd, backend);
  cmd->add_flag("--dummy-weights", dummy_weights,
                "Random weights of the right dtypes and shapes, made from the config alone (--model: a folder with "
                "config.json, or a config .json file); for benchmarks");
}

CLI::Option* AddKvCacheOption(CLI::App* cmd, KvCacheType& kv_type) {
  return cmd
      ->add_option_function<std::string>(
          "--kv-cache-dtype",
          [&kv_type](const std::string& name) {
            kv_type = name == "fp8" ? KvCacheType::kF8E4M3 : KvCacheType::kActivation;
          },
          "How the KV cache stores keys and values: auto, the backend's activation type (bf16 on CUDA, f32 on "
          "CPU); fp8, E4M3 with a power-of-two scale per row (one token's key or value for one KV head), about "
          "half the memory of bf16 keys and values (the CPU backend rounds them the same way but keeps f32)")
      ->check(CLI::IsMember({"auto", "fp8"}))
      ->default_str("auto");
}

std::string KvCacheTypeName(KvCacheType kv_type, DType activation_dtype) {
  return kv_type == KvCacheType::kF8E4M3 ? "fp8 e4m3" : std::string(DTypeName(activation_dtype));
}

ModelConfig LoadConfigForDummyWeights(const std::string& model_path, std::unique_ptr<FileSet>* files) {
  bool json_file = model_path.size() > 5 && model_path.compare(model_path.size() - 5, 5, ".json") == 0;
  if (json_file) return ParseModelConfig(ReadFileText(model_path), model_path);
  *files = OpenModelFiles(model_path);
  return LoadModelConfig(**files);
}

void RegisterModelCommands(CLI::App& app) {
  auto logits_opts = std::make_shared<CommonOptions>();
  auto out_path = std::make_shared<std::string>();
  CLI::App* logits = app.add_subcommand(
      "logits", "Write the float32 logits of every prompt position to a file (little-endian, [n_tokens, vocab_size])");
  AddCommonOptions(logits, *logits_opts);
  logits->add_option("--out", *out_path, "Output file")->required();
  logits->callback([logits_opts, out_path] {
    std::vector<int32_t> tokens = ParseTokenList(logits_opts->tokens);
    Loaded l = Load(*logits_opts);
    std::vector<float> values = PromptLogits(*l.model, tokens, logits_opts->kv_cache_type);
    std::ofstream out(*out_path, std::ios::binary | std::ios::trunc);
    if (!out) ThrowError(ErrorCode::kIo, "--out {}: cannot open for writing", *out_path);
    out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
    if (!out) ThrowError(ErrorCode::kIo, "--out {}: write failed", *out_path);
  });

  auto gen_opts = std::make_shared<CommonOptions>();
  auto max_tokens = std::make_shared<int>(16);
  auto stop_at_eos = std::make_shared<bool>(false);
  auto ctx_size = std::make_shared<int64_t>(0);
  CLI::App* generate =
      app.add_subcommand("generate", "Greedy generation: print the new token ids as a JSON array");
  AddCommonOptions(generate, *gen_opts);
  generate->add_option("--max-tokens", *max_tokens, "Number of tokens to generate")
      ->capture_default_str()
      ->check(WholeNumber(0, kMaxContextOption));
  generate->add_flag("--stop-at-eos", *stop_at_eos,
                     "Stop after an end-of-sequence token (from generation_config.json); default: never stop early");
  generate->add_option("--ctx-size", *ctx_size,
                       "Context size in tokens (prompt + generated), at most what the model is configured for "
                       "(max_position_embeddings, or with RoPE scaling the scaled length); 0 = that maximum")
      ->capture_default_str()
      ->check(WholeNumber(0, kMaxContextOption));
  generate->callback([gen_opts, max_tokens, stop_at_eos, ctx_size] {
    std::vector<int32_t> tokens = ParseTokenList(gen_opts->tokens);
    Loaded l = Load(*gen_opts);
    GreedyOptions g;
    g.max_new_tokens = *max_tokens;
    g.stop_at_eos = *stop_at_eos;
    g.kv_cache_type = gen_opts->kv_cache_type;
    if (l.package) g.eos_token_ids = l.package->LoadGenerationDefaults().eos_token_ids;
    g.max_context = l.model->config().CheckedContextSize(*ctx_size, fmt::format("--ctx-size {}", *ctx_size));
    std::vector<int32_t> out = GreedyGenerate(*l.model, tokens, g);
    std::string s = "[";
    for (size_t i = 0; i < out.size(); ++i) s += (i ? "," : "") + std::to_string(out[i]);
    std::printf("%s]\n", s.c_str());
  });
}

}  // namespace infernix
