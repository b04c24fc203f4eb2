#include "server/service.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "embedded_model.h"
#include "grammar/compose.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace infernix {
namespace {

// Renders a probe conversation with one tool call and looks at how the template wrote it.
ToolCallFormat DetectToolCallFormat(const ChatTemplate& t) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "user", "content": "x"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"type": "function", "function": {"name": "probe_function", "arguments": {"a": 1}}}]}])");
  try {
    std::string out = t.Render(messages, nullptr, nlohmann::ordered_json{{"add_generation_prompt", false}});
    return out.find("<function=probe_function>") != std::string::npos ? ToolCallFormat::kXml : ToolCallFormat::kJson;
  } catch (const std::exception&) {
    return ToolCallFormat::kJson;
  }
}

}  // namespace

ModelService::ModelService(const ServiceOptions& options) {
  files_ = options.model_path.empty() ? EmbeddedDefaultModel() : std::make_unique<DirFileSet>(options.model_path);
  backend_ = CreateBackend(options.backend);
  backend_name_ = std::string(backend_->name());
  model_ = LoadModel(*files_, *backend_);
  tokenizer_ = Tokenizer::Load(*files_);
  template_ = ChatTemplate::Load(*files_);
  defaults_ = LoadGenerationDefaults(*files_);
  eos_ids_ = defaults_.eos_token_ids;
  if (eos_ids_.empty() && tokenizer_->special_tokens().eos_id) eos_ids_.push_back(*tokenizer_->special_tokens().eos_id);
  tool_format_ = DetectToolCallFormat(*template_);
  names_ = options.served_names;
  if (names_.empty()) {
    std::filesystem::path p = std::filesystem::path(options.model_path).lexically_normal();
    std::string base = options.model_path.empty() ? std::string(kEmbeddedModelName) : p.filename().string();
    if (base.empty()) base = p.parent_path().filename().string();
    names_.push_back(base.empty() ? "model" : base);
  }
  created_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  EngineOptions engine_options = options.engine;
  if (engine_options.max_context <= 0) engine_options.max_context = model_->config().max_position_embeddings;
  engine_ = std::make_unique<Engine>(*model_, *tokenizer_, engine_options);
}

ModelService::~ModelService() = default;

std::shared_ptr<grammar::TokenGrammar> ModelService::CompileGrammar(GrammarKind kind, const std::string& source) {
  static constexpr size_t kCacheEntries = 64;
  std::string key = std::to_string(static_cast<int>(kind)) + ":" + (kind == GrammarKind::kJson ? "" : source);
  {
    std::lock_guard<std::mutex> lock(grammar_mutex_);
    auto it = grammars_.find(key);
    if (it != grammars_.end()) return it->second;
  }
  grammar::Grammar g;
  switch (kind) {
    case GrammarKind::kGbnf: g = grammar::ParseGbnf(source); break;
    case GrammarKind::kRegex: g = grammar::ParseRegex(source); break;
    case GrammarKind::kJson: g = grammar::ParseGbnf(grammar::JsonGbnf()); break;
    case GrammarKind::kJsonSchema: g = grammar::JsonSchemaGrammar(nlohmann::ordered_json::parse(source)); break;
    case GrammarKind::kToolCalls: {
      std::vector<grammar::Grammar> calls;
      for (const auto& t : nlohmann::ordered_json::parse(source)) {
        const auto& fn = t.at("function");
        nlohmann::ordered_json params =
            fn.contains("parameters") ? fn["parameters"] : nlohmann::ordered_json{{"type", "object"}};
        std::string head = "{\"name\": " + nlohmann::ordered_json(fn.at("name")).dump() + ", \"arguments\": ";
        calls.push_back(grammar::Surround(grammar::JsonSchemaGrammar(params), head, "}\n</tool_call>"));
      }
      g = grammar::Union(calls);
      break;
    }
    case GrammarKind::kChoices: {
      nlohmann::json arr = nlohmann::json::parse(source);
      g = grammar::ChoicesGrammar(arr.get<std::vector<std::string>>());
      break;
    }
  }
  auto compiled = std::make_shared<const grammar::CompiledGrammar>(g);
  std::lock_guard<std::mutex> lock(grammar_mutex_);
  if (!vocabulary_) vocabulary_ = grammar::TokenVocabulary::FromTokenizer(*tokenizer_);
  auto [it, inserted] = grammars_.emplace(key, std::make_shared<grammar::TokenGrammar>(compiled, vocabulary_));
  if (inserted) {
    grammar_order_.push_back(key);
    if (grammar_order_.size() > kCacheEntries) {
      grammars_.erase(grammar_order_.front());
      grammar_order_.pop_front();
    }
  }
  return it->second;
}

bool ModelService::Serves(const std::string& name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

}  // namespace infernix
