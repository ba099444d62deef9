// The real filesystem lookups behind the pure policy: symlink resolution (lstat/readlink
// of each component, following dangling links too) and executable location on PATH.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "policy/command_rules.hpp"
#include "policy/path_rules.hpp"

namespace dhara::io {

/// Resolves every symlink in a normalized absolute path, component by component:
/// the existing prefix is resolved, each link's target is spliced in (dangling links too,
/// so a link to a not-yet-existing denied file is seen), and the missing rest is appended.
/// More than 40 links (a loop) or an error other than "does not exist" fails.
///
/// The kernel answers first, whatever the depth: a path it walks without meeting a symlink
/// (or up to a missing component without meeting one) is its own resolution (one or two
/// syscalls); one whose links are all plain symlinks and which exists is resolved in one
/// kernel walk (three syscalls); everything else (a missing component behind a link, dangling
/// links, /proc's magic links) goes through the component walk, one `lstat` per component.
/// The result is the same either way. A path under a symlink this thread met as the first
/// link of an earlier path's walk takes two syscalls instead: the link is read anew and its
/// target spliced in, and the kernel walks the spliced path without meeting a link (or the
/// usual way follows). A path in a folder where that could not answer skips the first look.
/// Both are hints kept per thread, never answers: every path is resolved anew.
class real_path_resolver final : public policy::path_resolver {
 public:
  policy::result<std::string> resolve(std::string_view normalized_abs) const override;
  /// How many of this thread's resolutions were answered through a known link (tests and
  /// benchmarks read it to tell the ways apart).
  static std::uint64_t known_link_answers();
  /// The two ways on their own (tests compare them). The kernel's answers only where the
  /// whole path exists through plain symlinks, otherwise nothing.
  static policy::result<std::string> resolve_by_walk(std::string_view normalized_abs);
  static std::optional<std::string> resolve_in_kernel(std::string_view normalized_abs);
};

/// Locates executables: bare names on `path_env` (PATH), other names must exist; the result
/// is absolute and symlink-free, and must be a regular executable file.
class path_executable_locator final : public policy::executable_locator {
 public:
  explicit path_executable_locator(std::string path_env, std::string cwd);
  policy::result<std::string> locate(std::string_view argv0) const override;

 private:
  std::string path_env_;
  std::string cwd_;
};

}  // namespace dhara::io
