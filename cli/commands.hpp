// The subcommands of the dhara executable. Each cli/*_cmd.cpp registers its own CLI11
// subcommands through one add_*_commands() function; main.cpp only calls them and runs the
// action the parsed command chose. Keep this header free of CLI11 (it is slow to compile).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace CLI {
class App;
}

namespace dhara::cli {

/// Options every command shares.
struct global_options {
  bool verbose = false;
  bool no_prompt = false;  ///< never ask, even with a terminal (pending capabilities are denied)
};

/// What parsing chose: a command sets `action` in its CLI11 callback; main runs it after the
/// parse succeeded and returns its exit code (DESIGN §6).
struct command_context {
  global_options g;
  std::function<int()> action;
};

/// The folder of the extensions bundled with dhara: `<directory of the dhara executable>/extensions`
/// ("" when /proc/self/exe cannot be read). `dhara extensions install NAME` installs from it.
std::string bundled_extensions_dir();

/// `dhara demo`.
void add_demo_command(CLI::App& app, command_context& ctx);
/// `dhara extensions list|install|remove`.
void add_extensions_commands(CLI::App& app, command_context& ctx);
/// `dhara extensions install|remove` (under the `extensions` subcommand).
void add_install_commands(CLI::App& extensions, command_context& ctx);
/// `dhara run --calls FILE|- [-j N] [--mode …]`.
void add_run_command(CLI::App& app, command_context& ctx);
/// `dhara config get|set` and `dhara config permissions …`.
void add_config_commands(CLI::App& app, command_context& ctx);
/// `dhara config permissions …` (under the `config` subcommand).
void add_permissions_commands(CLI::App& config, command_context& ctx);
/// `dhara doctor [--audit-log …]`.
void add_doctor_command(CLI::App& app, command_context& ctx);
/// `dhara serve --stdio [--mode …]`.
void add_serve_command(CLI::App& app, command_context& ctx);
/// `dhara sandbox exec --extension NAME -- CMD…`.
void add_sandbox_command(CLI::App& app, command_context& ctx);
/// `dhara bench [--extensions N] [--calls M] [--inflight K] [--durability …] [--json]`.
void add_bench_command(CLI::App& app, command_context& ctx);

}  // namespace dhara::cli
