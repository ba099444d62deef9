// The OS sandbox profile of one extension (SANDBOX.md, DESIGN §9 "Capabilities → OS
// profile"): which paths the kernel lets it read, write and execute, which denied paths
// inside granted ones are masked, and whether it may use sockets or start processes.
// Pure: computed from already-resolved inputs; `dhara-launch` applies it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "policy/capability.hpp"
#include "policy/result.hpp"
#include "policy/snapshot.hpp"

namespace dhara::policy {

/// Version of the profile's JSON form; the launcher refuses any other.
inline constexpr int sandbox_profile_version = 2;

/// What a profile is computed from. Every path is absolute, normalized and resolved.
/// The extension's folder must be given resolved too (the launcher follows no link on it).
struct sandbox_inputs {
  capability_set granted;                  ///< approved, declared and not denied
  std::vector<std::string> allowed_paths;  ///< allowedPaths (plain entries, resolved)
  std::vector<std::string> denied_paths;   ///< deniedPaths with the built-ins (plain, resolved)
  std::vector<std::string> denied_globs;   ///< glob denials as glob(3) patterns (glob3_pattern): the kernel cannot mask these
  /// Extension folders (extensionDirs, plain and resolved): denied to tools by the broker,
  /// read-only for the kernel, since each extension runs from its own folder in there.
  std::vector<std::string> read_only_paths;
  std::string extension_folder;            ///< the extension's folder (read)
  std::string home;                        ///< $HOME: never inside an interpreter's granted prefix
  std::string interpreter;                 ///< the resolved executable that is exec'd
  std::string interpreter_loader;          ///< its ELF loader (PT_INTERP, resolved); "" if static
  std::string temp_dir;                    ///< a private temp dir (read and write)
};

/// The network the kernel allows (DESIGN §9).
struct sandbox_network {
  bool connect = false;  ///< TCP sockets and connect: network:outbound or network:fetch
  bool bind = false;     ///< TCP sockets, bind and listen: network:inbound
  bool udp = false;      ///< UDP and netlink sockets: network:dns
  bool operator==(const sandbox_network&) const = default;
};

/// The profile `dhara-launch` applies. Paths that do not exist when it starts are skipped
/// (there is nothing to grant), except masks, which it reports in `unenforced` terms.
struct sandbox_profile {
  std::vector<std::string> read;     ///< read files, list folders
  std::vector<std::string> write;    ///< read plus write, truncate, make, remove, rename
  std::vector<std::string> execute;  ///< read plus execute
  std::vector<std::string> mask;     ///< denied paths inside granted ones: hidden by mounts
  /// Read-only paths inside write grants: bound read-only by mounts (writes fail EROFS).
  std::vector<std::string> read_only;
  /// Denied globs inside granted paths whose only glob characters are in the last segment
  /// (`<project>/.dhara/config.json*`), glob(3) patterns with backslash escapes: the launcher
  /// masks what they match when it starts.
  std::vector<std::string> mask_globs;
  sandbox_network network;
  bool spawn = false;                ///< fork/clone and exec of system programs (process:spawn)
  std::string temp_dir;              ///< the private temp dir (also in `write`)
  /// Restrictions only the broker enforces (glob denials inside granted paths), one sentence
  /// each: the fail-closed rules and `dhara doctor` may show them.
  std::vector<std::string> unenforced;
  bool operator==(const sandbox_profile&) const = default;
  /// Whether the launcher mounts anything (masks, read-only paths): it then needs a user
  /// and mount namespace.
  bool needs_mounts() const { return !mask.empty() || !mask_globs.empty() || !read_only.empty(); }
};

/// The files of /etc every extension may read (SANDBOX.md "Rules that worked").
const std::vector<std::string>& sandbox_etc_files();

/// The system folders every extension may read (execute too with process:spawn).
const std::vector<std::string>& sandbox_system_dirs();

/// Whether the launcher may follow symbolic links on `path`, a grant of a profile: only on
/// the fixed system paths a profile grants (sandbox_system_dirs, sandbox_etc_files, the
/// device files, `/etc/pythonX.Y`), where links are part of the system (`/bin` into `/usr`,
/// `/etc/resolv.conf`). Every other grant was resolved when the profile was computed, so a
/// link on it now was made since, perhaps by an extension that may write next to it: the
/// launcher refuses to start rather than grant what the link points at.
bool sandbox_path_follows_links(std::string_view path);

/// The capabilities the kernel should grant `ext`: approved (by the user or a trusted
/// author) and declared, minus recorded denials.
capability_set sandbox_granted(const extension_policy& ext);

/// The inputs for one extension of a snapshot: its granted capabilities, the snapshot's
/// plain allowed and denied entries (lexical and resolved forms), its folder.
sandbox_inputs sandbox_inputs_for(const policy_snapshot& snapshot, const extension_policy& ext,
                                  std::string interpreter, std::string interpreter_loader,
                                  std::string temp_dir);

/// Computes the profile. Deny beats grant: a denied path at or above a granted one removes
/// that grant; a denied path below one becomes a mask. A read-only path at or above a write
/// grant turns it into a read grant; one below a write grant becomes a read-only mount.
/// Lists are sorted and deduplicated.
sandbox_profile compute_sandbox_profile(const sandbox_inputs& in);

/// The profile as one JSON object (the launcher's input).
std::string to_json(const sandbox_profile& p);

/// Parses to_json's output; errors name the field. Paths must be absolute and normalized.
result<sandbox_profile> parse_sandbox_profile(std::string_view text);

/// The argv that runs `argv` under the launcher: `{launcher, "--profile", profile_file, "--",
/// argv…}`. `argv[0]` must be absolute (the resolved interpreter).
std::vector<std::string> launcher_argv(std::string_view launcher, std::string_view profile_file,
                                       const std::vector<std::string>& argv);

/// The longest `--profile-json` argument launcher_argv_inline gives.
inline constexpr std::size_t max_inline_profile_part = 64 * 1024;

/// The same with the profile inline: `{launcher, "--profile-json", to_json(profile), "--",
/// argv…}` (the extension host: nothing to write or clean up). A profile is a few KiB; one
/// longer than max_inline_profile_part (tens of thousands of deniedPaths) is split over
/// several `--profile-json` arguments, which the launcher joins: the kernel refuses a single
/// argument over 128 KiB. All arguments together must stay below its ARG_MAX (about 2 MiB).
std::vector<std::string> launcher_argv_inline(std::string_view launcher, const sandbox_profile& profile,
                                              const std::vector<std::string>& argv);

}  // namespace dhara::policy
