// Tokenizer throughput, in bytes of text per second (docs/performance.md, section "Tokenizer").
//
// Corpus: the `text` fields of tokenize.jsonl plus the files under /usr/share/common-licenses (mostly
// English prose, some code), or the file named by --corpus FILE / $INFERNIX_BENCH_CORPUS.
// Tokenizer: the Qwen3 fixture, or the folder named by --tokenizer DIR / $INFERNIX_BENCH_TOKENIZER.
// Other flags are Google Benchmark's (--benchmark_filter=..., --benchmark_min_time=...).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file_set.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace infernix {
namespace {

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ThrowError(ErrorCode::kNotFound, "{}: cannot open file", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string DefaultCorpus(const std::string& fixtures) {
  std::string corpus;
  std::ifstream lines(fixtures + "/text/tokenize.jsonl");
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) corpus += nlohmann::json::parse(line).at("text").get<std::string>() + "\n";
  }
  const std::filesystem::path licenses = "/usr/share/common-licenses";
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(licenses)) {
    for (const auto& entry : std::filesystem::directory_iterator(licenses)) {
      if (entry.is_regular_file()) files.push_back(entry.path());  // symlinks to files count too
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) corpus += ReadWholeFile(file.string());
  return corpus;
}

// Takes "--name VALUE" or "--name=VALUE" out of argv; returns VALUE, or "" when absent.
std::string TakeFlag(int* argc, char** argv, const std::string& name) {
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    int used = 0;
    std::string value;
    if (arg == name && i + 1 < *argc) {
      value = argv[i + 1];
      used = 2;
    } else if (arg.rfind(name + "=", 0) == 0) {
      value = arg.substr(name.size() + 1);
      used = 1;
    }
    if (used == 0) continue;
    for (int j = i; j + used < *argc; ++j) argv[j] = argv[j + used];
    *argc -= used;
    return value;
  }
  return "";
}

std::string FlagOrEnv(int* argc, char** argv, const std::string& flag, const char* env) {
  std::string value = TakeFlag(argc, argv, flag);
  if (value.empty() && std::getenv(env) != nullptr) value = std::getenv(env);
  return value;
}

void RegisterAll(const Tokenizer& tok, const std::string& corpus, const std::vector<int32_t>& ids) {
  const auto bytes = static_cast<int64_t>(corpus.size());
  benchmark::RegisterBenchmark("Encode/warm_cache", [&tok, &corpus, bytes](benchmark::State& state) {
    benchmark::DoNotOptimize(tok.Encode(corpus));  // fills the cache
    for (auto _ : state) benchmark::DoNotOptimize(tok.Encode(corpus));
    state.SetBytesProcessed(state.iterations() * bytes);
  })->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("Encode/cold_cache", [&tok, &corpus, bytes](benchmark::State& state) {
    for (auto _ : state) {
      state.PauseTiming();
      tok.ClearCache();
      state.ResumeTiming();
      benchmark::DoNotOptimize(tok.Encode(corpus));
    }
    state.SetBytesProcessed(state.iterations() * bytes);
  })->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("Decode", [&tok, &ids, bytes](benchmark::State& state) {
    for (auto _ : state) benchmark::DoNotOptimize(tok.Decode(ids));
    state.SetBytesProcessed(state.iterations() * bytes);
  })->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("StreamDecoder", [&tok, &ids, bytes](benchmark::State& state) {
    for (auto _ : state) {
      StreamDecoder stream(tok);
      size_t total = 0;
      for (int32_t id : ids) total += stream.Push(id).size();
      total += stream.Flush().size();
      benchmark::DoNotOptimize(total);
    }
    state.SetBytesProcessed(state.iterations() * bytes);
  })->Unit(benchmark::kMillisecond);
}

int Main(int argc, char** argv) {
  const std::string fixtures =
      std::getenv("INFERNIX_FIXTURES_DIR") != nullptr ? std::getenv("INFERNIX_FIXTURES_DIR") : INFERNIX_FIXTURES_DIR;
  const std::string corpus_path = FlagOrEnv(&argc, argv, "--corpus", "INFERNIX_BENCH_CORPUS");
  std::string tokenizer_dir = FlagOrEnv(&argc, argv, "--tokenizer", "INFERNIX_BENCH_TOKENIZER");
  if (tokenizer_dir.empty()) tokenizer_dir = fixtures + "/tokenizers/qwen3";

  const std::unique_ptr<Tokenizer> tok = Tokenizer::Load(DirFileSet(tokenizer_dir));
  const std::string corpus = corpus_path.empty() ? DefaultCorpus(fixtures) : ReadWholeFile(corpus_path);
  const std::vector<int32_t> ids = tok->Encode(corpus);
  std::fprintf(stderr, "corpus: %s, %zu bytes, %zu tokens; tokenizer: %s\n",
               corpus_path.empty() ? "tokenize.jsonl + /usr/share/common-licenses" : corpus_path.c_str(), corpus.size(),
               ids.size(), tokenizer_dir.c_str());

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RegisterAll(*tok, corpus, ids);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace
}  // namespace infernix

int main(int argc, char** argv) {
  try {
    return infernix::Main(argc, argv);
  } catch (const infernix::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
