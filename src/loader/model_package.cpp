#include "loader/model_package.h"

#include <filesystem>

#include "base/error.h"
#include "model/gguf_model.h"
#include "tokenizer/tokenizer_gguf.h"

namespace infernix {

std::unique_ptr<ModelPackage> ModelPackage::FromFiles(std::unique_ptr<FileSet> files) {
  std::unique_ptr<ModelPackage> p(new ModelPackage());
  p->config_ = LoadModelConfig(*files);
  p->files_ = std::move(files);
  return p;
}

std::unique_ptr<ModelPackage> ModelPackage::FromGguf(std::shared_ptr<const GgufFile> file) {
  std::unique_ptr<ModelPackage> p(new ModelPackage());
  p->config_ = GgufModelConfig(*file);
  p->gguf_ = std::move(file);
  return p;
}

std::unique_ptr<ModelPackage> ModelPackage::Open(const std::string& path) {
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    ThrowError(ErrorCode::kNotFound, "{}: no such model folder or file", path);
  if (std::filesystem::is_directory(status)) return FromFiles(std::make_unique<DirFileSet>(path));
  return FromGguf(GgufFile::Open(path));
}

std::unique_ptr<Model> ModelPackage::LoadModel(Backend& backend) const {
  // The config parsed when the package was opened, not parsed again.
  if (gguf_) return LoadGgufModel(gguf_, config_, backend);
  return infernix::LoadModel(config_, *files_, backend);
}

std::unique_ptr<Tokenizer> ModelPackage::LoadTokenizer() const {
  std::unique_ptr<Tokenizer> t = gguf_ ? Tokenizer::Create(ReadGgufTokenizerSpec(*gguf_)) : Tokenizer::Load(*files_);
  // Every token id needs a logit: masks and samplers are sized by the model's vocabulary. (A larger
  // vocabulary is fine: checkpoints pad it past the tokenizer's ids.)
  if (t->vocab_size() > config_.vocab_size) {
    const std::string where = gguf_ ? gguf_->path() : files_->Describe();
    const std::string tokenizer_file = gguf_ ? "tokenizer.ggml.tokens" : "tokenizer.json";
    const std::string config_field = gguf_ ? "the token embedding's rows" : "config.json vocab_size";
    ThrowError(ErrorCode::kInvalidArgument,
               "{}: the tokenizer ({}) has {} token ids but the model's vocabulary ({}) is {}: ids {}..{} would have "
               "no logits; the tokenizer does not belong to this model",
               where, tokenizer_file, t->vocab_size(), config_field, config_.vocab_size, config_.vocab_size,
               t->vocab_size() - 1);
  }
  return t;
}

std::unique_ptr<ChatTemplate> ModelPackage::LoadChatTemplate() const {
  if (!gguf_) return ChatTemplate::Load(*files_);
  std::optional<GgufChatTemplateSource> t = ReadGgufChatTemplate(*gguf_);
  if (!t) ThrowError(ErrorCode::kNotFound, "{}: no chat template (metadata tokenizer.chat_template)", gguf_->path());
  return ChatTemplate::FromString(t->source, t->bos_token, t->eos_token);
}

GenerationDefaults ModelPackage::LoadGenerationDefaults() const {
  if (gguf_) return GgufGenerationDefaults();  // checks its ids itself, naming the metadata key
  GenerationDefaults g = infernix::LoadGenerationDefaults(*files_);
  for (int32_t id : g.eos_token_ids)  // the sampler and grammar masks index by them
    if (id < 0 || id >= config_.vocab_size)
      ThrowError(ErrorCode::kInvalidArgument, "{}: end-of-sequence token id {} is outside the model's vocabulary [0, {})",
                 files_->DisplayPath("generation_config.json"), id, config_.vocab_size);
  return g;
}

GenerationDefaults ModelPackage::GgufGenerationDefaults() const {
  GenerationDefaults g;
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"})
    if (std::optional<int64_t> id = gguf_->GetInt(key)) {
      if (*id < 0 || *id >= config_.vocab_size)
        ThrowError(ErrorCode::kInvalidArgument, "{}: {} {} is outside the model's vocabulary [0, {})", gguf_->path(), key,
                   *id, config_.vocab_size);
      bool seen = false;
      for (int32_t e : g.eos_token_ids) seen |= e == *id;
      if (!seen) g.eos_token_ids.push_back(static_cast<int32_t>(*id));
    }
  if (auto v = gguf_->GetInt("general.sampling.top_k")) g.top_k = static_cast<int>(*v);
  if (auto v = gguf_->GetFloat("general.sampling.top_p")) g.top_p = *v;
  if (auto v = gguf_->GetFloat("general.sampling.min_p")) g.min_p = *v;
  if (auto v = gguf_->GetFloat("general.sampling.temp")) {
    g.temperature = *v;
    g.do_sample = *v > 0;
  }
  return g;
}

}  // namespace infernix
