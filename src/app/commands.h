// Subcommands of the `infernix` binary. Each Register* function adds its subcommands to the app and
// wires their callbacks; a callback reports user errors by throwing infernix::Error, which main()
// prints as "error: ..." with exit status 1.
#pragma once

#include <memory>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/file_set.h"
#include "loader/model_package.h"

namespace infernix {

void RegisterModelCommands(CLI::App& app);      // logits, generate           (cmd_model.cpp)
void RegisterTokenizerCommands(CLI::App& app);  // tokenize, detokenize       (cmd_tokenizer.cpp)
void RegisterRenderCommand(CLI::App& app);      // render                     (cmd_render.cpp)
void RegisterServeCommand(CLI::App& app);       // serve                      (cmd_serve.cpp)
void RegisterBenchCommand(CLI::App& app);       // bench                      (cmd_bench.cpp)
void RegisterInspectCommand(CLI::App& app);     // inspect                    (cmd_inspect.cpp)

// The files of the model named by --model: a folder on disk, or the embedded default model when
// `path` is empty. Throws Error(kNotFound) for a missing path.
std::unique_ptr<FileSet> OpenModelFiles(const std::string& path);
// The model named by --model: a Hugging Face folder, a GGUF file, or the embedded default model when
// `path` is empty (loader/model_package.h). Throws Error(kNotFound) for a missing path.
std::unique_ptr<ModelPackage> OpenModel(const std::string& path);

// Parses "1,2,3" (spaces allowed, a trailing comma not) into token ids. Throws
// Error(kInvalidArgument) naming the bad element.
std::vector<int32_t> ParseTokenList(const std::string& text);

// Writes bytes to standard output exactly; throws Error(kIo) when it cannot.
void WriteStdout(std::string_view bytes);

// Text of a whole file on disk; throws Error(kNotFound / kIo) naming the path.
std::string ReadFileText(const std::string& path);

}  // namespace infernix
