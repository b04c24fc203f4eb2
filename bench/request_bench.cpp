// Parsing request bodies (src/server/json_reader.h): ParseOrderedJson against nlohmann's own
// ordered_json parser (the baseline, what the server used before) on a body whose `metadata` object
// has N members, and on a chat request carrying a JSON schema of N properties. Time per parse.
#include <string>

#include <benchmark/benchmark.h>

#include "server/json_reader.h"

namespace infernix {
namespace {

std::string WideObjectBody(int64_t n) {
  std::string s = R"({"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":{)";
  for (int64_t i = 0; i < n; ++i) s += (i > 0 ? ",\"k" : "\"k") + std::to_string(i) + "\":\"v\"";
  return s + "}}";
}

std::string SchemaBody(int64_t n) {
  std::string s = R"({"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema",)"
                  R"("json_schema":{"name":"w","schema":{"type":"object","properties":{)";
  const char* types[] = {"string", "integer", "boolean"};
  for (int64_t i = 0; i < n; ++i)
    s += (i > 0 ? ",\"field_" : "\"field_") + std::to_string(i) + R"(":{"type":")" + types[i % 3] + "\"}";
  return s + "}}}}}";
}

void BM_ParseOrderedJson(benchmark::State& state, std::string (*make)(int64_t)) {
  const std::string body = make(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(ParseOrderedJson(body));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(body.size()));
}
void BM_NlohmannParse(benchmark::State& state, std::string (*make)(int64_t)) {
  const std::string body = make(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(Json::parse(body));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(body.size()));
}
BENCHMARK_CAPTURE(BM_ParseOrderedJson, object, WideObjectBody)->Arg(1000)->Arg(10000)->Arg(40000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_NlohmannParse, object, WideObjectBody)->Arg(1000)->Arg(10000)->Arg(40000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ParseOrderedJson, schema, SchemaBody)->Arg(500)->Arg(2000)->Arg(8000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_NlohmannParse, schema, SchemaBody)->Arg(500)->Arg(2000)->Arg(8000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace infernix

BENCHMARK_MAIN();
