// `dhara sandbox exec --extension NAME -- CMD…`: runs a command under an extension's OS sandbox.
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

namespace dhara::cli {

void add_sandbox_command(CLI::App&, command_context&) {}

}  // namespace dhara::cli
