// The dhara command line: the global flags, then each command group registers itself
// (cli/*_cmd.cpp) and main runs the action the parsed command chose.
#include <cstdio>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  using namespace dhara::cli;
  CLI::App app{"dhara — the security core of a coding-agent harness", "dhara"};
  app.set_version_flag("--version", "dhara 0.1.0");
  app.require_subcommand(1);
  // A usage error in one line, named by the command it is in: "dhara run: --calls is
  // required; see 'dhara run --help'" (CLI11's own way is two lines, without the command).
  app.failure_message([](const CLI::App* top, const CLI::Error& e) {
    std::string command = "dhara";
    for (const CLI::App* at = top; !at->get_subcommands().empty();) {
      at = at->get_subcommands().front();
      command += " " + at->get_name();
    }
    std::string what = e.what();
    while (!what.empty() && (what.back() == '\n' || what.back() == '.')) what.pop_back();
    return command + ": " + what + "; see '" + command + " --help'\n";
  });
  command_context ctx;
  app.add_flag("-v,--verbose", ctx.g.verbose, "Log debug details to stderr and the log file");
  app.add_flag("--no-prompt", ctx.g.no_prompt, "Never ask on the terminal: pending capabilities are denied");
  add_demo_command(app, ctx);
  add_extensions_commands(app, ctx);
  add_run_command(app, ctx);
  add_serve_command(app, ctx);
  add_config_commands(app, ctx);
  add_doctor_command(app, ctx);
  add_sandbox_command(app, ctx);
  add_bench_command(app, ctx);
  // An unknown command gets a sentence naming it (CLI11 would only say a subcommand is needed).
  // The agent session of the seed document (`dhara --mode approve "<prompt>"`) needs a model
  // provider this dhara does not have: that is said, with what runs tool calls the same way.
  constexpr const char* no_session =
      "dhara: an agent session (dhara --mode approve|review \"<prompt>\") needs a model provider, which "
      "this dhara does not have yet; to run tool calls with a human in the loop, use 'dhara run --calls "
      "FILE --mode approve' (or review), or 'dhara serve --stdio' under an agent core\n";
  for (int i = 1; i < argc; ++i) {
    std::string_view word = argv[i];
    if (word == "--mode" || word.starts_with("--mode=")) {
      std::fputs(no_session, stderr);
      return 2;
    }
    if (word.starts_with('-')) {  // global flags come before the command
      if (app.get_option_no_throw(std::string(word.substr(0, word.find('=')))) != nullptr) continue;
      std::fprintf(stderr, "dhara: '%s' is not an option of dhara itself (those are -v, --no-prompt, --help and "
                   "--version); a command's options follow it; see 'dhara --help'\n", argv[i]);
      return 2;
    }
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) known = known || sub->check_name(std::string(word));
    if (!known) {
      if (word.find_first_of(" \t") != std::string_view::npos) {  // a prompt, not a command
        std::fputs(no_session, stderr);
        return 2;
      }
      std::fprintf(stderr, "dhara: '%s' is not a dhara command; see 'dhara --help'\n", argv[i]);
      return 2;
    }
    break;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // usage errors are exit 2 (DESIGN §6)
  }
  return ctx.action ? ctx.action() : 2;
}
