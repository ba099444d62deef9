// Command rules: argv only, listed basenames, executables from system directories.
#include "policy/command_rules.hpp"

#include <algorithm>

#include "policy/path_rules.hpp"

namespace dhara::policy {
namespace {

decision deny(std::string reason, std::string_view rule = {}) {
  return {verdict_kind::deny, std::move(reason), decider::rule, rule};
}

bool in_system_dir(std::string_view path) {
  return is_at_or_under(path, "/usr") || is_at_or_under(path, "/bin");  // /usr/local is under /usr
}

}  // namespace

bool has_shell_metachar(std::string_view command) {
  return command.find_first_of(";&|$`<>(){}\n") != std::string_view::npos;
}

std::string_view basename_of(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

command_rules compile_command_rules(const std::optional<std::vector<std::string>>& commands) {
  command_rules rules;
  if (!commands) return rules;
  rules.listed = true;
  for (const std::string& c : *commands) {
    if (c.empty()) continue;
    if (c.front() == '/') {
      auto normal = normalize_path(c, "/");
      if (normal) rules.absolute.push_back(std::move(*normal));
    } else if (c.find('/') == std::string::npos) {
      rules.names.push_back(c);
    }
  }
  return rules;
}

decision check_argv(const command_rules& rules, std::span<const std::string> argv,
                    const executable_locator* locator) {
  if (argv.empty() || argv.front().empty()) return deny("the command is empty");
  const std::string& argv0 = argv.front();
  if (argv0.find('\0') != std::string::npos) return deny("the command holds a NUL byte");
  if (!rules.listed) return {verdict_kind::allow, {}, decider::rule, {}};

  std::string_view base = basename_of(argv0);
  bool name_listed = std::find(rules.names.begin(), rules.names.end(), base) != rules.names.end();
  if (!locator) return deny("cannot locate '" + argv0 + "' to check where it lives");
  auto located = locator->locate_where(argv0);
  if (!located) return deny("the command '" + argv0 + "' was not found: " + located.err().message);
  const std::string& exe = located->real;
  auto abs = std::find(rules.absolute.begin(), rules.absolute.end(), exe);
  if (abs != rules.absolute.end()) return {verdict_kind::allow, {}, decider::rule, *abs};
  if (!name_listed)
    return deny("the command '" + std::string(base) +
                "' is not in the extension's process.commands list");
  if (!in_system_dir(exe))
    return deny("'" + argv0 + "' resolves to '" + exe +
                "', outside /usr, /bin and /usr/local; list its absolute path in process.commands to allow it");
  // The name is checked as written, so it must be the system's: a link named `git` in a
  // folder someone else may write would run whatever it points to under /usr.
  if (!in_system_dir(located->found))
    return deny("'" + argv0 + "' is found at '" + located->found + "', outside /usr, /bin and /usr/local, a link to '" +
                exe + "'; run the program by its own name, or list its absolute path in process.commands");
  auto name = std::find(rules.names.begin(), rules.names.end(), base);
  return {verdict_kind::allow, {}, decider::rule, *name};
}

decision check_command_string(const command_rules& rules, std::string_view command,
                              const executable_locator* locator) {
  if (has_shell_metachar(command))
    return deny("the command string holds shell metacharacters; pass an argv array instead");
  auto start = command.find_first_not_of(" \t");
  if (start == std::string_view::npos) return deny("the command is empty");
  auto end = command.find_first_of(" \t", start);
  std::string first(command.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
  if (first.find_first_of("'\"\\") != std::string::npos)
    return deny("the command string holds quotes or escapes; pass an argv array instead");
  // With a list, the first word must be what a shell runs: `X=… id` runs `id`, and `~`, a glob
  // or a comment is read otherwise than the locator reads it.
  if (rules.listed && first.find('=') != std::string::npos)
    return deny("the command string starts with an assignment ('" + first +
                "'), so a shell would run its next word instead; pass an argv array");
  if (rules.listed && first.find_first_of("~*?[#") != std::string::npos)
    return deny("the command's first word '" + first +
                "' holds ~, a glob or #, which a shell would expand; pass an argv array instead");
  std::string argv[1] = {std::move(first)};
  return check_argv(rules, argv, locator);
}

}  // namespace dhara::policy
