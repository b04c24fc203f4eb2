// `infernix tokenize` and `infernix detokenize`: the model's tokenizer on the command line.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "app/commands.h"
#include "base/error.h"
#include "tokenizer/tokenizer.h"

namespace infernix {
namespace {

struct TokenizerOptions {
  std::string model;
  std::string text;
  std::string text_file;
  std::string tokens;
  bool skip_special = false;
};


void RunTokenize(const TokenizerOptions& options, bool from_file) {
  const std::string text = from_file ? ReadFileText(options.text_file) : options.text;
  const std::unique_ptr<Tokenizer> tokenizer = OpenModel(options.model)->LoadTokenizer();
  const std::vector<int32_t> ids = tokenizer->Encode(text);
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i]);
  }
  out += "]\n";
  WriteStdout(out);
}

void RunDetokenize(const TokenizerOptions& options) {
  const std::vector<int> parsed = ParseTokenList(options.tokens);
  const std::vector<int32_t> ids(parsed.begin(), parsed.end());
  const std::unique_ptr<Tokenizer> tokenizer = OpenModel(options.model)->LoadTokenizer();
  WriteStdout(tokenizer->Decode(ids, options.skip_special));
}

}  // namespace

void RegisterTokenizerCommands(CLI::App& app) {
  auto options = std::make_shared<TokenizerOptions>();  // shared with the callbacks, which outlive this call

  CLI::App* tokenize = app.add_subcommand(
      "tokenize", "Print the token ids of a text as a JSON array on one line, e.g. [9707,1879] (no BOS/EOS added)");
  tokenize->add_option("--model", options->model, "Model folder (default: the embedded model)");
  CLI::Option* text = tokenize->add_option("--text", options->text, "The text to tokenize");
  CLI::Option* text_file =
      tokenize->add_option("--text-file", options->text_file, "A file whose bytes, exactly, are the text to tokenize");
  text->excludes(text_file);
  tokenize->callback([options, text, text_file] {
    if (text->count() == 0 && text_file->count() == 0) {
      ThrowError(ErrorCode::kInvalidArgument, "tokenize: give the text with --text TEXT or --text-file FILE");
    }
    RunTokenize(*options, text_file->count() > 0);
  });

  CLI::App* detokenize = app.add_subcommand(
      "detokenize", "Print the text of token ids exactly as decoded, with no newline added");
  detokenize->add_option("--model", options->model, "Model folder (default: the embedded model)");
  detokenize->add_option("--tokens", options->tokens, "Comma-separated token ids, e.g. 9707,1879")->required();
  detokenize->add_flag("--skip-special", options->skip_special, "Leave out special tokens such as <|im_end|>");
  detokenize->callback([options] { RunDetokenize(*options); });
}

}  // namespace infernix
