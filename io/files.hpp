// Reading dhara's files with clear errors, and finding where they live (DHARA_HOME, the
// project root). Writing (atomic, locked) comes with the permissions store.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "policy/result.hpp"

namespace dhara::io {

/// Largest config, manifest or permissions file dhara reads (they are small by nature).
inline constexpr std::size_t max_state_file_bytes = 16 * 1024 * 1024;

/// Reads a whole regular file. A missing file is errc::not_found; a directory, a file over
/// `max_bytes`, or an unreadable file is an error naming the path and what to do.
policy::result<std::string> read_text_file(const std::string& path,
                                           std::size_t max_bytes = max_state_file_bytes);

/// Milliseconds since the Unix epoch (the audit's timestamps).
std::int64_t wall_clock_ms();

/// Where dhara's state and the session live; all absolute and normalized.
struct locations {
  std::string home;          ///< $HOME
  std::string dhara_home;    ///< $DHARA_HOME, default $HOME/.dhara
  std::string project_root;  ///< nearest ancestor of cwd holding .dhara/ (not DHARA_HOME), else cwd
  std::string cwd;
  /// `<project_root>/.dhara` is DHARA_HOME or ~/.dhara (a link to one, or the cwd is the
  /// home): the project has no folder of its own, and no file or extension is read from it as
  /// the project's, nor written there as one.
  bool project_dhara_is_state = false;
  /// `<project_root>/.dhara` is there but not a folder of this user's or root's (another
  /// user's, a link such a user made, or no folder at all): treated as the above.
  bool project_dhara_foreign = false;
  /// Neither: a `.dhara` there, if any, is the project's own.
  bool project_dhara_usable() const { return !project_dhara_is_state && !project_dhara_foreign; }
};

/// Reads HOME, DHARA_HOME and the current directory and finds the project (DESIGN §9).
policy::result<locations> discover_locations();

/// The same from given values (tests): `dhara_home_env` may be empty for the default.
policy::result<locations> discover_locations(std::string_view home, std::string_view dhara_home_env,
                                             std::string_view cwd);

}  // namespace dhara::io
