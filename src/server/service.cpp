#include "server/service.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "base/error.h"
#include "embedded_model.h"
#include "grammar/compose.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar/tool_call_grammar.h"
#include "server/json_reader.h"

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

ModelService::ModelService(const ServiceOptions& options) : ModelService(options, CreateBackend(options.backend)) {}

ModelService::ModelService(const ServiceOptions& options, std::unique_ptr<Backend> backend) {
  // A Hugging Face folder, a GGUF file, or the embedded default model.
  package_ = options.model_path.empty() ? ModelPackage::FromFiles(EmbeddedDefaultModel())
                                        : ModelPackage::Open(options.model_path);
  // Checked before the weights load.
  const int64_t max_context = package_->config().CheckedContextSize(
      options.engine.max_context, fmt::format("context size {} (--ctx-size)", options.engine.max_context));
  backend_ = std::move(backend);
  backend_name_ = std::string(backend_->name());
  tokenizer_ = package_->LoadTokenizer();  // first: it checks that its ids fit the model's vocabulary
  model_ = package_->LoadModel(*backend_);
  template_ = package_->LoadChatTemplate();
  defaults_ = package_->LoadGenerationDefaults();
  eos_ids_ = defaults_.eos_token_ids;
  if (eos_ids_.empty() && tokenizer_->special_tokens().eos_id) eos_ids_.push_back(*tokenizer_->special_tokens().eos_id);
  tool_format_ = DetectToolCallFormat(*template_);
  grammars_ = std::make_unique<GrammarCache>(options.grammar_cache_entries, options.grammar_cache_bytes);
  names_ = options.served_names;
  if (names_.empty()) {
    std::filesystem::path p = std::filesystem::path(options.model_path).lexically_normal();
    std::string base = options.model_path.empty() ? std::string(kEmbeddedModelName) : p.filename().string();
    if (base.empty()) base = p.parent_path().filename().string();
    names_.push_back(base.empty() ? "model" : base);
  }
  created_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  EngineOptions engine_options = options.engine;
  engine_options.max_context = max_context;
  engine_ = std::make_unique<Engine>(*model_, *tokenizer_, engine_options);
}

ModelService::~ModelService() = default;

std::shared_ptr<grammar::TokenGrammar> ModelService::CompileGrammar(GrammarKind kind, const std::string& source) {
  std::string key = std::to_string(static_cast<int>(kind)) + ":" + (kind == GrammarKind::kJson ? "" : source);
  if (auto hit = grammars_->Find(key)) return hit;
  const grammar::ToolCallSyntax syntax =
      tool_format_ == ToolCallFormat::kXml ? grammar::ToolCallSyntax::kXml : grammar::ToolCallSyntax::kJson;
  grammar::Grammar g;
  switch (kind) {
    case GrammarKind::kGbnf: g = grammar::ParseGbnf(source); break;
    case GrammarKind::kRegex: g = grammar::ParseRegex(source); break;
    case GrammarKind::kJson: g = grammar::ParseGbnf(grammar::JsonGbnf()); break;
    case GrammarKind::kJsonSchema:
      g = grammar::JsonSchemaGrammar(ParseOrderedJson(source));
      break;
    case GrammarKind::kToolCalls:
      g = grammar::ToolCallGrammar(ParseOrderedJson(source), syntax);
      break;
    case GrammarKind::kToolCallsLazy:
      g = grammar::Concat({grammar::Literal("\n"), grammar::ToolCallGrammar(ParseOrderedJson(source), syntax)});
      break;
    case GrammarKind::kChoices: {
      nlohmann::json arr = nlohmann::json::parse(source);
      g = grammar::ChoicesGrammar(arr.get<std::vector<std::string>>());
      break;
    }
  }
  auto compiled = std::make_shared<const grammar::CompiledGrammar>(g);
  std::shared_ptr<const grammar::TokenVocabulary> vocab;
  {
    std::lock_guard<std::mutex> lock(vocabulary_mutex_);
    if (!vocabulary_) vocabulary_ = grammar::TokenVocabulary::FromTokenizer(*tokenizer_);
    vocab = vocabulary_;
  }
  return grammars_->Insert(key, std::make_shared<grammar::TokenGrammar>(compiled, vocab));
}

bool ModelService::Serves(const std::string& name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

}  // namespace infernix
