#include "app/commands.h"

namespace infernix {

void RegisterTokenizerCommands(CLI::App& app) {}

}  // namespace infernix
