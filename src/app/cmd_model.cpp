#include "app/commands.h"

namespace infernix {

void RegisterModelCommands(CLI::App& app) {}

}  // namespace infernix
