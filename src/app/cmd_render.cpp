#include "app/commands.h"

namespace infernix {

void RegisterRenderCommand(CLI::App& app) {}

}  // namespace infernix
