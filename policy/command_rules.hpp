// Command rules (DESIGN §4, §9): commands are argv, never shell strings. With a manifest's
// process.commands list, argv[0] must be a listed basename whose executable lies under
// /usr, /bin or /usr/local (or is listed by its absolute path). Finding an executable on
// PATH is I/O, so it goes through the executable_locator interface.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/decision.hpp"
#include "policy/result.hpp"

namespace dhara::policy {

/// True when `command` holds a shell metacharacter: ; & | $ ` < > ( ) { } or a newline.
bool has_shell_metachar(std::string_view command);

/// The last path component: "/usr/bin/git" → "git".
std::string_view basename_of(std::string_view path);

/// Where an executable was found, and what runs.
struct located_executable {
  /// The name as found, made absolute with its folder's links resolved but not its own: the
  /// PATH entry's `/usr/bin/git`, or a project's `/home/u/p/git` that is a link to `/bin/sh`.
  std::string found;
  std::string real;  ///< the absolute, symlink-free path of the file that runs
};

/// Finds executables (io/ implements it with PATH and stat).
class executable_locator {
 public:
  virtual ~executable_locator() = default;
  /// The absolute, symlink-free path of `argv0`: a bare name is searched on PATH, a path is
  /// checked to exist. errc::not_found when there is no such executable.
  virtual result<std::string> locate(std::string_view argv0) const = 0;
  /// The same, with where it was found. By default what `locate` gives, as both.
  virtual result<located_executable> locate_where(std::string_view argv0) const {
    auto real = locate(argv0);
    if (!real) return real.err();
    return located_executable{*real, *real};
  }
};

/// Compiled process.commands rules.
struct command_rules {
  bool listed = false;                 ///< process.commands was given
  std::vector<std::string> names;      ///< basenames allowed ("git")
  std::vector<std::string> absolute;   ///< absolute paths listed as such ("/opt/tool/bin/x")
};

/// Compiles a process.commands list (nullopt = no list: any command with process:spawn).
command_rules compile_command_rules(const std::optional<std::vector<std::string>>& commands);

/// Checks an argv. Without a list, any non-empty argv passes. With a list: the basename
/// must be listed (or the absolute path), and the located executable must lie under the
/// system directories or equal a listed absolute path; so must the name where it was found,
/// so that a link named like a listed command (`./git -> /bin/sh`) runs nothing else. Without a locator a listed command
/// is denied (no way to know where it lives).
decision check_argv(const command_rules& rules, std::span<const std::string> argv,
                    const executable_locator* locator);

/// Checks a command string from a tool input: refused when it holds shell metacharacters,
/// otherwise checked by its first word as argv[0]. A first word a shell would not run as
/// written is refused too: an assignment (`X=/.. id` runs `id`), `~`, a glob or a comment.
decision check_command_string(const command_rules& rules, std::string_view command,
                              const executable_locator* locator);

}  // namespace dhara::policy
