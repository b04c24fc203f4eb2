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

Result RunCli(const std::string& args) {
  std::string cmd = std::string(INFERNIX_BINARY) + " " + args + " 2>&1";
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

TEST(Cli, HelpListsTheCommands) {
  Result r = RunCli("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* cmd : {"logits", "generate", "tokenize", "detokenize", "render", "serve"}) EXPECT_NE(r.output.find(cmd), std::string::npos) << r.output;
}

}  // namespace
}  // namespace infernix
