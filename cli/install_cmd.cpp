// `dhara extensions install <folder>` and `dhara extensions remove <name>`.
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

namespace dhara::cli {

void add_install_commands(CLI::App&, command_context&) {}

}  // namespace dhara::cli
