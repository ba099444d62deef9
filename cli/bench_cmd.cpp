// `dhara bench`: the whole-system load generator (issue 7).
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

namespace dhara::cli {

void add_bench_command(CLI::App&, command_context&) {}

}  // namespace dhara::cli
