// Chat templates: byte-exact agreement with transformers' apply_chat_template on the Qwen3 template
// (fixtures produced by transformers), template discovery in model folders, and input errors.
#include "chat/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "base/error.h"
#include "base/file_set.h"

namespace infernix {
namespace {

std::string FixturesDir() {
  const char* env = std::getenv("INFERNIX_FIXTURES_DIR");
  return env != nullptr ? env : INFERNIX_FIXTURES_DIR;
}

// Empty when equal; else where the strings first differ, with escaped context from both.
std::string FirstDifference(const std::string& expected, const std::string& actual) {
  size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  if (i == expected.size() && i == actual.size()) return "";
  size_t line = 1 + static_cast<size_t>(std::count(expected.begin(), expected.begin() + static_cast<std::ptrdiff_t>(i), '\n'));
  auto context = [&](const std::string& s) {
    size_t begin = i > 40 ? i - 40 : 0;
    return nlohmann::json(s.substr(begin, 80)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  return fmt::format("first difference at byte {} (line {} of the expected text)\n  expected: {}\n  actual:   {}", i,
                     line, context(expected), context(actual));
}

std::vector<nlohmann::ordered_json> ReadCases() {
  std::ifstream in(FixturesDir() + "/text/chat-template.jsonl");
  std::vector<nlohmann::ordered_json> cases;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) cases.push_back(nlohmann::ordered_json::parse(line));
  return cases;
}

std::unique_ptr<ChatTemplate> Qwen3Template() {
  return ChatTemplate::Load(DirFileSet(FixturesDir() + "/tokenizers/qwen3"));
}

std::string RenderCase(const ChatTemplate& tmpl, const nlohmann::ordered_json& c) {
  return tmpl.Render(c["messages"], c["tools"], c["kwargs"]);
}

TEST(Qwen3Template, RendersEveryFixtureExactlyAsTransformers) {
  auto tmpl = Qwen3Template();
  std::vector<nlohmann::ordered_json> cases = ReadCases();
  ASSERT_GE(cases.size(), 5u);
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string expected = cases[i]["rendered"].get<std::string>();
    std::string actual = RenderCase(*tmpl, cases[i]);
    EXPECT_EQ(FirstDifference(expected, actual), "") << "case " << i << ": " << cases[i]["messages"].dump();
  }
}

TEST(Qwen3Template, EmbeddedModelFolderHasTheSameTemplate) {
  auto tmpl = ChatTemplate::Load(DirFileSet(FixturesDir() + "/models/qwen3-next-e2e"));
  for (const auto& c : ReadCases()) EXPECT_EQ(RenderCase(*tmpl, c), c["rendered"].get<std::string>());
}

TEST(Qwen3Template, ReasoningContentToolCallsWithStringArgumentsAndUnicode) {
  auto tmpl = Qwen3Template();
  nlohmann::ordered_json reasoning = nlohmann::ordered_json::parse(
      R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": "r"}])");
  EXPECT_EQ(tmpl->Render(reasoning, nullptr, nullptr),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\na<|im_end|>\n");

  nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."}, {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": "Let me check.",
     "tool_calls": [{"function": {"name": "w", "arguments": "{\"c\": \"Paris\"}"}}]}])");
  nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "w"}}])");
  EXPECT_EQ(tmpl->Render(messages, tools, nullptr),
            "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
            "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
            "{\"type\": \"function\", \"function\": {\"name\": \"w\"}}\n</tools>\n\nFor each function call, return a "
            "json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
            "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\nweather?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nLet me check.\n"
            "<tool_call>\n{\"name\": \"w\", \"arguments\": {\"c\": \"Paris\"}}\n</tool_call><|im_end|>\n");

  nlohmann::ordered_json tool_turn = nlohmann::ordered_json::parse(R"([
    {"role": "user", "content": "Ünïcödé ☃ \"quotes\""},
    {"role": "assistant", "content": "<think>\nplan\n</think>\n\nok"},
    {"role": "user", "content": "<tool_response>\nx\n</tool_response>"}])");
  EXPECT_EQ(tmpl->Render(tool_turn, nullptr, {{"add_generation_prompt", true}, {"enable_thinking", true}}),
            "<|im_start|>user\nÜnïcödé ☃ \"quotes\"<|im_end|>\n<|im_start|>assistant\n<think>\nplan\n</think>\n\n"
            "ok<|im_end|>\n<|im_start|>user\n<tool_response>\nx\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
}

TEST(Qwen3Template, RendersConcurrently) {
  auto tmpl = Qwen3Template();
  std::vector<nlohmann::ordered_json> cases = ReadCases();
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < failures.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 25; ++round)
        for (const auto& c : cases) failures[t] += RenderCase(*tmpl, c) != c["rendered"].get<std::string>();
    });
  }
  for (auto& thread : threads) thread.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

TEST(ChatTemplateLoad, ReadsSpecialTokensInBothForms) {
  MemoryFileSet files("<test>");
  files.AddCopy("tokenizer_config.json", R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>",
    "chat_template": "{{ bos_token }}|{{ eos_token }}|{{ messages | length }}"})");
  EXPECT_EQ(ChatTemplate::Load(files)->Render(nlohmann::ordered_json::array(), nullptr, nullptr), "<s>|</s>|0");
}

TEST(ChatTemplateLoad, MissingSpecialTokensAreEmptyStrings) {
  MemoryFileSet files("<test>");
  files.AddCopy("tokenizer_config.json", R"({"bos_token": null, "chat_template": "[{{ bos_token }}{{ eos_token }}]"})");
  EXPECT_EQ(ChatTemplate::Load(files)->Render(nlohmann::ordered_json::array(), nullptr, nullptr), "[]");
}

TEST(ChatTemplateLoad, PassesTheOtherSpecialTokensThatAreSet) {
  MemoryFileSet files("<test>");
  files.AddCopy("tokenizer_config.json", R"({"pad_token": "<pad>", "unk_token": null,
    "additional_special_tokens": ["<a>", {"content": "<b>"}],
    "chat_template": "{{ pad_token }} {{ unk_token is defined }} {{ additional_special_tokens | join(',') }}"})");
  EXPECT_EQ(ChatTemplate::Load(files)->Render(nlohmann::ordered_json::array(), nullptr, nullptr), "<pad> False <a>,<b>");
}

TEST(ChatTemplateLoad, JinjaFileWinsOverTheConfig) {
  MemoryFileSet files("<test>");
  files.AddCopy("tokenizer_config.json", R"({"eos_token": "E", "chat_template": "from config"})");
  files.AddCopy("chat_template.jinja", "from file {{ eos_token }}\n");
  EXPECT_EQ(ChatTemplate::Load(files)->Render(nlohmann::ordered_json::array(), nullptr, nullptr), "from file E");
}

TEST(ChatTemplateLoad, JinjaFileAloneIsEnough) {
  MemoryFileSet files("<test>");
  files.AddCopy("chat_template.jinja", "{{ add_generation_prompt }}");
  EXPECT_EQ(ChatTemplate::Load(files)->Render(nlohmann::ordered_json::array(), nullptr, nullptr), "False");
}

TEST(ChatTemplateLoad, NamedTemplatesPickToolUseWhenToolsAreGiven) {
  MemoryFileSet files("<test>");
  files.AddCopy("tokenizer_config.json", R"({"chat_template": [
    {"name": "default", "template": "default"}, {"name": "tool_use", "template": "tools: {{ tools | length }}"},
    {"name": "rag", "template": "{{ broken"}]})");
  auto tmpl = ChatTemplate::Load(files);
  nlohmann::ordered_json none = nlohmann::ordered_json::array();
  EXPECT_EQ(tmpl->Render(none, nullptr, nullptr), "default");
  EXPECT_EQ(tmpl->Render(none, nlohmann::ordered_json::array({{{"name", "f"}}}), nullptr), "tools: 1");
}

// The error ChatTemplate::Load throws for a folder holding `config` as tokenizer_config.json.
Error LoadError(const std::string& config) {
  MemoryFileSet files("<m>");
  if (!config.empty()) files.AddCopy("tokenizer_config.json", config);
  try {
    ChatTemplate::Load(files);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an error for " << config;
  return Error(ErrorCode::kInternal, "");
}

TEST(ChatTemplateLoad, ErrorsNameTheFile) {
  Error none = LoadError("");
  EXPECT_EQ(none.code(), ErrorCode::kNotFound);
  EXPECT_STREQ(none.what(), "<m>: no chat template: neither chat_template.jinja nor a \"chat_template\" in tokenizer_config.json");

  Error bad_json = LoadError("{\"chat_template\": ");
  EXPECT_EQ(bad_json.code(), ErrorCode::kInvalidFormat);
  EXPECT_NE(std::string(bad_json.what()).find("<m>/tokenizer_config.json: invalid JSON"), std::string::npos) << bad_json.what();

  Error bad_template = LoadError(R"({"chat_template": "ok\n{% for x in y %}\n{% endif %}"})");
  EXPECT_EQ(bad_template.code(), ErrorCode::kInvalidFormat);
  EXPECT_NE(std::string(bad_template.what())
                .find("<m>/tokenizer_config.json (chat_template), line 3, column 4: unexpected 'endif'"),
            std::string::npos)
      << bad_template.what();

  EXPECT_EQ(LoadError(R"({"eos_token": 7, "chat_template": "x"})").code(), ErrorCode::kInvalidFormat);
  EXPECT_EQ(LoadError(R"({"chat_template": [{"name": "tool_use", "template": "x"}]})").code(), ErrorCode::kNotFound);
  EXPECT_EQ(LoadError(R"({"chat_template": 5})").code(), ErrorCode::kInvalidFormat);
}

TEST(ChatTemplateRender, ExtraVariablesReplaceDefaults) {
  auto tmpl = ChatTemplate::FromString("{{ add_generation_prompt }} {{ enable_thinking }} {{ documents }} {{ tools }}", "",
                                       "");
  EXPECT_EQ(tmpl->Render(nlohmann::ordered_json::array(), nullptr, {{"add_generation_prompt", true}, {"enable_thinking", false}}),
            "True False None None");
}

TEST(ChatTemplateRender, RejectsMalformedInputs) {
  auto tmpl = ChatTemplate::FromString("{{ messages[0].content }}", "", "");
  nlohmann::ordered_json messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "x"}}});
  EXPECT_THROW(tmpl->Render(nlohmann::ordered_json::object(), nullptr, nullptr), Error);
  EXPECT_THROW(tmpl->Render(messages, nlohmann::ordered_json::object(), nullptr), Error);
  EXPECT_THROW(tmpl->Render(messages, nullptr, nlohmann::ordered_json::array()), Error);
  EXPECT_EQ(tmpl->Render(messages, nullptr, nullptr), "x");
}

TEST(ChatTemplateRender, RuntimeErrorsNameTheTemplatePosition) {
  auto tmpl = ChatTemplate::FromString(
      "{%- for m in messages %}\n{%- if m.role not in ['user', 'assistant'] %}\n"
      "{{- raise_exception('Unsupported role: ' ~ m.role) }}\n{%- endif %}\n{%- endfor %}",
      "", "");
  try {
    tmpl->Render(nlohmann::ordered_json::array({{{"role", "narrator"}}}), nullptr, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()), "chat template, line 3, column 5: template raised an error: Unsupported role: narrator");
  }
}

}  // namespace
}  // namespace infernix
