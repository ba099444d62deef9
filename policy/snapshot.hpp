// The compiled, immutable policy snapshot and decide(): every capability check of DESIGN §4
// in one pure function. Snapshots are compiled once per change (settings, permissions,
// extensions) and each checker keeps its own pointer.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "policy/capability.hpp"
#include "policy/command_rules.hpp"
#include "policy/decision.hpp"
#include "policy/level.hpp"
#include "policy/manifest.hpp"
#include "policy/net_rules.hpp"
#include "policy/path_rules.hpp"
#include "policy/permissions.hpp"
#include "policy/settings.hpp"

namespace dhara::policy {

/// One extension as the checker sees it.
struct extension_policy {
  std::string name;
  std::string version;
  std::string folder;
  capability_set declared;            ///< from the manifest
  capability_set approved_by_user;    ///< recorded approvals (wildcards and implication applied)
  capability_set approved_by_author;  ///< auto-approved: trusted level and a trusted author
  capability_set denied;              ///< recorded denials (win over approvals)
  pending_action pending = pending_action::ask_package;
  domain_rules domains;
  command_rules commands;
};

/// Transparent hashing so a check looks an extension up by string_view without allocating.
struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

/// Everything a check needs, compiled and immutable.
struct policy_snapshot {
  std::uint64_t generation = 0;      ///< increases with every recompile
  security_level level = security_level::standard;
  bool interactive = false;          ///< the session can prompt (else pending = denied)
  std::string home;
  std::string cwd;                   ///< the session directory, absolute
  path_rule_set paths;               ///< allowed/denied paths with the built-ins
  path_rule_set state_files;         ///< only dhara's own state files (what yolo keeps denied)
  std::unordered_map<std::string, extension_policy, string_hash, std::equal_to<>> extensions;
  std::vector<std::string> problems; ///< what could not be compiled (for `dhara doctor`)
  std::string failure;               ///< non-empty: the policy could not be loaded; every check
                                     ///< is denied with this reason (decided_by failure)
};

/// A snapshot that denies everything, with the reason (an unreadable permissions file, a
/// config that stopped parsing): fail closed, and say why.
policy_snapshot failed_snapshot(std::string reason, std::uint64_t generation);

using snapshot_ptr = std::shared_ptr<const policy_snapshot>;

/// One extension to compile: its manifest, the folder it was loaded from, and its
/// permissions entry (null when none applies to this folder).
struct extension_input {
  const manifest* extension_manifest = nullptr;
  std::string folder;
  const permission_entry* permissions = nullptr;
};

/// What a snapshot is compiled from.
struct snapshot_input {
  const settings* config = nullptr;
  std::string home;
  std::string dhara_home;
  std::string project_root;
  std::string cwd;
  bool interactive = false;
  std::uint64_t generation = 0;
  std::vector<extension_input> extensions;
};

/// Compiles a snapshot. Fails (and the caller denies everything) only when a denied path
/// cannot be understood; other problems are listed in `problems`.
result<policy_snapshot> compile_snapshot(const snapshot_input& input, const path_resolver& resolver);

/// A session's inputs besides permissions: what its snapshot is compiled from again whenever
/// permissions.json changes.
struct session_inputs {
  settings config;
  std::string home;
  std::string dhara_home;
  std::string project_root;
  std::string cwd;
  bool interactive = false;
  std::vector<std::pair<manifest, std::string>> extensions;  ///< manifest, folder
};

/// Compiles a session's snapshot for `perms`: each extension gets the entry recorded for its
/// name only when that entry applies to its folder (entry_applies_to).
result<policy_snapshot> compile_session(const session_inputs& inputs, const permissions& perms,
                                        std::uint64_t generation, const path_resolver& resolver);

/// What a checked argument is.
enum class subject_kind {
  none,            ///< the capability alone
  path,            ///< a filesystem path (read, or write under filesystem:write)
  url,             ///< an http(s) URL
  command_string,  ///< a command line from a tool input (no shell metacharacters allowed)
  argv,            ///< an argv array
};

/// One check: (extension, capability, details).
struct check_request {
  std::string_view extension;
  capability cap = capability::filesystem_read;
  subject_kind kind = subject_kind::none;
  std::string_view subject;              ///< path, url or command string
  std::span<const std::string> argv;     ///< for subject_kind::argv
};

/// The I/O views a full check uses; null members mean "lexical only" / "cannot locate".
struct check_environment {
  const path_resolver* paths = nullptr;
  const executable_locator* executables = nullptr;
};

/// Decides one check against a snapshot (DESIGN §4): yolo; declared; recorded denial;
/// approved (user or trusted author); pending → ask when interactive, else denied with the
/// command that approves it; then the subject's rules (paths, url, command).
decision decide(const policy_snapshot& snapshot, const check_request& request,
                const check_environment& env = {});

/// The command a user runs to approve a capability: "dhara config permissions approve x cap".
std::string approve_command(std::string_view extension, capability cap);

}  // namespace dhara::policy
