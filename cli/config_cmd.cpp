// `dhara config …`: the settings (get|set) and the permissions subcommands.
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

namespace dhara::cli {

void add_config_commands(CLI::App& app, command_context& ctx) {
  auto* config = app.add_subcommand("config", "Settings and permissions");
  config->require_subcommand(1);
  add_permissions_commands(*config, ctx);
}

}  // namespace dhara::cli
