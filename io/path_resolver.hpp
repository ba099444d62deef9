// The real filesystem lookups behind the pure policy: symlink resolution (lstat/readlink
// of each component, following dangling links too) and executable location on PATH.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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
/// link of an earlier path's walk takes two syscalls instead (three for a target with `..`,
/// walked beneath "/", five for a new file under one): the link is read anew and its target
/// spliced in, and the kernel walks the spliced path without meeting a link (or the usual way
/// follows); in a round (look_ahead), the link is read once for the round (a target with `..`
/// walked once too) and the walks go with the round's looks. A path in a folder where that
/// could not answer skips the first look. Both are hints kept per thread, never answers: every
/// path is resolved anew (in a round, as of the round's start).
class real_path_resolver final : public policy::path_resolver {
 public:
  policy::result<std::string> resolve(std::string_view normalized_abs) const override;
  /// stat(2) of the path: its device and inode, or nothing when it cannot be read.
  std::optional<policy::file_id> identify(std::string_view resolved_abs) const override;
  /// glob(3) of `glob` (no escapes; names starting with '.' match too), at most `limit` paths.
  std::vector<std::string> expand(std::string_view glob, std::size_t limit) const override;
  /// How many of this thread's resolutions were answered through a known link (tests and
  /// benchmarks read it to tell the ways apart).
  static std::uint64_t known_link_answers();

  /// Takes the first look resolve() would take at each of `paths` (normalized absolute paths,
  /// about to be resolved on this thread in this order) all at once: one system call for up to
  /// 128 of them where io_uring can be used (open_batch.hpp). A path under a known link that
  /// splices is walked through it in the same submission, each such link read once for the
  /// round (a target with `..` walked beneath "/" once, before the round's submission, and the
  /// rest of each path down from where it led, as resolve() walks a new file under it); its
  /// answer is kept only where resolve() would have taken it (the walk met no link). resolve()
  /// of such a path then uses the answer, once, in place of its own system calls, until
  /// end_look_ahead(), which the caller calls when the round is over. The answers are as old
  /// as the round, as if each resolution had been made when it began. A path named again in
  /// the round shares its first naming's answer. Returns how many namings have an answer (0
  /// for fewer than two, or without io_uring: then resolve() makes its own calls).
  static std::size_t look_ahead(std::span<const std::string> paths);
  static void end_look_ahead();
  /// How many of this thread's resolutions used an answer found ahead: a first look, or a walk
  /// through a known link (tests and benchmarks).
  static std::uint64_t looked_ahead_answers();
  /// How many looks this thread's rounds asked the kernel for (tests and benchmarks).
  static std::uint64_t looks_asked_ahead();
  /// How many known links this thread's rounds read (tests and benchmarks).
  static std::uint64_t links_read_ahead();
  /// How many rounds, on any thread, took their looks together (tests and benchmarks).
  static std::uint64_t look_ahead_rounds();
  /// The two ways on their own (tests compare them). The kernel's answers only where the
  /// whole path exists through plain symlinks, otherwise nothing.
  static policy::result<std::string> resolve_by_walk(std::string_view normalized_abs);
  static std::optional<std::string> resolve_in_kernel(std::string_view normalized_abs);

 private:
  static std::size_t take_looks_ahead(std::span<const std::string> paths);  // look_ahead's work
};

/// Locates executables: bare names on `path_env` (PATH), other names must exist; the result
/// is absolute and symlink-free, and must be a regular executable file.
class path_executable_locator final : public policy::executable_locator {
 public:
  explicit path_executable_locator(std::string path_env, std::string cwd);
  policy::result<std::string> locate(std::string_view argv0) const override;
  policy::result<policy::located_executable> locate_where(std::string_view argv0) const override;

 private:
  std::string path_env_;
  std::string cwd_;
};

}  // namespace dhara::io
