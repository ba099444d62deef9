// The dhara command line: CLI11 wiring of the subcommands in cli/*_cmd.cpp.
#include <cstdio>

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

  auto* config = app.add_subcommand("config", "Settings and permissions");
  config->require_subcommand(1);
  auto* perms = config->add_subcommand("permissions", "What each extension may do (~/.dhara/permissions.json)");
  perms->require_subcommand(1);
  perms->footer("Examples:\n  dhara config permissions list\n  dhara config permissions show web-tools\n"
                "  dhara config permissions approve web-tools network:fetch\n"
                "  dhara config permissions revoke web-tools network:fetch\n  dhara config permissions reset web-tools");
  bool perms_json = false, approve_all = false;
  std::string ext_name, cap_name;
  auto* plist = perms->add_subcommand("list", "Every installed or recorded extension, with counts");
  plist->add_flag("--json", perms_json, "Print JSON");
  auto* pshow = perms->add_subcommand("show", "One extension's capabilities: [approved], [denied], [pending]");
  pshow->add_option("extension", ext_name, "Extension name")->required();
  pshow->add_flag("--json", perms_json, "Print JSON");
  auto* papprove = perms->add_subcommand("approve", "Approve a capability (or a group, 'network:*'; --all: every declared one)");
  papprove->add_option("extension", ext_name, "Extension name")->required();
  auto* cap_opt = papprove->add_option("capability", cap_name, "Capability, e.g. network:fetch");
  auto* all_opt = papprove->add_flag("--all", approve_all, "Every capability the manifest declares");
  cap_opt->excludes(all_opt);
  auto* prevoke = perms->add_subcommand("revoke", "Deny a capability from now on (running sessions too)");
  prevoke->add_option("extension", ext_name, "Extension name")->required();
  prevoke->add_option("capability", cap_name, "Capability, e.g. network:fetch")->required();
  auto* preset = perms->add_subcommand("reset", "Forget an extension's permissions: everything pending again");
  preset->add_option("extension", ext_name, "Extension name")->required();

  bool audit_log = false;
  audit_log_options audit_opts;
  auto* doctor = app.add_subcommand("doctor", "Health checks; --audit-log shows and verifies the audit trail");
  doctor->add_flag("--audit-log", audit_log, "Show recent audit entries (all rotated files)");
  doctor->add_option("--extension", audit_opts.extension, "Only this extension");
  doctor->add_flag("--denied-only", audit_opts.denied_only, "Only denials");
  doctor->add_option("--since", audit_opts.since, "Only entries since a duration ago (30s, 15m, 1h, 2d) or an ISO time");
  doctor->add_option("-n", audit_opts.limit, "The last N entries (0: all)")->capture_default_str();
  doctor->add_flag("--json", audit_opts.json, "Raw JSON lines");
  doctor->add_flag("--verify", audit_opts.verify, "Check seq and the hash chain; name the first bad line");
  doctor->footer("Examples:\n  dhara doctor --audit-log\n  dhara doctor --audit-log --extension web-tools\n"
                 "  dhara doctor --audit-log --denied-only --since 1h\n  dhara doctor --audit-log --verify");

  try {
    app.parse(argc, argv);
    if (*papprove && cap_name.empty() && !approve_all)
      throw CLI::ValidationError("approve", "give a capability (e.g. network:fetch) or --all");
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // usage errors are exit 2 (DESIGN §6)
  }
  if (*demo) return run_demo();
  if (*list) return extensions_list(g, list_json);
  if (*run) return run_calls(g, calls_file, concurrency, mode);
  if (*doctor) {
    if (!audit_log) {
      std::fprintf(stderr, "dhara: the doctor's health report is not available yet; use 'dhara doctor --audit-log'\n");
      return 2;
    }
    return doctor_audit_log(g, audit_opts);
  }
  if (*plist) return permissions_list(g, perms_json);
  if (*pshow) return permissions_show(g, ext_name, perms_json);
  if (*papprove) return permissions_change(g, "approve", ext_name, cap_name, approve_all);
  if (*prevoke) return permissions_change(g, "revoke", ext_name, cap_name, false);
  if (*preset) return permissions_change(g, "reset", ext_name, "", false);
  return 2;
}
