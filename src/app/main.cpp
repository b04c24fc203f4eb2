// The `infernix` binary: one subcommand per job (see --help).
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "app/commands.h"
#include "base/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Infernix: inference engine for Qwen-family language models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "infernix 0.1.0");
  infernix::RegisterModelCommands(app);
  infernix::RegisterTokenizerCommands(app);
  infernix::RegisterRenderCommand(app);
  infernix::RegisterServeCommand(app);
  infernix::RegisterBenchCommand(app);
  infernix::RegisterInspectCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // A bad command line is bad input like any other: "error: ..." and status 1.
    std::fprintf(stderr, "error: %s\nRun with --help for more information.\n", e.what());
    return 1;
  } catch (const infernix::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: internal: %s\n", e.what());
    return 2;
  }
  return 0;
}
