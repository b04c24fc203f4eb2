// Everything the HTTP layer serves: one model (weights on a backend, tokenizer, chat template,
// generation defaults) behind a continuous-batching engine, and the names it answers to.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/file_set.h"
#include "chat/chat_template.h"
#include "engine/backend_factory.h"
#include "engine/engine.h"
#include "formats/hf_config.h"
#include "grammar/token_matcher.h"
#include "loader/model_package.h"
#include "model/model.h"
#include "server/grammar_cache.h"
#include "tokenizer/tokenizer.h"

namespace infernix {

// How the model's template writes tool calls: Hermes-style JSON (Qwen3) or XML (Qwen3-Coder, Qwen3.5).
enum class ToolCallFormat { kJson, kXml };

enum class GrammarKind {
  kGbnf,             // GBNF text
  kRegex,            // a regular expression
  kChoices,          // a JSON array of strings
  kJson,             // any JSON value (source ignored)
  kJsonSchema,       // the schema's JSON text
  kToolCalls,        // an OpenAI tools array: one call in the template's form, after `<tool_call>\n`
  kToolCallsLazy,    // the same after the trigger `<tool_call>` alone (so it starts with "\n")
};

struct ServiceOptions {
  std::string model_path;                 // empty: the embedded default model
  std::vector<std::string> served_names;  // names clients may use; default: the folder's name
  BackendOptions backend;
  EngineOptions engine;                   // max_context 0: the model's max_position_embeddings
  size_t grammar_cache_entries = GrammarCache::kDefaultEntries;  // compiled grammars kept (LRU)
  size_t grammar_cache_bytes = GrammarCache::kDefaultBytes;      // and the bytes of their masks
};

class ModelService {
 public:
  // Loads everything; throws infernix::Error (naming the file) for a bad model folder.
  explicit ModelService(const ServiceOptions& options);
  // The same on `backend` instead of the one options.backend names (tests: a backend that fails or
  // writes given logits on demand).
  ModelService(const ServiceOptions& options, std::unique_ptr<Backend> backend);
  ~ModelService();

  const std::string& model_id() const { return names_.front(); }
  const std::vector<std::string>& names() const { return names_; }
  bool Serves(const std::string& name) const;

  Engine& engine() { return *engine_; }
  const Engine& engine() const { return *engine_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ChatTemplate& chat_template() const { return *template_; }
  const ModelConfig& config() const { return model_->config(); }
  const GenerationDefaults& defaults() const { return defaults_; }
  ToolCallFormat tool_call_format() const { return tool_format_; }
  // End-of-sequence ids: generation_config.json's, else the tokenizer's eos token.
  const std::vector<int32_t>& eos_token_ids() const { return eos_ids_; }
  int64_t created_unix() const { return created_; }
  const std::string& backend_name() const { return backend_name_; }
  // A grammar compiled for this model's vocabulary, from an LRU cache keyed by (kind, source) so
  // requests with the same grammar share their mask work (GrammarKind says what `source` is; tool
  // calls are in this template's form, tool_call_format()). Throws infernix::Error for a malformed
  // grammar (GBNF and regex: line and column; schemas: the JSON pointer). Thread-safe.
  std::shared_ptr<grammar::TokenGrammar> CompileGrammar(GrammarKind kind, const std::string& source);

 private:
  std::unique_ptr<ModelPackage> package_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> template_;
  GenerationDefaults defaults_;
  std::vector<int32_t> eos_ids_;
  ToolCallFormat tool_format_ = ToolCallFormat::kJson;
  std::vector<std::string> names_;
  std::string backend_name_;
  int64_t created_ = 0;
  std::mutex vocabulary_mutex_;
  std::shared_ptr<const grammar::TokenVocabulary> vocabulary_;  // built on first use (~40 ms)
  std::unique_ptr<GrammarCache> grammars_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace infernix
