// The CLI contract of `infernix logits` and `infernix generate`, run as a user runs them: output
// formats, the embedded default model, and a clear one-line error (exit status 1) for every bad input.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace infernix {
namespace {

namespace fs = std::filesystem;
using testing::ModelDir;
using testing::Reference;

struct Result {
  int status = -1;
  std::string output;  // stdout and stderr together
};

// time_limit_s > 0: the command is stopped after that many seconds (status 124).
Result RunCli(const std::string& args, int time_limit_s = 0) {
  std::string cmd = (time_limit_s > 0 ? "timeout " + std::to_string(time_limit_s) + " " : std::string()) +
                    INFERNIX_BINARY + " " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string Join(const std::vector<int32_t>& ids, const char* sep) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? sep : "") + std::to_string(ids[i]);
  return s;
}

TEST(Cli, LogitsWritesEveryPositionAsRawFloat32) {
  for (const char* model : {"qwen3-tiny", "qwen3-next-tiny", "qwen3.5-moe-tiny"}) {
    Reference ref(model);
    std::vector<int32_t> ids = ref.Ids("prompt.1.ids");
    std::vector<float> want = ref.Floats("prompt.1.logits");
    std::string out = (fs::temp_directory_path() / (std::string("infernix_cli_logits_") + model)).string();
    Result r = RunCli("logits --model " + ModelDir(model) + " --tokens " + Join(ids, ",") + " --out " + out);
    ASSERT_EQ(r.status, 0) << r.output;
    std::string bytes = testing::ReadBinary(out);
    ASSERT_EQ(bytes.size(), want.size() * sizeof(float)) << model;
    std::vector<float> got(want.size());
    std::memcpy(got.data(), bytes.data(), bytes.size());
    double max_ref = 0, max_diff = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      max_ref = std::max(max_ref, std::abs(static_cast<double>(want[i])));
      max_diff = std::max(max_diff, std::abs(static_cast<double>(got[i]) - want[i]));
    }
    EXPECT_LE(max_diff, 1e-3 * std::max(1.0, max_ref)) << model;
    fs::remove(out);
  }
}

TEST(Cli, GeneratePrintsGreedyIdsAsJson) {
  Reference ref("qwen3-moe-tiny");
  std::vector<int32_t> want = ref.Ids("generate.new_ids");
  Result r = RunCli("generate --model " + ModelDir("qwen3-moe-tiny") + " --tokens '" +
                 Join(ref.Ids("generate.prompt_ids"), ", ") + "'" + " --max-tokens " + std::to_string(want.size()));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "[" + Join(want, ",") + "]\n");
}

TEST(Cli, EmbeddedDefaultModelReproducesItsReferenceChat) {
  nlohmann::json chats =
      nlohmann::json::parse(testing::ReadBinary(ModelDir("qwen3-next-e2e") + "/reference-chat.json"));
  for (const auto& chat : chats) {
    auto prompt = chat["prompt_ids"].get<std::vector<int32_t>>();
    auto want = chat["new_ids"].get<std::vector<int32_t>>();
    Result r = RunCli("generate --tokens " + Join(prompt, ",") + " --max-tokens 16");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.output, "[" + Join(want, ",") + "]\n");
  }
}

TEST(Cli, StopAtEos) {
  // qwen3-e2e repeats one token whatever it is asked; make that token the EOS and generation stops after it.
  fs::path dir = fs::temp_directory_path() / "infernix_cli_eos";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy(ModelDir("qwen3-e2e") + "/" + f, dir / f);
  Result r = RunCli("generate --model " + dir.string() + " --tokens 1,2,3 --max-tokens 3");
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<int32_t> ids = nlohmann::json::parse(r.output).get<std::vector<int32_t>>();
  ASSERT_EQ(ids.size(), 3u);
  ASSERT_EQ(ids[0], ids[1]);
  std::ofstream(dir / "generation_config.json") << "{\"eos_token_id\": [7, " << ids[0] << "]}";
  r = RunCli("generate --model " + dir.string() + " --tokens 1,2,3 --max-tokens 5 --stop-at-eos");
  EXPECT_EQ(r.output, "[" + std::to_string(ids[0]) + "]\n");
  fs::remove_all(dir);
}

// Each bad input: exit status 1 and one line "error: ..." naming the problem.
void ExpectError(const std::string& args, std::initializer_list<std::string> parts) {
  Result r = RunCli(args);
  EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
  EXPECT_EQ(r.output.rfind("error: ", 0), 0u) << r.output;
  for (const auto& p : parts) EXPECT_NE(r.output.find(p), std::string::npos) << args << "\n" << r.output;
}

TEST(Cli, ClearErrors) {
  ExpectError("generate --model /no/such/model --tokens 1", {"/no/such/model"});
  ExpectError("generate --model " + ModelDir("qwen3-tiny") + " --tokens 1,4096", {"4096", "vocabulary"});
  ExpectError("generate --model " + ModelDir("qwen3-tiny") + " --tokens 1,x", {"--tokens", "'x'"});
  ExpectError("generate --model " + ModelDir("qwen3-tiny") + " --tokens 1 --backend tpu", {"tpu"});
  ExpectError("generate --model " + ModelDir("qwen3-tiny") + " --tokens 1 --max-tokens 10 --ctx-size 4",
              {"context size of 4"});
  ExpectError("logits --model " + ModelDir("qwen3-tiny") + " --tokens 1 --out /no/such/dir/x.bin", {"/no/such/dir"});

  fs::path dir = fs::temp_directory_path() / "infernix_cli_errors";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "llama", "hidden_size": 8})";
  ExpectError("generate --model " + dir.string() + " --tokens 1", {"config.json", "llama", "not supported"});
  fs::copy(ModelDir("qwen3-tiny") + "/config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  std::string weights = testing::ReadBinary(ModelDir("qwen3-tiny") + "/model.safetensors");
  testing::WriteBinary((dir / "model.safetensors").string(), weights.substr(0, 1000));
  ExpectError("logits --model " + dir.string() + " --tokens 1 --out " + (dir / "x").string(), {"model.safetensors"});
  fs::remove_all(dir);
}

// Numeric options out of range, negative where a count is meant, or not numbers at all: a parse error naming
// the option, its range and the value, before anything loads (serve would otherwise start: a time limit
// keeps a regression from hanging the test). A context beyond the model's positions: an error once its config
// is read.
TEST(Cli, NumericOptionsAreChecked) {
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {"serve --port 99999", "--port: must be a whole number from 0 to 65535, not '99999'"},
      {"serve --max-queue -3", "--max-queue: must be a whole number from 0 to 1048576, not '-3'"},
      {"serve --threads -2", "--threads: must be a whole number from 0 to 4096, not '-2'"},
      {"serve --ctx-size abc", "--ctx-size: must be a whole number from 0 to 1073741824, not 'abc'"},
      {"serve --max-concurrency 1.5", "--max-concurrency: must be a whole number from 1 to 4096, not '1.5'"},
      {"serve --max-body-bytes 0", "--max-body-bytes: must be a whole number from 1024 to 4294967296, not '0'"},
      {"serve --gpu 2000", "--gpu: must be a whole number from 0 to 1023, not '2000'"},
      {"generate --tokens 1 --ctx-size -4", "--ctx-size: must be a whole number from 0 to 1073741824, not '-4'"},
      {"generate --tokens 1 --threads 5000", "--threads: must be a whole number from 0 to 4096, not '5000'"},
      {"bench --n-prompt abc", "--n-prompt: must be a whole number from 1 to 1073741824, not 'abc'"},
      {"bench --num-layers 0 --dummy-weights", "--num-layers: must be a whole number from 1 to 4096, not '0'"},
      {"serve --port 0 --ctx-size 300000",
       "context size 300000 (--ctx-size) exceeds the 262144 tokens the model is configured for"},
      {"generate --tokens 1 --ctx-size 300000",
       "--ctx-size 300000 exceeds the 262144 tokens the model is configured for"},
  };
  for (const Case& c : cases) {
    Result r = RunCli(c.args, /*time_limit_s=*/60);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("error: " + c.message, 0), 0u) << c.args << "\n" << r.output;
  }
  // The same check for a value from serve's --config file.
  fs::path config = fs::temp_directory_path() / "infernix_cli_numbers.toml";
  std::ofstream(config) << "port = 70000\n";
  Result r = RunCli("serve --config " + config.string(), 60);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("'port': --port: must be a whole number from 0 to 65535, not '70000'"), std::string::npos)
      << r.output;
  fs::remove(config);
}

// tokenize / detokenize / render through the CLI on the embedded model, against the fixtures.
TEST(Cli, TokenizeDetokenizeAndRenderMatchHuggingFace) {
  std::string path = (fs::temp_directory_path() / "infernix_cli_text").string();
  std::ifstream lines(testing::FixturesDir() + "/text/tokenize.jsonl");
  std::string line;
  int checked = 0;
  while (std::getline(lines, line) && checked < 12) {
    nlohmann::json j = nlohmann::json::parse(line);
    std::string text = j["text"].get<std::string>();
    if (text.empty()) continue;
    testing::WriteBinary(path, text);
    Result r = RunCli("tokenize --text-file " + path);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(nlohmann::json::parse(r.output), j["ids"]) << text;
    r = RunCli("detokenize --tokens " + Join(j["ids"].get<std::vector<int32_t>>(), ","));
    EXPECT_EQ(r.output, j["decoded"].get<std::string>());
    ++checked;
  }
  EXPECT_EQ(checked, 12);
  std::ifstream chats(testing::FixturesDir() + "/text/chat-template.jsonl");
  ASSERT_TRUE(std::getline(chats, line));
  nlohmann::json c = nlohmann::json::parse(line);
  nlohmann::json request = c["kwargs"];
  request["messages"] = c["messages"];
  if (!c["tools"].is_null()) request["tools"] = c["tools"];
  testing::WriteBinary(path, request.dump());
  Result r = RunCli("render --request " + path);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, c["rendered"].get<std::string>());
  testing::WriteBinary(path, "{\"messages\": [");
  ExpectError("render --request " + path, {path});
  fs::remove(path);
}

// `infernix inspect`: GGUF files (metadata-only and quantized), a model folder, the embedded model.
TEST(Cli, InspectGguf) {
  Result r = RunCli("inspect --json " + testing::FixturesDir() + "/gguf/g-qwen3-tokenizer.gguf");
  ASSERT_EQ(r.status, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["format"], "gguf");
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["architecture"], "qwen3");
  EXPECT_EQ(j["name"], "G Qwen3");
  EXPECT_EQ(j["hyperparameters"]["qwen3.block_count"], 4);
  EXPECT_EQ(j["hyperparameters"]["qwen3.embedding_length"], 256);
  EXPECT_EQ(j["hyperparameters"]["qwen3.rope.freq_base"], 10000.0);
  EXPECT_EQ(j["hyperparameters"].size(), 10u);  // every qwen3.* key, nothing else
  EXPECT_EQ(j["tensor_count"], 0);
  EXPECT_EQ(j["tokenizer"]["model"], "gpt2");
  EXPECT_EQ(j["tokenizer"]["pre"], "qwen2");
  EXPECT_EQ(j["tokenizer"]["tokens"], 2048);
  EXPECT_EQ(j["tokenizer"]["merges"], 1744);
  EXPECT_EQ(j["tokenizer"]["eos_id"], 2002);
  EXPECT_EQ(j["tokenizer"]["eos_id_token"], "<|im_end|>");
  EXPECT_EQ(j["tokenizer"]["supported"], true);
  EXPECT_FALSE(j["tokenizer"].contains("bos_id"));
  EXPECT_EQ(j["chat_template"]["present"], true);
  EXPECT_GT(j["chat_template"]["length"].get<int>(), 1000);

  const std::string quantized = testing::FixturesDir() + "/gguf/g-qwen3/g-qwen3-Q3_K_M.gguf";
  if (!fs::exists(quantized)) GTEST_SKIP() << quantized << " is not in the fixtures";
  r = RunCli("inspect --json --tensors " + quantized);
  ASSERT_EQ(r.status, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["tensor_count"], 47);
  ASSERT_EQ(j["tensors"].size(), 47u);
  int64_t sum = 0, count = 0;
  for (const auto& [type, info] : j["types"].items()) {
    sum += info["bytes"].get<int64_t>();
    count += info["count"].get<int64_t>();
  }
  EXPECT_EQ(count, 47);
  EXPECT_EQ(sum, j["tensor_bytes"].get<int64_t>());
  EXPECT_EQ(j["types"]["F32"]["count"], 17);
  EXPECT_TRUE(j["types"].contains("Q3_K"));
  EXPECT_LE(j["tensor_bytes"].get<int64_t>(), j["file_bytes"].get<int64_t>() - j["data_offset"].get<int64_t>());
  bool found_embedding = false;
  for (const auto& t : j["tensors"]) {
    if (t["name"] != "token_embd.weight") continue;
    found_embedding = true;
    EXPECT_EQ(t["shape"], nlohmann::json::array({2048, 256}));  // row-major: [vocab, hidden]
  }
  EXPECT_TRUE(found_embedding);

  r = RunCli("inspect --tensors " + quantized);
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* part : {"architecture: qwen3", "qwen3.block_count = 4", "tensors: 47", "Q3_K", "tokenizer: gpt2, pre qwen2, 2048 tokens, 1744 merges",
                           "eos 2002 <|im_end|>", "chat template: present", "token_embd.weight"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
}

TEST(Cli, InspectModelFolderAndEmbeddedModel) {
  Result r = RunCli("inspect --json " + ModelDir("qwen3-e2e"));
  ASSERT_EQ(r.status, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["format"], "huggingface");
  EXPECT_EQ(j["config"]["architecture"], "qwen3");
  EXPECT_EQ(j["config"]["num_layers"], 2);
  EXPECT_EQ(j["config"]["vocab_size"], 151936);
  EXPECT_GT(j["tensor_count"].get<int>(), 10);
  int64_t sum = 0;
  for (const auto& [type, info] : j["types"].items()) sum += info["bytes"].get<int64_t>();
  EXPECT_EQ(sum, j["tensor_bytes"].get<int64_t>());
  EXPECT_EQ(j["tokenizer"]["present"], true);
  EXPECT_EQ(j["tokenizer"]["eos_id"], 151645);
  EXPECT_EQ(j["chat_template"]["present"], true);

  r = RunCli("inspect");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* part : {"architecture: qwen3_next", "tokenizer: tokenizer.json", "chat template: present", "tensors: "})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;

  ExpectError("inspect /no/such/model", {"/no/such/model"});
  std::string bad = (fs::temp_directory_path() / "infernix_cli_inspect.gguf").string();
  testing::WriteBinary(bad, std::string("GGUF\x03\0\0\0\x01", 9));  // v3, then a cut tensor count
  ExpectError("inspect " + bad, {bad, "truncated"});
  testing::WriteBinary(bad, "not a model");
  ExpectError("inspect " + bad, {bad, "not a GGUF file"});
  fs::remove(bad);
}

// `infernix bench --depth D`: decode timed after every sequence was prefilled with D tokens (a hybrid
// model, so both the KV cache and the linear-attention state continue from the prefilled context).
TEST(Cli, BenchWithDepth) {
  const std::string model = "bench --backend cpu --model " + ModelDir("qwen3-next-tiny") + " -p 4 -n 2 -r 1 -b 1,2";
  std::string json = (fs::temp_directory_path() / "infernix_cli_bench.json").string();
  Result r = RunCli(model + " --depth 6 --json " + json);
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* part :
       {"tg2 batch 1: context of 6 tokens prefilled in", "tg2 batch 2: context of 6 tokens prefilled in", "| pp4 | 1 |",
        "| tg2 @ d6 | 1 |", "| tg2 @ d6 | 2 |"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  nlohmann::json j = nlohmann::json::parse(testing::ReadBinary(json));
  ASSERT_EQ(j["rows"].size(), 3u) << j.dump();
  EXPECT_EQ(j["rows"][0]["test"], "pp4");
  EXPECT_EQ(j["rows"][0]["depth"], 0);
  EXPECT_EQ(j["rows"][2]["test"], "tg2 @ d6");
  EXPECT_EQ(j["rows"][2]["batch"], 2);
  EXPECT_EQ(j["rows"][2]["depth"], 6);
  // The bytes a step reads include every sequence's DeltaNet states (f32): qwen3-next-tiny has 3 such
  // layers, a conv window of (4 - 1) x (2 x 2 x 32 + 4 x 32) values and a 4 x 32 x 32 recurrent state.
  constexpr double kStatePerSeq = 3.0 * ((4 - 1) * (2 * 2 * 32 + 4 * 32) + 4 * 32 * 32) * 4;
  EXPECT_FALSE(j["rows"][0].contains("bytes_per_step")) << j.dump();  // the prompt row counts FLOPs
  EXPECT_EQ(j["rows"][1]["state_bytes_per_step"].get<double>(), kStatePerSeq) << j.dump();
  EXPECT_EQ(j["rows"][2]["state_bytes_per_step"].get<double>(), 2 * kStatePerSeq) << j.dump();
  EXPECT_GT(j["rows"][1]["bytes_per_step"].get<double>(), 10 * kStatePerSeq) << j.dump();
  EXPECT_GT(j["rows"][2]["bytes_per_step"].get<double>(), j["rows"][1]["bytes_per_step"].get<double>()) << j.dump();
  fs::remove(json);

  r = RunCli(model);  // without --depth: the plain row name, no prefill
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("| tg2 | 2 |"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("prefilled"), std::string::npos) << r.output;

  r = RunCli(model + " --depth 0,5");  // a list: a row per batch size and depth
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* part : {"| tg2 | 1 |", "| tg2 @ d5 | 1 |", "| tg2 | 2 |", "| tg2 @ d5 | 2 |"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;

  ExpectError(model + " --depth -1", {"--depth: '-1'", "0 or more"});
  ExpectError(model + " --depth 5,x", {"--depth: 'x'"});
  ExpectError("bench --backend cpu --model " + ModelDir("qwen3-next-tiny") + " -p 4 -n 2 -b 1,0",
              {"--batch: '0'", "positive"});
  // qwen3-next-tiny has max_position_embeddings 4096: 4092 + 2 + 4 warm-up steps = 4098 tokens.
  ExpectError(model + " --depth 4092", {"4098", "exceed the 4096 tokens the model is configured for"});

  // --ctx-size: states sized as a server's slots, named in the header and the JSON; too small for the run
  // (6 + 2 + 4 warm-up steps = 12 tokens) or past the model's context, a clear error.
  r = RunCli(model + " --depth 6 --ctx-size 64 --json " + json);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("states of 64 tokens"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| tg2 @ d6 | 2 |"), std::string::npos) << r.output;
  EXPECT_EQ(nlohmann::json::parse(testing::ReadBinary(json))["ctx_size"], 64);
  fs::remove(json);
  ExpectError(model + " --depth 6 --ctx-size 11", {"--ctx-size 11", "12 tokens the run needs"});
  ExpectError(model + " --ctx-size 5000", {"--ctx-size 5000", "exceeds the 4096 tokens the model is configured for"});
  ExpectError(model + " --ctx-size -3", {"--ctx-size"});
}

// --kv-cache-dtype on the commands that run a model: bench names the cache in its header (and JSON),
// generate and logits run with an FP8 cache, and a wrong value is a parse error listing the choices.
TEST(Cli, KvCacheDtype) {
  const std::string bench = "bench --backend cpu --model " + ModelDir("qwen3-next-tiny") + " -p 4 -n 2 -r 1 -b 1";
  Result r = RunCli(bench);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("; backend cpu; KV cache f32; loaded in"), std::string::npos) << r.output;
  std::string json = (fs::temp_directory_path() / "infernix_cli_bench_kv.json").string();
  r = RunCli(bench + " --kv-cache-dtype fp8 --json " + json);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("; backend cpu; KV cache fp8 e4m3; loaded in"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| tg2 | 1 |"), std::string::npos) << r.output;
  EXPECT_EQ(nlohmann::json::parse(testing::ReadBinary(json))["kv_cache"], "fp8 e4m3");
  fs::remove(json);

  const std::string model = "--backend cpu --model " + ModelDir("qwen3-tiny") + " --tokens 1,2,3,4,5,6";
  r = RunCli("generate " + model + " --max-tokens 4 --kv-cache-dtype fp8");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output).size(), 4u) << r.output;
  r = RunCli("generate " + model + " --max-tokens 4 --kv-cache-dtype auto");
  ASSERT_EQ(r.status, 0) << r.output;
  std::string out = (fs::temp_directory_path() / "infernix_cli_logits_kv").string();
  r = RunCli("logits " + model + " --kv-cache-dtype fp8 --out " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(testing::ReadBinary(out).size(), 6u * 4096 * sizeof(float));
  fs::remove(out);

  for (const std::string& cmd : {"generate " + model, bench, std::string("serve")}) {
    r = RunCli(cmd + " --kv-cache-dtype fp16");
    EXPECT_NE(r.status, 0) << cmd << "\n" << r.output;
    EXPECT_NE(r.output.find("--kv-cache-dtype: fp16 not in {auto,fp8}"), std::string::npos) << cmd << "\n" << r.output;
  }
  r = RunCli("serve --help");
  EXPECT_NE(r.output.find("--kv-cache-dtype TEXT:{auto,fp8}=auto"), std::string::npos) << r.output;
}

TEST(Cli, HelpListsTheCommands) {
  Result r = RunCli("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* cmd : {"logits", "generate", "tokenize", "detokenize", "render", "serve", "inspect"}) EXPECT_NE(r.output.find(cmd), std::string::npos) << r.output;
}

}  // namespace
}  // namespace infernix
