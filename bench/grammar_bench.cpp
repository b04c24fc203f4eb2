// Grammar-constrained decoding over the real Qwen3 vocabulary (151,669 tokens): the cost of one
// token step (FillNextTokenBitmask + AcceptToken) along a document, for two workloads (the `/json`
// and `/schema` suffixes): the JSON grammar of grammar::JsonGbnf() along a 178-token JSON document,
// and a JSON Schema (nested objects, enum, pattern, array, integer range, format) along a document
// it accepts. Reported as time per token ("per_token" counter, in seconds).
//
//   BM_StepUncached: the per-state mask cache off, every mask assembled from the per-stack masks
//                    (computed in the first iteration) plus the recheck of uncertain tokens.
//   BM_StepCached:   one matcher reused over the document many times (rolled back between
//                    passes), so states repeat; the steady state of a long generation.
//   BM_StepFresh:    a new matcher per document over a TokenGrammar shared by all of them
//                    (per-stack masks warm, per-state mask cache cold): a new request with a
//                    grammar seen before. stack_masks / mask_MiB: what the document's masks
//                    hold in the TokenGrammar (what the server's grammar cache keeps).
//   BM_StepCold:     a new TokenGrammar and matcher per document: the first request with a
//                    new grammar (includes computing every per-stack mask it meets).
//   BM_BuildVocabulary / BM_CompileJson / BM_CompileSchema: the one-off costs.
//   BM_WideSchemaCompile / BM_WideSchemaFirstToken: a schema of N flat properties compiled (and run to
//                    the mask after `{`): how compile time grows with schema size (linearly).
//   BM_ManyToolsFirstToken: the tool-call grammar of N strict tools, to the mask after `{`.
// Flags are Google Benchmark's (--benchmark_filter=..., --benchmark_min_time=...).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/file_set.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/token_matcher.h"
#include "grammar/tool_call_grammar.h"
#include "tokenizer/tokenizer.h"

namespace infernix::grammar {
namespace {

const Tokenizer& Qwen() {
  static const std::unique_ptr<Tokenizer> tokenizer = [] {
    const char* env = std::getenv("INFERNIX_FIXTURES_DIR");
    const std::string dir = env != nullptr && *env != '\0' ? env : INFERNIX_FIXTURES_DIR;
    return Tokenizer::Load(DirFileSet(dir + "/tokenizers/qwen3"));
  }();
  return *tokenizer;
}

const std::shared_ptr<const TokenVocabulary>& Vocab() {
  static const auto vocab = TokenVocabulary::FromTokenizer(Qwen());
  return vocab;
}

const std::shared_ptr<const CompiledGrammar>& Json() {
  static const auto grammar = std::make_shared<const CompiledGrammar>(ParseGbnf(JsonGbnf()));
  return grammar;
}

// An order document: the JSON workload's, and (with a status) the schema workload's.
constexpr const char* kOrder = R"({
  "id": "req-20931",
  "user": {"name": "Ada Lovelace", "email": "ada@example.com", "age": 36, "verified": true},
  "items": [
    {"sku": "A-113", "title": "Analytical engine notes", "price": 12.5, "qty": 2},
    {"sku": "B-7", "title": "Punched cards, box of 500", "price": 3.25e1, "qty": 1, "tags": ["paper", "io"]}
  ],
  "notes": "Deliver before Tuesday; leave at the door \u2014 thanks!",
  "total": 57.5,
  "gift": null)";

const std::vector<int32_t>& Document() {
  static const std::vector<int32_t> ids = Qwen().Encode(std::string(kOrder) + "\n}");
  return ids;
}

constexpr const char* kSchema = R"({"type": "object", "properties": {
  "id": {"type": "string", "pattern": "^req-[0-9]{3,6}$"},
  "user": {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 40}, "email": {"type": "string", "format": "email"},
    "age": {"type": "integer", "minimum": 0, "maximum": 150}, "verified": {"type": "boolean"}},
    "required": ["name", "email", "age", "verified"], "additionalProperties": false},
  "items": {"type": "array", "minItems": 1, "maxItems": 10, "items": {"type": "object", "properties": {
    "sku": {"type": "string", "pattern": "^[A-Z]-[0-9]+$"}, "title": {"type": "string"}, "price": {"type": "number"},
    "qty": {"type": "integer", "minimum": 1, "maximum": 99},
    "tags": {"type": "array", "items": {"enum": ["paper", "io", "gift", "fragile"]}}},
    "required": ["sku", "title", "price", "qty"], "additionalProperties": false}},
  "notes": {"type": "string"}, "total": {"type": "number"}, "gift": {"type": ["boolean", "null"]},
  "status": {"enum": ["new", "paid", "shipped"]}},
  "required": ["id", "user", "items", "total", "status"], "additionalProperties": false})";

struct Workload {
  std::shared_ptr<const CompiledGrammar> grammar;
  std::vector<int32_t> doc;
};

const Workload& JsonWorkload() {
  static const Workload w{Json(), Document()};
  return w;
}

const Workload& SchemaWorkload() {
  static const Workload w{std::make_shared<const CompiledGrammar>(JsonSchemaGrammar(nlohmann::ordered_json::parse(kSchema))),
                          Qwen().Encode(std::string(kOrder) + ",\n  \"status\": \"paid\"\n}")};
  return w;
}

// Runs the document through `m`. `best` (if given, one entry per token) keeps the fastest time of
// each step's FillNextTokenBitmask over the iterations: its maximum is the slowest step, free of
// scheduling noise.
void Step(benchmark::State& state, const std::vector<int32_t>& doc, TokenMatcher& m, std::vector<uint32_t>& mask,
          std::vector<double>* best = nullptr) {
  for (size_t i = 0; i < doc.size(); ++i) {
    const int32_t id = doc[i];
    const auto start = std::chrono::steady_clock::now();
    m.FillNextTokenBitmask(mask);
    if (best != nullptr) {
      (*best)[i] = std::min((*best)[i], std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    if (!((mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1) || !m.AcceptToken(id)) {
      state.SkipWithError("the document was refused");
      return;
    }
  }
  benchmark::DoNotOptimize(mask.data());
}

void SetCounters(benchmark::State& state, const std::vector<int32_t>& doc) {
  state.counters["per_token"] = benchmark::Counter(static_cast<double>(doc.size()),
                                                   benchmark::Counter::kIsIterationInvariantRate |
                                                       benchmark::Counter::kInvert);
  state.counters["tokens"] = static_cast<double>(doc.size());
}

void BM_StepUncached(benchmark::State& state, const Workload& w) {
  TokenMatcher m(w.grammar, Vocab(), {151643, 151645});
  m.set_cache_capacity(0);
  std::vector<uint32_t> mask(m.mask_words());
  Step(state, w.doc, m, mask);  // computes the per-stack masks
  m.Rollback(m.num_accepted());
  std::vector<double> best(w.doc.size(), 1e9);
  for (auto _ : state) {
    Step(state, w.doc, m, mask, &best);
    m.Rollback(m.num_accepted());
  }
  SetCounters(state, w.doc);
  state.counters["slowest_step"] = *std::max_element(best.begin(), best.end());
}
BENCHMARK_CAPTURE(BM_StepUncached, json, JsonWorkload())->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepUncached, schema, SchemaWorkload())->Unit(benchmark::kMillisecond);

void BM_StepCached(benchmark::State& state, const Workload& w) {
  TokenMatcher m(w.grammar, Vocab(), {151643, 151645});
  std::vector<uint32_t> mask(m.mask_words());
  for (auto _ : state) {
    Step(state, w.doc, m, mask);
    m.Rollback(m.num_accepted());
  }
  SetCounters(state, w.doc);
  state.counters["cache_hit_rate"] =
      static_cast<double>(m.cache_hits()) / static_cast<double>(m.cache_hits() + m.cache_misses());
}
BENCHMARK_CAPTURE(BM_StepCached, json, JsonWorkload())->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepCached, schema, SchemaWorkload())->Unit(benchmark::kMillisecond);

void BM_StepFresh(benchmark::State& state, const Workload& w) {
  auto compiled = std::make_shared<TokenGrammar>(w.grammar, Vocab());
  {  // warm the shared per-stack masks
    TokenMatcher m(compiled, {151643, 151645});
    std::vector<uint32_t> mask(m.mask_words());
    Step(state, w.doc, m, mask);
  }
  double hits = 0, total = 0;
  std::vector<double> best(w.doc.size(), 1e9);
  for (auto _ : state) {
    TokenMatcher m(compiled, {151643, 151645});
    std::vector<uint32_t> mask(m.mask_words());
    Step(state, w.doc, m, mask, &best);
    hits += static_cast<double>(m.cache_hits());
    total += static_cast<double>(m.cache_hits() + m.cache_misses());
  }
  SetCounters(state, w.doc);
  state.counters["cache_hit_rate"] = hits / total;
  state.counters["slowest_step"] = *std::max_element(best.begin(), best.end());
  state.counters["stack_masks"] = static_cast<double>(compiled->size());
  state.counters["mask_MiB"] = static_cast<double>(compiled->memory_bytes()) / (1 << 20);
}
BENCHMARK_CAPTURE(BM_StepFresh, json, JsonWorkload())->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepFresh, schema, SchemaWorkload())->Unit(benchmark::kMillisecond);

void BM_StepCold(benchmark::State& state, const Workload& w) {
  for (auto _ : state) {
    TokenMatcher m(w.grammar, Vocab(), {151643, 151645});
    std::vector<uint32_t> mask(m.mask_words());
    Step(state, w.doc, m, mask);
  }
  SetCounters(state, w.doc);
}
BENCHMARK_CAPTURE(BM_StepCold, json, JsonWorkload())->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepCold, schema, SchemaWorkload())->Unit(benchmark::kMillisecond);

// The plain trie walk at every step (no per-stack masks, no cache): the cost the caches avoid.
void BM_StepTrieWalk(benchmark::State& state, const Workload& w) {
  TokenMatcher m(w.grammar, Vocab(), {151643, 151645});
  m.set_cache_capacity(0);
  m.set_cut_depth(0);
  std::vector<uint32_t> mask(m.mask_words());
  for (auto _ : state) {
    Step(state, w.doc, m, mask);
    m.Rollback(m.num_accepted());
  }
  SetCounters(state, w.doc);
}
BENCHMARK_CAPTURE(BM_StepTrieWalk, json, JsonWorkload())->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StepTrieWalk, schema, SchemaWorkload())->Unit(benchmark::kMillisecond);

void BM_BuildVocabulary(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(TokenVocabulary::FromTokenizer(Qwen()));
}
BENCHMARK(BM_BuildVocabulary)->Unit(benchmark::kMillisecond);

void BM_CompileJson(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(std::make_shared<const CompiledGrammar>(ParseGbnf(JsonGbnf())));
}
BENCHMARK(BM_CompileJson)->Unit(benchmark::kMicrosecond);

void BM_CompileSchema(benchmark::State& state) {
  const auto schema = nlohmann::ordered_json::parse(kSchema);
  for (auto _ : state) benchmark::DoNotOptimize(std::make_shared<const CompiledGrammar>(JsonSchemaGrammar(schema)));
}
BENCHMARK(BM_CompileSchema)->Unit(benchmark::kMicrosecond);

// A schema of N flat properties (strings, integers, booleans in turn; the first three required),
// compiled and run to the first mask and one accepted token: what a first request with a large schema
// waits for before its first token. Compile time should grow about linearly with N.
nlohmann::ordered_json WideSchema(int64_t n, bool required = true) {
  nlohmann::ordered_json props = nlohmann::ordered_json::object();
  const char* types[] = {"string", "integer", "boolean"};
  for (int64_t i = 0; i < n; ++i) props["field_" + std::to_string(i)] = {{"type", types[i % 3]}};
  nlohmann::ordered_json schema = {{"type", "object"}, {"properties", props}, {"additionalProperties", false}};
  if (required) schema["required"] = {"field_0", "field_1", "field_2"};
  return schema;
}

// One iteration's work for a grammar made by `make`: compile it, then the masks before and after `{`
// (what a first request with a new grammar waits for before its first tokens).
template <typename MakeGrammar>
void CompileToMaskAfterBrace(benchmark::State& state, MakeGrammar make) {
  const int32_t brace = Qwen().Encode("{")[0];
  for (auto _ : state) {
    TokenMatcher m(std::make_shared<const CompiledGrammar>(make()), Vocab(), {151643, 151645});
    std::vector<uint32_t> mask(m.mask_words());
    m.FillNextTokenBitmask(mask);
    if (!m.AcceptToken(brace)) state.SkipWithError("'{' was refused");
    m.FillNextTokenBitmask(mask);
    benchmark::DoNotOptimize(mask.data());
  }
}

void BM_WideSchemaFirstToken(benchmark::State& state) {
  const nlohmann::ordered_json schema = WideSchema(state.range(0), state.range(1) != 0);
  CompileToMaskAfterBrace(state, [&] { return JsonSchemaGrammar(schema); });
}
BENCHMARK(BM_WideSchemaFirstToken)->ArgsProduct({{125, 500, 2000, 8000}, {1, 0}})->Unit(benchmark::kMillisecond);

void BM_WideSchemaCompile(benchmark::State& state) {
  const nlohmann::ordered_json schema = WideSchema(state.range(0), state.range(1) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(std::make_shared<const CompiledGrammar>(JsonSchemaGrammar(schema)));
}
BENCHMARK(BM_WideSchemaCompile)->ArgsProduct({{125, 500, 2000, 8000}, {1, 0}})->Unit(benchmark::kMillisecond);

// N strict tools of one required string argument each: the tool-call grammar compiled and run to the
// mask after the opening `{` (a request with many tools under tool_choice "required").
void BM_ManyToolsFirstToken(benchmark::State& state) {
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  for (int64_t i = 0; i < state.range(0); ++i)
    tools.push_back({{"type", "function"},
                     {"function",
                      {{"name", "tool_" + std::to_string(i)},
                       {"strict", true},
                       {"parameters",
                        {{"type", "object"},
                         {"properties", {{"a", {{"type", "string"}}}}},
                         {"required", {"a"}},
                         {"additionalProperties", false}}}}}});
  CompileToMaskAfterBrace(state, [&] { return ToolCallGrammar(tools, ToolCallSyntax::kJson); });
}
BENCHMARK(BM_ManyToolsFirstToken)->Arg(100)->Arg(400)->Arg(1600)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace infernix::grammar

BENCHMARK_MAIN();
