// `infernix bench`: llama-bench-style throughput of one model on one backend.
//   pp<N>  prompt processing: one sequence of N tokens in one forward pass (median of repetitions)
//   tg<M>  generation: M decode steps of B sequences at once (B = each batch size), one token each;
//          with --depth D ("tg<M> @ d<D>") after every sequence was prefilled with D tokens (not timed);
//          each step reads its logits back, or with --greedy takes the backend's greedy picks (with
//          --sample its top-k draws at Qwen3's recommended settings), queuing each step before reading the
//          picks of the one before (its ids fed from them on the backend), as the server's engine does;
//          --sync-picks waits for each step's picks first; --host-sample reads the logits back and samples
//          them with the engine's sampler
// Each state holds what its test needs, or with --ctx-size as many tokens as a server's slots would.
// For the CUDA backend it first measures the device's ceilings in the same process (copy bandwidth,
// BF16 GEMM rate) and reports decode as the fraction of copy bandwidth used (bytes read per step / step
// time) and prefill as the fraction of the GEMM rate reached (model FLOPs / time).
// Byte and FLOP counts come from the config (bf16 weights; MoE: the routed experts' distinct upper bound;
// KV bytes as --kv-cache-dtype stores them: bf16, or with fp8 a byte per value and an f32 scale per row;
// each sequence's f32 conv window and recurrent state of every Gated DeltaNet layer, which a step reads
// whole). Not counted: norm and conv1d weights and the embedding row (under 0.1% of a step's bytes).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <span>
#include <thread>

#include "app/cli_checks.h"
#include "app/commands.h"
#include "app/model_options.h"
#include "base/error.h"
#include "base/int_list.h"
#include "base/thread_pool.h"
#include "engine/backend_factory.h"
#include "engine/sampling.h"
#include "model/dummy_weights.h"
#include "model/model.h"

namespace infernix {
namespace {

struct BenchOptions {
  std::string model_path;
  bool dummy_weights = false;
  BackendOptions backend;
  int64_t n_prompt = 512;
  int64_t n_gen = 128;
  std::string depths = "0";  // context tokens of each sequence before the timed decode steps
  int64_t ctx_size = 0;      // > 0: tokens each sequence's state holds (the server's --ctx-size); 0: what the run needs
  std::string batches = "1,2,4,8";
  int repetitions = 3;
  std::string json_path;
  std::string dummy_quant;  // empty: bf16
  int num_layers = 0;       // > 0: keep only the first N layers (dummy weights)
  KvCacheType kv_cache_type = KvCacheType::kActivation;
  bool greedy = false;       // decode steps take the backend's greedy picks instead of reading the logits back
  bool sample = false;       // ... the backend's top-k draws (kBenchSampling)
  bool host_sample = false;  // decode steps read the logits back and the engine's sampler draws (kBenchSampling)
  bool sync_picks = false;   // with greedy or sample: a step is queued only after the picks before it are read
  bool picks() const { return greedy || sample; }
};

// --sample and --host-sample: Qwen3's recommended settings (its generation_config.json), described as
// kBenchSamplingName.
constexpr const char* kBenchSamplingName = "T 0.6, top-k 20, top-p 0.95";
SamplingParams BenchSampling(int s) {
  SamplingParams p;
  p.temperature = 0.6;
  p.top_k = 20;
  p.top_p = 0.95;
  p.seed = 1000 + static_cast<uint64_t>(s);
  return p;
}

// The first `n` layers of `c` (a model too large for the device, measured per layer).
ModelConfig FirstLayers(ModelConfig c, int n) {
  if (n <= 0) return c;
  if (n > c.num_layers)
    ThrowError(ErrorCode::kInvalidArgument, "--num-layers {}: the model has only {} layers", n, c.num_layers);
  c.num_layers = n;
  c.layer_types.resize(static_cast<size_t>(n));
  c.mlp_types.resize(static_cast<size_t>(n));
  return c;
}

// How the decode steps use their logits, for the header line.
std::string PicksName(const BenchOptions& o) {
  if (o.host_sample) return fmt::format("; the logits read back and sampled ({}) on the host", kBenchSamplingName);
  if (!o.picks()) return "";
  return fmt::format("; {} on the backend, each step queued {} the picks before it are read",
                     o.greedy ? "greedy picks" : fmt::format("draws ({})", kBenchSamplingName),
                     o.sync_picks ? "after" : "before");
}

// A block type by name (every GGUF block type, and f8_e4m3_b128).
DType ParseDummyQuant(const std::string& name) {
  if (std::optional<DType> t = DTypeFromName(name); t && IsBlockQuantized(*t)) return *t;
  ThrowError(ErrorCode::kInvalidArgument, "--dummy-quant: '{}' is not one of {}", name, BlockQuantizedNames());
}

// Parameters (elements) of the matrix products one token goes through, excluding the embedding and
// the LM head; MoE layers count `experts_read` routed experts.
struct ModelCounts {
  double linear_params = 0;       // per token (with top_k experts)
  double router_params = 0;       // of them, the MoE routers and shared-expert gates
  double lm_head_params = 0;
  double attention_flops_per_pair = 0;  // FLOPs per (query, key) pair summed over attention layers
  double kv_bytes_per_token = 0;
};

double LayerParams(const ModelConfig& c, int l, double experts) {
  const double h = static_cast<double>(c.hidden_size);
  double p = 0;
  if (c.layer_types[static_cast<size_t>(l)] == LayerType::kFullAttention) {
    double hq = c.num_heads, hkv = c.num_kv_heads, d = c.head_dim;
    p += hq * d * (c.gated_attention ? 2 : 1) * h + 2 * hkv * d * h + h * hq * d;
  } else {
    double nk = c.linear_num_key_heads, nv = c.linear_num_value_heads, dk = c.linear_key_head_dim,
           dv = c.linear_value_head_dim;
    p += (2 * nk * dk + nv * dv) * h + nv * dv * h + 2 * nv * h + h * nv * dv;
  }
  if (c.mlp_types[static_cast<size_t>(l)] == MlpType::kMoe) {
    p += static_cast<double>(c.num_experts) * h + experts * 3 * h * static_cast<double>(c.moe_intermediate_size);
    if (c.shared_expert_intermediate_size > 0) p += 3 * h * static_cast<double>(c.shared_expert_intermediate_size) + h;
  } else {
    p += 3 * h * static_cast<double>(c.intermediate_size);
  }
  return p;
}

// Bytes of one token's keys and values in one attention layer: bf16 values, or FP8 codes with an f32 scale
// per (key or value) row of each KV head, as the CUDA backend stores them.
double KvBytesPerTokenLayer(const ModelConfig& c, KvCacheType kv_type) {
  const double rows = 2.0 * c.num_kv_heads;
  return kv_type == KvCacheType::kF8E4M3 ? rows * (c.head_dim + 4.0) : rows * c.head_dim * 2.0;
}

ModelCounts Count(const ModelConfig& c, double experts_per_moe_layer, KvCacheType kv_type) {
  ModelCounts m;
  for (int l = 0; l < c.num_layers; ++l) {
    m.linear_params += LayerParams(c, l, experts_per_moe_layer);
    if (c.mlp_types[static_cast<size_t>(l)] == MlpType::kMoe)
      m.router_params += static_cast<double>(c.hidden_size) *
                         static_cast<double>(c.num_experts + (c.shared_expert_intermediate_size > 0 ? 1 : 0));
  }
  m.lm_head_params = static_cast<double>(c.vocab_size) * static_cast<double>(c.hidden_size);
  const double attn_layers = c.CountLayers(LayerType::kFullAttention);
  m.attention_flops_per_pair = attn_layers * 4.0 * c.num_heads * c.head_dim;  // QK^T and PV
  m.kv_bytes_per_token = attn_layers * KvBytesPerTokenLayer(c, kv_type);
  return m;
}

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Row {
  std::string test;
  int batch = 1;
  int64_t depth = 0;
  double tokens_per_s = 0, ms = 0, ceiling_fraction = -1;
  std::string ceiling;
  double bytes = 0, state_bytes = 0;  // generation: bytes read per step, of them the DeltaNet states'
};

void Run(const BenchOptions& o) {
  const std::vector<int64_t> batches = ParseIntList(o.batches, "--batch", 1, "a positive batch size", "1,2,4,8");
  const std::vector<int64_t> depths =
      ParseIntList(o.depths, "--depth", 0, "a context length of 0 or more tokens", "0,4096");
  std::unique_ptr<FileSet> files;
  std::unique_ptr<ModelPackage> package;
  if (!o.dummy_weights) package = OpenModel(o.model_path);
  std::unique_ptr<Backend> backend = CreateBackend(o.backend);
  auto t_load = std::chrono::steady_clock::now();
  if ((!o.dummy_quant.empty() || o.num_layers != 0) && !o.dummy_weights)
    ThrowError(ErrorCode::kInvalidArgument, "--dummy-quant and --num-layers need --dummy-weights");
  if (o.greedy + o.sample + o.host_sample > 1)
    ThrowError(ErrorCode::kInvalidArgument, "--greedy, --sample and --host-sample exclude each other");
  if (o.sync_picks && !o.picks()) ThrowError(ErrorCode::kInvalidArgument, "--sync-picks needs --greedy or --sample");
  const DType linear_dtype = o.dummy_quant.empty() ? DType::kBF16 : ParseDummyQuant(o.dummy_quant);
  std::unique_ptr<Model> model =
      o.dummy_weights ? LoadModelWithDummyWeights(FirstLayers(LoadConfigForDummyWeights(o.model_path, &files),
                                                              o.num_layers),
                                                  *backend, 1, linear_dtype)
                      : package->LoadModel(*backend);
  const ModelConfig& c = model->config();
  // Decode steps before the timed ones (CUDA: graph capture). Pipelined steps (--greedy, --sample) warm up in
  // three runs of them: each run's first step is queued on its own, the others fed from the picks before
  // them, alternating between two recorded units.
  constexpr int64_t kWarmupSteps = 4;
  const bool pipelined = o.picks() && !o.sync_picks;
  const int64_t warmup = pipelined ? 3 * kWarmupSteps : kWarmupSteps;
  const int64_t context_limit = c.ContextLimit();  // max_position_embeddings, or the RoPE-scaled length
  for (int64_t depth : depths)
    if (depth > 0 && depth + o.n_gen + warmup > context_limit)
      ThrowError(ErrorCode::kInvalidArgument,
                 "--depth {} + --n-gen {} + {} warm-up steps = {} tokens exceed the {} tokens the model is configured "
                 "for",
                 depth, o.n_gen, warmup, depth + o.n_gen + warmup, context_limit);
  // --ctx-size: every state holds that many tokens, as a server started with it sizes its slots (the CUDA
  // decode attention's split count follows the state's size); it must hold what the run puts in it.
  c.CheckedContextSize(o.ctx_size, fmt::format("--ctx-size {}", o.ctx_size));
  if (o.ctx_size > 0) {
    const int64_t deepest = *std::max_element(depths.begin(), depths.end());
    const int64_t needed = std::max(o.n_prompt, deepest + o.n_gen + warmup);
    if (o.ctx_size < needed)
      ThrowError(ErrorCode::kInvalidArgument,
                 "--ctx-size {} is less than the {} tokens the run needs (the prompt test's --n-prompt {}; "
                 "--depth {} + --n-gen {} + {} warm-up steps)",
                 o.ctx_size, needed, o.n_prompt, deepest, o.n_gen, warmup);
  }
  auto state_tokens = [&](int64_t needed) { return o.ctx_size > 0 ? o.ctx_size : needed; };
  const std::string kv_cache = KvCacheTypeName(o.kv_cache_type, backend->activation_dtype());
  std::printf("model: %s, %d layers, hidden %lld, vocab %lld%s; backend %s; KV cache %s%s%s; loaded in %.1f s\n",
              std::string(ArchitectureName(c.arch)).c_str(), c.num_layers, static_cast<long long>(c.hidden_size),
              static_cast<long long>(c.vocab_size),
              o.dummy_weights ? fmt::format(" (dummy {} weights)", DTypeName(linear_dtype)).c_str() : "",
              std::string(backend->name()).c_str(), kv_cache.c_str(),
              o.ctx_size > 0 ? fmt::format(", states of {} tokens", o.ctx_size).c_str() : "", PicksName(o).c_str(),
              Seconds(t_load, std::chrono::steady_clock::now()));
  std::optional<DeviceCeilings> ceil = MeasureDeviceCeilings(*backend);
  if (ceil)
    std::printf("device: %s; measured copy bandwidth %.0f GB/s (read + write), BF16 GEMM %.0f TFLOP/s\n",
                ceil->name.c_str(), ceil->copy_bytes_per_s / 1e9, ceil->bf16_flops_per_s / 1e12);

  std::vector<Row> rows;
  const int64_t vocab = c.vocab_size;
  // --host-sample: as the engine's sampling pool (up to one thread per sequence).
  std::unique_ptr<ThreadPool> sampling_pool;
  if (o.host_sample)
    sampling_pool = std::make_unique<ThreadPool>(
        std::min<size_t>(std::max<size_t>(1, std::thread::hardware_concurrency()),
                         static_cast<size_t>(*std::max_element(batches.begin(), batches.end()))));
  // Prompt processing.
  {
    ModelCounts mc = Count(c, c.num_experts_per_tok, o.kv_cache_type);
    const double n = static_cast<double>(o.n_prompt);
    const double flops = 2.0 * n * mc.linear_params + 2.0 * mc.lm_head_params + mc.attention_flops_per_pair * n * (n + 1) / 2;
    std::vector<int32_t> tokens(static_cast<size_t>(o.n_prompt));
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7919 + 13) % vocab);
    std::vector<double> times;
    for (int r = 0; r <= o.repetitions; ++r) {  // r == 0: warm-up
      auto state = backend->CreateState(model->MakeStateSpec(1, state_tokens(o.n_prompt), o.kv_cache_type));
      auto t0 = std::chrono::steady_clock::now();
      model->Forward(ForwardBatch::Single(tokens, 0, 0, false), *state);
      auto t1 = std::chrono::steady_clock::now();
      if (r > 0) times.push_back(Seconds(t0, t1));
    }
    std::sort(times.begin(), times.end());
    double t = times[times.size() / 2];
    Row row{"pp" + std::to_string(o.n_prompt), 1, 0, n / t, t * 1e3, -1, ""};
    if (ceil && ceil->bf16_flops_per_s > 0) {
      row.ceiling_fraction = flops / t / ceil->bf16_flops_per_s;
      row.ceiling = fmt::format("{:.0f} TFLOP/s of {:.0f}", flops / t / 1e12, ceil->bf16_flops_per_s / 1e12);
    }
    rows.push_back(row);
  }
  // Generation.
  for (int64_t b64 : batches)
    for (int64_t depth : depths) {
      const int b = static_cast<int>(b64);
      ModelCounts mc =
          Count(c, std::min<double>(c.num_experts, static_cast<double>(b) * c.num_experts_per_tok), o.kv_cache_type);
      const StateSpec spec = model->MakeStateSpec(b, state_tokens(depth + o.n_gen + warmup), o.kv_cache_type);
      auto state = backend->CreateState(spec);
      // --depth: every sequence gets its context first, in forward passes of at most kPrefillChunk tokens
      // continuing at the slot's length. Only the very last pass returns a logit row: its copy to the host
      // waits for the device, so the time printed covers the whole prefill.
      if (depth > 0) {
        constexpr int64_t kPrefillChunk = 4096;
        auto t_fill = std::chrono::steady_clock::now();
        for (int s = 0; s < b; ++s) {
          for (int64_t p0 = 0; p0 < depth; p0 += kPrefillChunk) {
            const int64_t n = std::min(kPrefillChunk, depth - p0);
            ForwardBatch chunk;
            chunk.tokens.resize(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i)
              chunk.tokens[static_cast<size_t>(i)] = static_cast<int32_t>(((p0 + i) * 7919 + s * 104729 + 13) % vocab);
            chunk.seqs.push_back(BatchSeq{s, 0, n, p0});
            if (s == b - 1 && p0 + n == depth) chunk.logit_rows.push_back(static_cast<int32_t>(n - 1));
            model->Forward(chunk, *state);
          }
        }
        std::printf("tg%lld batch %d: context of %lld tokens prefilled in %.1f s\n", static_cast<long long>(o.n_gen), b,
                    static_cast<long long>(depth), Seconds(t_fill, std::chrono::steady_clock::now()));
      }
      // Decode steps at positions [first, end). With --greedy or --sample (not --sync-picks) each step after
      // the first takes its ids from the picks of the one before on the backend and is queued before those
      // are read, as the engine's pipelined steps are (Model::QueuePick). With --sample and --host-sample
      // each sequence draws with a sampler of its own, as a request does; --host-sample samples the rows
      // at once on up to one thread per sequence, as the engine does.
      std::vector<int32_t> same_rows(static_cast<size_t>(b));  // sequence s continues row s
      for (int s = 0; s < b; ++s) same_rows[static_cast<size_t>(s)] = s;
      std::vector<Sampler> samplers;  // --sample and --host-sample: one per sequence
      for (int s = 0; s < b && (o.sample || o.host_sample); ++s)
        samplers.emplace_back(BenchSampling(s), vocab, std::span<const int32_t>{});
      std::vector<TokenDraw> draws(static_cast<size_t>(o.sample ? b : 0));
      auto steps = [&](int64_t first, int64_t end) {
        bool queued = false;  // a step whose picks have not been taken
        for (int64_t pos = first; pos < end; ++pos) {
          ForwardBatch batch;
          for (int s = 0; s < b; ++s) {
            batch.tokens.push_back(static_cast<int32_t>((pos * 7 + s * 13 + 1) % vocab));
            batch.seqs.push_back(BatchSeq{s, s, 1, pos});
            batch.logit_rows.push_back(s);
          }
          for (size_t s = 0; s < draws.size(); ++s) draws[s] = samplers[s].NextDraw();
          if (!o.picks()) {
            std::span<float> logits = model->Forward(batch, *state);  // in the backend's readback buffer
            if (o.host_sample)
              sampling_pool->ParallelFor(static_cast<size_t>(b), 1, [&](size_t begin, size_t end) {
                for (size_t s = begin; s < end; ++s)
                  samplers[s].Sample(logits.subspan(s * static_cast<size_t>(vocab), static_cast<size_t>(vocab)));
              });
          } else if (o.sync_picks) {
            model->QueuePick(batch, *state, c.vocab_size, draws);
            model->TakePick();
          } else {
            std::span<const int32_t> feed;  // the first step's ids are uploaded
            if (queued) feed = same_rows;
            model->QueuePick(batch, *state, c.vocab_size, draws, feed);
            if (queued) model->TakePick();
            queued = true;
          }
        }
        if (queued) model->TakePick();
      };
      // Warm-up. Without --depth the slots are then cleared and the timed steps start at 0; with it they
      // continue after the warm-up tokens, keeping the context.
      for (int64_t pos = depth; pos < depth + warmup; pos += kWarmupSteps) steps(pos, pos + kWarmupSteps);
      int64_t first = depth + warmup;
      if (depth == 0) {
        for (int s = 0; s < b; ++s) state->ClearSlot(s);
        first = 0;
      }
      // Reading the counters runs the slots' clearing (the first forward pass would run it as a unit of its
      // own, launch by launch, inside the timed loop) and waits for it.
      std::optional<BackendCounters> before = ReadBackendCounters(*backend);
      auto t0 = std::chrono::steady_clock::now();
      steps(first, first + o.n_gen);
      double t = Seconds(t0, std::chrono::steady_clock::now());
      if (std::optional<BackendCounters> after = ReadBackendCounters(*backend); before && after) {
        int64_t timed = after->units_timed - before->units_timed;
        // Host time per step: launching (the recorder's flushes), waiting in the logits' copy (the device's
        // step and the copy), and the rest, queuing the step's ops (the model's forward pass on the host).
        const double us = 1e3 / static_cast<double>(o.n_gen);
        const double launch_us = (after->host_flush_ms - before->host_flush_ms) * us;
        const double wait_us = (after->host_wait_ms - before->host_wait_ms) * us;
        std::printf(
            "tg%lld batch %d: %lld units replayed as graphs (%lld without queuing their ops), %lld captured, %lld "
            "eager; GPU busy %.3f ms of "
            "%.3f ms per step; host: %.1f us queuing ops, %.1f us launching, %.1f us waiting for the device and "
            "the logits\n",
            static_cast<long long>(o.n_gen), b, static_cast<long long>(after->units_replayed - before->units_replayed),
            static_cast<long long>(after->forwards_replayed - before->forwards_replayed),
            static_cast<long long>(after->units_captured - before->units_captured),
            static_cast<long long>(after->units_eager - before->units_eager),
            timed > 0 ? (after->gpu_ms - before->gpu_ms) / static_cast<double>(timed) : 0.0,
            t * 1e3 / static_cast<double>(o.n_gen), t * 1e3 * us - launch_us - wait_us, launch_us, wait_us);
      }
      double step_s = t / static_cast<double>(o.n_gen);
      // Bytes read per step: every weight but the embedding table, the K/V of each sequence's context and
      // each sequence's DeltaNet states.
      double avg_context = static_cast<double>(first) + (static_cast<double>(o.n_gen) + 1) / 2;
      // Quantized dummy weights: bytes per parameter of their type; the routers' as DummyRouterDType says.
      const double weight_bytes_per_param =
          static_cast<double>(DTypeBlockBytes(linear_dtype)) / static_cast<double>(DTypeBlockSize(linear_dtype));
      const double router_bytes_per_param = static_cast<double>(DTypeSize(DummyRouterDType(linear_dtype)));
      const double state_bytes = static_cast<double>(b) * spec.n_linear_layers *
                                 static_cast<double>(ConvStateElems(spec) + RecurrentStateElems(spec)) * sizeof(float);
      double bytes = weight_bytes_per_param * (mc.linear_params - mc.router_params + mc.lm_head_params) +
                     router_bytes_per_param * mc.router_params + b * avg_context * mc.kv_bytes_per_token + state_bytes;
      std::string test = "tg" + std::to_string(o.n_gen);
      if (depth > 0) test += " @ d" + std::to_string(depth);
      Row row{test, b, depth, b / step_s, step_s * 1e3, -1, "", bytes, state_bytes};
      if (ceil && ceil->copy_bytes_per_s > 0) {
        row.ceiling_fraction = bytes / step_s / ceil->copy_bytes_per_s;
        row.ceiling = fmt::format("{:.0f} GB/s of {:.0f}", bytes / step_s / 1e9, ceil->copy_bytes_per_s / 1e9);
      }
      rows.push_back(row);
    }

  std::printf("\n| test | batch | tokens/s | ms / forward | of ceiling | achieved |\n|---|---:|---:|---:|---:|---|\n");
  for (const Row& r : rows)
    std::printf("| %s | %d | %.1f | %.2f | %s | %s |\n", r.test.c_str(), r.batch, r.tokens_per_s, r.ms,
                r.ceiling_fraction < 0 ? "-" : fmt::format("{:.1f}%", 100 * r.ceiling_fraction).c_str(),
                r.ceiling.c_str());
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path, std::ios::trunc);
    if (!out) ThrowError(ErrorCode::kIo, "--json {}: cannot open for writing", o.json_path);
    out << "{\"backend\": \"" << backend->name() << "\", \"kv_cache\": \"" << kv_cache
        << "\", \"greedy\": " << (o.greedy ? "true" : "false") << ", \"sample\": " << (o.sample ? "true" : "false")
        << ", \"host_sample\": " << (o.host_sample ? "true" : "false")
        << ", \"greedy_pipelined\": " << (o.greedy && pipelined ? "true" : "false")
        << ", \"pipelined\": " << (pipelined ? "true" : "false") << ", \"ctx_size\": " << o.ctx_size
        << ", \"rows\": [";
    for (size_t i = 0; i < rows.size(); ++i)
      out << (i ? ", " : "") << "{\"test\": \"" << rows[i].test << "\", \"batch\": " << rows[i].batch
          << ", \"depth\": " << rows[i].depth << ", \"tokens_per_s\": " << rows[i].tokens_per_s
          << ", \"ms\": " << rows[i].ms << ", \"ceiling_fraction\": " << rows[i].ceiling_fraction
          << (rows[i].bytes > 0 ? fmt::format(", \"bytes_per_step\": {:.0f}, \"state_bytes_per_step\": {:.0f}",
                                              rows[i].bytes, rows[i].state_bytes)
                                : std::string())
          << "}";
    out << "]}\n";
  }
}

}  // namespace

void RegisterBenchCommand(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure prompt-processing and generation throughput (llama-bench style)");
  cmd->add_option("--model", o->model_path,
                  "Model folder, or with --dummy-weights a config .json; default: the embedded qwen3-next-e2e model");
  AddBackendOptions(cmd, o->backend, o->dummy_weights);
  AddKvCacheOption(cmd, o->kv_cache_type);
  cmd->add_option("--n-prompt,-p", o->n_prompt, "Prompt tokens processed in one forward pass")
      ->capture_default_str()
      ->check(WholeNumber(1, kMaxContextOption));
  cmd->add_option("--n-gen,-n", o->n_gen, "Tokens generated per sequence")
      ->capture_default_str()
      ->check(WholeNumber(1, kMaxContextOption));
  cmd->add_option("--depth,-d", o->depths,
                  "Context tokens before the timed decode steps, comma-separated (one row per batch size and "
                  "depth): every sequence is first prefilled with D tokens (not timed; the prompt test is "
                  "unaffected), then decoded from position D + 4 after the warm-up steps (D + 12 with pipelined "
                  "--greedy or --sample; llama-bench -d)")
      ->capture_default_str();
  cmd->add_option("--ctx-size", o->ctx_size,
                  "Tokens of context each sequence's state holds, as the server's --ctx-size sizes its slots (the "
                  "CUDA decode attention splits a context by it); 0 = just what the run needs (--n-prompt for the "
                  "prompt test, D + M + the warm-up steps for generation)")
      ->capture_default_str()
      ->check(WholeNumber(0, kMaxContextOption));
  cmd->add_option("--batch,-b", o->batches, "Generation batch sizes, comma-separated")->capture_default_str();
  cmd->add_option("--repetitions,-r", o->repetitions, "Timed prompt runs (median reported)")
      ->capture_default_str()
      ->check(WholeNumber(1, 1000));
  cmd->add_option("--json", o->json_path, "Also write the results as JSON to this file");
  cmd->add_flag("--greedy", o->greedy,
                "Generation steps take the backend's greedy picks, as the server does for greedy requests "
                "(no penalties, logit_bias, logprobs or grammar), instead of reading all their logits back "
                "(a backend that picks on the device reads back only the ids; the CPU scans the logits); "
                "as the server does, each step is queued before the picks of the one before are read, its "
                "token ids taken from them on the backend");
  cmd->add_flag("--sample", o->sample,
                "Generation steps take the backend's draws with Qwen3's recommended sampling (temperature 0.6, "
                "top-k 20, top-p 0.95; a seeded sampler per sequence), as the server does for such requests "
                "(top-k of at most 64, no penalties, logit_bias, logprobs or grammar), pipelined as with --greedy");
  cmd->add_flag("--host-sample", o->host_sample,
                "Generation steps read their logits back and the engine's sampler draws each row with --sample's "
                "settings on the host, as the server does for the requests the backend does not draw for");
  cmd->add_flag("--sync-picks,--sync-greedy", o->sync_picks,
                "With --greedy or --sample: queue each step only after the picks of the one before are read (the "
                "server's form with --no-pipeline)");
  cmd->add_option("--num-layers", o->num_layers,
                  "With --dummy-weights: keep only the first N layers, to measure a model larger than the device "
                  "per layer (a hybrid keeps its layer pattern)")
      ->check(WholeNumber(1, 4096));
  cmd->add_option("--dummy-quant", o->dummy_quant,
                  "With --dummy-weights: make the projection weights random blocks of this type (a GGUF block "
                  "type: q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs; or "
                  "f8_e4m3_b128: FP8 checkpoints); the embedding stays bf16, the MoE routers are f32 with a "
                  "GGUF type (as llama.cpp's files keep them) and bf16 with FP8");
  cmd->callback([o] { Run(*o); });
}

}  // namespace infernix
