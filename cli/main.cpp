// The dhara command line: the global flags, then each command group registers itself
// (cli/*_cmd.cpp) and main runs the action the parsed command chose.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "policy/text.hpp"

namespace {

namespace policy = dhara::policy;

// Words for CLI11's option types in a message: "INT" is "a whole number".
std::string_view type_in_words(const CLI::Option* opt) {
  const std::string type = opt == nullptr ? std::string() : opt->get_type_name();
  if (type.find("INT") != std::string::npos) return "a whole number";
  if (type.find("FLOAT") != std::string::npos || type.find("NUMBER") != std::string::npos) return "a number";
  return "a value";
}

// The names of a command's own commands, in the order its help lists them.
std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

// The command that has the option of that name itself: `at` or one above it (global flags
// are dhara's own), else null.
const CLI::App* owner_of(const CLI::App& at, const std::string& name) {
  for (const CLI::App* app = &at; app != nullptr; app = app->get_parent())
    if (app->get_option_no_throw(name) != nullptr) return app;
  return nullptr;
}

// The option of that name in `at` or a command above it.
const CLI::Option* option_named(const CLI::App& at, const std::string& name) {
  const CLI::App* owner = owner_of(at, name);
  return owner == nullptr ? nullptr : owner->get_option_no_throw(name);
}

// "-j=3" gives -j the value "=3": the way to write it, said after the problem (not for
// "-j=x", where the value after '=' would be refused too).
std::string short_form_hint(const CLI::Option* opt, std::string_view value) {
  if (opt == nullptr || opt->get_snames().empty() || !value.starts_with('=') || value.size() < 2) return {};
  const std::string_view rest = value.substr(1);
  if (type_in_words(opt) == "a whole number" && rest.find_first_not_of("0123456789") != std::string_view::npos)
    return {};
  return " (a short option takes its value after a space, as in '-" + opt->get_snames().front() + " " +
         dhara::policy::terminal_safe(rest) + "')";
}

// "-vv" for a command whose short flags include -v: each letter one of `app`'s own flags, as
// CLI11 reads a cluster of short flags.
bool short_flags_of(const CLI::App& app, std::string_view word) {
  if (word.size() < 3 || word[0] != '-' || word[1] == '-') return false;
  for (char c : word.substr(1)) {
    const CLI::Option* opt = app.get_option_no_throw(std::string("-") + c);
    if (opt == nullptr || opt->get_expected_max() != 0) return false;
  }
  return true;
}

// "dhara config permissions" for that command.
std::string command_path(const CLI::App& app) {
  return app.get_parent() == nullptr ? std::string("dhara") : command_path(*app.get_parent()) + " " + app.get_name();
}

// "'dhara --no-prompt run …'": `flag` of `owner` put before the rest of the command line to `at`.
std::string placed_before(const CLI::App& owner, const CLI::App& at, std::string_view flag) {
  const std::string before = command_path(owner);
  return "'" + before + " " + policy::terminal_safe(flag) + command_path(at).substr(before.size()) + " …'";
}

// What is wrong with a command line CLI11 refused, said for a user, without the command's
// name (the caller adds it). `top` is dhara, `at` the deepest command the line reached.
// `said_at` starts as `at`; it becomes the command whose own option the message is about
// (dhara, for its global flags), whose name and help the caller then gives.
std::string usage_problem(const CLI::App& top, const CLI::App& at, const CLI::Error& e, std::span<char*> argv,
                          const CLI::App*& said_at) {
  std::string what = e.what();
  while (!what.empty() && (what.back() == '\n' || what.back() == '.')) what.pop_back();
  // A word no option of the command took. CLI11 reports a missing required option before it
  // ("dhara run --call x" said "--calls is required") and lists such words backwards; the
  // first one on the line, named with the nearest option or command, is what to fix.
  std::vector<std::string> extras = top.remaining(true);
  // "--" is no word to fix: "dhara sandbox exec -- ls" lacks --extension (it said "'--' is not
  // an option … did you mean '-h'?": a review).
  std::erase(extras, "--");
  if (!extras.empty() && (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr ||
                          dynamic_cast<const CLI::RequiredError*>(&e) != nullptr)) {
    std::string first = extras.front();
    for (char* word : argv.subspan(1))
      if (std::find(extras.begin(), extras.end(), word) != extras.end()) {
        first = word;
        break;
      }
    std::vector<std::string> names;
    const bool option = first.starts_with('-');
    if (option) {
      for (const CLI::Option* opt : at.get_options()) {
        for (const std::string& n : opt->get_lnames()) names.push_back("--" + n);
        for (const std::string& n : opt->get_snames()) names.push_back("-" + n);
      }
    } else {
      names = command_names(at);
    }
    const std::vector<std::string_view> candidates(names.begin(), names.end());
    const std::string shown = "'" + policy::terminal_safe(first) + "'";
    const std::string name = first.substr(0, first.find('='));
    // dhara's own flags come before the command (docs/cli.md): said so, with the line to type.
    // "-vv" is dhara's -v twice.
    const std::string own = option && short_flags_of(top, name) ? name.substr(0, 2) : name;
    if (const CLI::App* owner = option ? owner_of(at, own) : nullptr; owner != nullptr && owner != &at) {
      const std::string before = command_path(*owner);
      if (option_named(at, own) == owner->get_version_ptr())  // it ends dhara at once: no command after it
        return shown + " is a flag of " + before + " itself: run '" + before + " " + policy::terminal_safe(name) + "'";
      return shown + " is a flag of " + before + " itself: give it before the command, as in " +
             placed_before(*owner, at, name);
    }
    std::string hint = policy::did_you_mean(name, candidates);
    if (option && hint.empty()) {  // "dhara run … --no-promptt": the nearest of dhara's own flags, placed
      for (const CLI::App* above = at.get_parent(); above != nullptr && hint.empty(); above = above->get_parent()) {
        std::vector<std::string> flags;
        for (const CLI::Option* opt : above->get_options())
          if (opt != above->get_version_ptr() && opt != above->get_help_ptr())  // each has its own way
            for (const std::string& n : opt->get_lnames()) flags.push_back("--" + n);
        const std::vector<std::string_view> near(flags.begin(), flags.end());
        if (const std::string_view best = policy::closest_match(name, near); !best.empty())
          hint = " (did you mean '" + std::string(best) + "', a flag of " + command_path(*above) +
                 " itself? it goes before the command, as in " + placed_before(*above, at, best) + ")";
      }
    }
    // A command that runs a program ("sandbox exec … ls -la"): the program's own options go
    // after "--", which is what to say, not the nearest of the command's options.
    const CLI::Option* program = at.get_option_no_throw("command");
    const bool no_dashes = std::none_of(argv.begin(), argv.end(), [](const char* w) { return std::string_view(w) == "--"; });
    if (option && program != nullptr && program->count() > 0 && no_dashes)
      return shown + " is not an option of this command; to give it to the program, put '--' before the program, as in '" +
             command_path(at) + " --extension NAME -- PROGRAM " + policy::terminal_safe(first) + "'";
    if (option) return shown + " is not an option of this command" + hint;
    if (!names.empty()) return shown + " is not one of its commands" + hint;
    return shown + " is more than this command takes";
  }
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && what == "A subcommand is required") {
    std::string list;
    for (const std::string& name : command_names(at)) list += (list.empty() ? "" : ", ") + name;
    return "give one of its commands: " + list;
  }
  // "--json was given a disallowed flag override": "--json=0", "--no-prompt=false".
  if (constexpr std::string_view tail = " was given a disallowed flag override";
      dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr && what.ends_with(tail)) {
    std::string name = what.substr(0, what.size() - tail.size());  // without its dashes
    if (!name.starts_with('-')) name = (name.size() == 1 ? "-" : "--") + name;
    if (const CLI::App* owner = owner_of(at, name)) said_at = owner;  // "dhara --no-prompt=0 doctor": dhara's
    return name + " is a flag: give it without a value";
  }
  // "--calls: 1 required INT missing": the option was given last, without its value.
  if (const auto colon = what.find(": "); dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr &&
                                          colon != std::string::npos && what.ends_with(" missing")) {
    const std::string name = what.substr(0, colon);
    return name + " needs " + std::string(type_in_words(option_named(at, name))) + " after it";
  }
  // "Could not convert: --calls = abc".
  if (constexpr std::string_view head = "Could not convert: ";
      dynamic_cast<const CLI::ConversionError*>(&e) != nullptr && what.starts_with(head)) {
    const auto eq = what.find(" = ", head.size());
    if (eq != std::string::npos) {
      const std::string name = what.substr(head.size(), eq - head.size());
      if (const CLI::App* owner = owner_of(at, name)) said_at = owner;  // "dhara --no-prompt=x doctor": dhara's
      const CLI::Option* opt = option_named(at, name);
      if (opt != nullptr && opt->get_expected_max() == 0) return name + " is a flag: give it without a value";  // "--json=maybe"
      const std::string_view value = std::string_view(what).substr(eq + 3);
      return name + " takes " + std::string(type_in_words(opt)) + ", not '" + policy::terminal_safe(value) + "'" +
             short_form_hint(opt, value);
    }
  }
  // A checked value: "--concurrency: Value 0 not in range 1 to 1024", "--mode: x not in {a,b}".
  if (const auto colon = what.find(": "); dynamic_cast<const CLI::ValidationError*>(&e) != nullptr &&
                                          colon != std::string::npos) {
    const std::string name = what.substr(0, colon);
    const std::string_view rest = std::string_view(what).substr(colon + 2);
    if (const auto range = rest.find(" not in range "); rest.starts_with("Value ") && range != std::string_view::npos) {
      const std::string_view value = rest.substr(6, range - 6);
      const CLI::Option* opt = option_named(at, name);
      return name + " takes " + std::string(type_in_words(opt)) + " from " + std::string(rest.substr(range + 14)) +
             ", not '" + policy::terminal_safe(value) + "'" + short_form_hint(opt, value);
    }
    if (const auto set = rest.find(" not in {"); set != std::string_view::npos && rest.ends_with("}")) {
      std::string members(rest.substr(set + 9, rest.size() - set - 10));
      for (std::size_t comma = members.find(','); comma != std::string::npos; comma = members.find(',', comma + 2))
        members.replace(comma, 1, ", ");
      return name + " takes one of " + members + ", not '" + policy::terminal_safe(rest.substr(0, set)) + "'";
    }
  }
  return policy::terminal_safe(what);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dhara::cli;
  // A standard descriptor closed by the caller (`dhara run … >&-`) is /dev/null from here:
  // else the first file dhara opens takes its number, and results or messages meant for
  // stdout went into that file (dhara's own log, a review). A closed stdout then reads as a
  // reader that takes everything; one that fails (a full disk, a gone pipe) is reported.
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      const int null = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (null >= 0 && null != fd) ::close(null);  // the lowest free number is fd itself
    }
  CLI::App app{"dhara — the security core of a coding-agent harness", "dhara"};
  app.set_version_flag("--version", "dhara 0.1.0");
  // A flag takes no value: CLI11 would read "--no-prompt=false" as "prompt" and "--json=0" as
  // "no JSON", in silence (a review). Every option and command made below inherits this.
  app.option_defaults()->disable_flag_override();
  app.require_subcommand(1);
  // A usage error in one line, named by the command it is in: "dhara run: --calls is
  // required; see 'dhara run --help'" (CLI11's own way is two lines, without the command).
  app.failure_message([argc, argv](const CLI::App* top, const CLI::Error& e) {
    const CLI::App* at = top;  // the deepest command the line reached
    while (!at->get_subcommands().empty()) at = at->get_subcommands().front();
    const CLI::App* said_at = at;
    const std::string problem = usage_problem(*top, *at, e, std::span(argv, static_cast<std::size_t>(argc)), said_at);
    const std::string command = command_path(*said_at);
    return command + ": " + problem + "; see '" + command + " --help'\n";
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
      const std::string name(word.substr(0, word.find('=')));
      if (!word.starts_with("--") && name.size() < word.size() && app.get_option_no_throw(name) != nullptr) {
        // "-v=1": CLI11 would read "-v" and a stray "-=1"; dhara's short flags take no value.
        std::fprintf(stderr, "dhara: %s is a flag: give it without a value; see 'dhara --help'\n", name.c_str());
        return 2;
      }
      if (app.get_option_no_throw(name) != nullptr || short_flags_of(app, word)) continue;  // "-vv" too
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
      const std::vector<std::string> names = command_names(app);
      const std::vector<std::string_view> commands(names.begin(), names.end());
      std::fprintf(stderr, "dhara: '%s' is not a dhara command%s; see 'dhara --help'\n",
                   policy::terminal_safe(word).c_str(), policy::did_you_mean(word, commands).c_str());
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
