// `infernix serve`: the OpenAI- and Anthropic-compatible HTTP server.
#include <pthread.h>
#include <signal.h>
#include <toml++/toml.h>

#include <cstdio>
#include <memory>
#include <thread>

#include "app/cli_checks.h"
#include "app/commands.h"
#include "app/model_options.h"
#include "base/error.h"
#include "server/http_server.h"
#include "server/service.h"

namespace infernix {
namespace {

struct ServeOptions {
  ServiceOptions service;
  ServerOptions server;
  std::string config_path;
  bool no_pipeline = false;  // --no-pipeline: service.engine.pipeline_picks off
};

std::string TomlScalar(const toml::node& v, const std::string& path, const std::string& key) {
  if (auto s = v.value<std::string>(); s && v.is_string()) return *s;
  if (v.is_integer()) return std::to_string(*v.value<int64_t>());
  if (v.is_floating_point()) return fmt::format("{}", *v.value<double>());
  if (v.is_boolean()) return *v.value<bool>() ? "true" : "false";
  ThrowError(ErrorCode::kInvalidArgument, "{}: '{}' must be a string, number or boolean (or an array of them)", path, key);
}

// Applies a TOML file's `key = value` pairs to the options of `cmd` named --key. Options given on
// the command line win. Unknown keys, and values an option rejects, are errors naming the file.
void ApplyConfigFile(CLI::App* cmd, const std::string& path) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    ThrowError(ErrorCode::kInvalidFormat, "{}:{}:{}: {}", path, where.line, where.column, e.description());
  }
  for (const auto& [key_view, value] : table) {
    std::string key(key_view.str());
    CLI::Option* opt = cmd->get_option_no_throw("--" + key);
    if (opt == nullptr || key == "config" || key == "help")
      ThrowError(ErrorCode::kInvalidArgument, "{}: unknown option '{}' (see infernix serve --help)", path, key);
    if (opt->count() > 0) continue;
    std::vector<std::string> values;
    if (const toml::array* arr = value.as_array()) {
      for (const auto& item : *arr) values.push_back(TomlScalar(item, path, key));
    } else {
      values.push_back(TomlScalar(value, path, key));
    }
    try {
      for (auto& v : values) opt->add_result(v);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      ThrowError(ErrorCode::kInvalidArgument, "{}: '{}': {}", path, key, e.what());
    }
  }
}

void PrintBanner(const ModelService& service, const ServerOptions& o, int port) {
  std::string base = fmt::format("http://{}:{}", o.host, port);
  std::string auth = o.api_key.empty() ? "" : "-H 'Authorization: Bearer YOUR_KEY' ";
  fmt::print(
      "infernix: serving '{}' ({} backend, context {} tokens, {} requests at once) on {}\n"
      "  OpenAI:    POST {}/v1/chat/completions, /v1/completions, /v1/responses; GET /v1/models\n"
      "  Anthropic: POST {}/v1/messages, /v1/messages/count_tokens\n"
      "  health:    GET {}/health   metrics: GET {}/metrics\n"
      "  try: curl {}/v1/chat/completions -H 'Content-Type: application/json' {}-d '{{\"model\": \"{}\", "
      "\"messages\": [{{\"role\": \"user\", \"content\": \"Hello\"}}]}}'\n",
      service.model_id(), service.backend_name(), service.engine().options().max_context,
      service.engine().options().max_slots, base, base, base, base, base, base, auth, service.model_id());
  std::fflush(stdout);
}

// Serves until SIGINT or SIGTERM. The signals are taken by a dedicated thread with sigwait, so no
// signal handler touches shared state.
void Serve(const ServeOptions& o) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // inherited by every thread started below

  ServiceOptions options = o.service;
  options.engine.pipeline_picks = !o.no_pipeline;
  ModelService service(options);
  HttpServer server(service, o.server);
  int port = server.Bind();
  PrintBanner(service, o.server, port);
  std::thread waiter([&server, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::fprintf(stderr, "infernix: shutting down\n");
    server.Stop();
  });
  server.Serve();
  pthread_kill(waiter.native_handle(), SIGTERM);  // wakes the waiter when the server stopped on its own
  waiter.join();
}

}  // namespace

void RegisterServeCommand(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* serve = app.add_subcommand("serve", "Serve the model over OpenAI- and Anthropic-compatible HTTP APIs");
  serve->add_option("--config", o->config_path,
                    "TOML file setting any of these options by long name (e.g. port = 9000); the command line wins");
  serve->add_option("--model", o->service.model_path,
                    "Model folder (config.json, *.safetensors, tokenizer.json); default: the embedded model");
  serve->add_option("--host", o->server.host, "Address to listen on")->capture_default_str();
  serve->add_option("--port", o->server.port, "Port to listen on (0: any free port)")
      ->capture_default_str()
      ->check(WholeNumber(0, 65535));
  serve->add_option("--max-concurrency", o->service.engine.max_slots, "Requests generated at once")
      ->capture_default_str()
      ->check(WholeNumber(1, 4096));
  serve->add_option("--max-queue", o->service.engine.max_queue,
                    "Requests that may wait for a slot; beyond that the server answers 429")
      ->capture_default_str()
      ->check(WholeNumber(0, 1 << 20));
  serve->add_option("--ctx-size", o->service.engine.max_context,
                    "Context per request in tokens (prompt + output), at most what the model is configured for "
                    "(max_position_embeddings, or with RoPE scaling the scaled length); 0 = that maximum")
      ->capture_default_str()
      ->check(WholeNumber(0, kMaxContextOption));
  AddKvCacheOption(serve, o->service.engine.kv_cache_type);
  serve->add_option("--max-batch-tokens", o->service.engine.max_batch_tokens, "Tokens per forward step")
      ->capture_default_str()
      ->check(WholeNumber(1, 1 << 20));
  serve->add_option("--prefill-chunk", o->service.engine.prefill_chunk, "Prompt tokens of one request per step")
      ->capture_default_str()
      ->check(WholeNumber(1, 1 << 20));
  serve->add_flag("--no-pipeline", o->no_pipeline,
                  "Queue a decode step only after the picks of the one before are read; by default, when every "
                  "request of a step picks greedily or draws with a top_k of at most 64 (no penalties, logit_bias, "
                  "logprobs or grammar), the next step of the same requests is queued first, its token ids taken "
                  "from those picks on the backend");
  serve->add_option("--api-key", o->server.api_key,
                    "Require this key (Authorization: Bearer KEY, or x-api-key: KEY); default: none");
  serve->add_option("--served-model-name", o->service.served_names,
                    "Name(s) clients use for the model (repeatable); default: the model folder's name");
  serve->add_option("--max-body-bytes", o->server.max_body_bytes, "Largest request body accepted, in bytes")
      ->capture_default_str()
      ->check(WholeNumber(1024, int64_t{1} << 32));
  serve->add_option("--grammar-cache-entries", o->service.grammar_cache_entries,
                    "Compiled grammars (JSON schemas, GBNF, regex, tool calls) kept across requests, least recently "
                    "used dropped first")
      ->capture_default_str()
      ->check(WholeNumber(1, 1 << 20));
  serve->add_option("--grammar-cache-bytes", o->service.grammar_cache_bytes,
                    "Bytes of token masks the grammar cache may hold")
      ->capture_default_str()
      ->check(WholeNumber(int64_t{1} << 20, int64_t{1} << 40));
  AddDeviceOptions(serve, o->service.backend);
  serve->callback([o, serve] {
    if (!o->config_path.empty()) ApplyConfigFile(serve, o->config_path);
    Serve(*o);
  });
}

}  // namespace infernix
