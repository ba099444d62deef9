// `dhara serve --stdio`: the JSON-RPC 2.0 server for an agent core.
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

namespace dhara::cli {

void add_serve_command(CLI::App&, command_context&) {}

}  // namespace dhara::cli
