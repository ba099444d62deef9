// The dhara command line: CLI11 wiring of the subcommands in cli/*_cmd.cpp.
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  using namespace dhara::cli;
  CLI::App app{"dhara — the security core of a coding-agent harness", "dhara"};
  app.set_version_flag("--version", "dhara 0.1.0");
  app.require_subcommand(1);
  global_options g;
  app.add_flag("-v,--verbose", g.verbose, "Log debug details to stderr and the log file");
  app.add_flag("--no-prompt", g.no_prompt, "Never ask on the terminal: pending capabilities are denied");

  auto* demo = app.add_subcommand("demo", "Load the policy from DHARA_HOME and the project and print the "
                                          "decisions of a small built-in scenario");
  demo->footer("Example:\n  DHARA_HOME=/tmp/demo/.dhara dhara demo");

  auto* ext = app.add_subcommand("extensions", "Discovered extensions and their tools");
  ext->require_subcommand(1);
  bool list_json = false;
  auto* list = ext->add_subcommand("list", "Start every extension and show its version, state and tools");
  list->add_flag("--json", list_json, "Print JSON instead of a table");
  list->footer("Examples:\n  dhara extensions list\n  dhara extensions list --json");

  std::string calls_file, mode = "auto";
  std::size_t concurrency = 1;
  auto* run = app.add_subcommand("run", "Run a batch of tool calls headless, one JSON result per line on stdout");
  run->add_option("--calls", calls_file, "File of calls, one JSON object a line ('-' for stdin)")->required();
  run->add_option("-j,--concurrency", concurrency, "Calls in flight at once")->check(CLI::Range(1, 1024));
  run->add_option("--mode", mode, "auto (approve and review need a terminal)")->check(CLI::IsMember({"auto", "approve", "review"}));
  run->footer("Example:\n  echo '{\"tool\": \"echo\", \"input\": {\"text\": \"hi\"}}' | dhara run --calls -\n"
              "Exit codes: 0 ok, 2 usage, 3 a call was denied, 4 a tool failed or an extension crashed");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // usage errors are exit 2 (DESIGN §6)
  }
  if (*demo) return run_demo();
  if (*list) return extensions_list(g, list_json);
  if (*run) return run_calls(g, calls_file, concurrency, mode);
  return 2;
}
