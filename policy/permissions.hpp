// The permissions.json model (DESIGN §3.2): approved / denied / absent (= pending) per
// capability, bound to the extension's version and folder; serialization keeps unknown
// fields. The file itself is read and written by the permissions store (actors/, io/).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/capability.hpp"
#include "policy/level.hpp"
#include "policy/result.hpp"

namespace dhara::policy {

/// A recorded decision about one capability (absence means pending).
enum class permission_state { approved, denied };
std::string_view to_string(permission_state s);

struct manifest;

/// How far a manifest lets its scoped capabilities reach: `network.outbound` the hosts of
/// network:fetch and network:outbound, `process.commands` the programs of process:spawn.
/// nullopt: the manifest gives no list, so anything (a public host, any command).
struct capability_scope {
  std::optional<std::vector<std::string>> network_domains;
  std::optional<std::vector<std::string>> process_commands;
  bool operator==(const capability_scope&) const = default;
};

/// The scope `m` declares.
capability_scope scope_of(const manifest& m);

/// The capabilities whose reach `now` widens beyond `then`: a list that became absent, or
/// that names an entry `then` did not (compared as written; a narrower list widens nothing).
capability_set widened(const capability_scope& then, const capability_scope& now);

/// One extension's record.
struct permission_entry {
  std::string version;
  /// Keys as written: a catalog name or a group wildcard ("network:*").
  std::map<std::string, permission_state> capabilities;
  std::optional<std::string> approved_at;
  std::optional<std::string> approved_by;
  std::optional<std::string> folder;  ///< the extension folder the approval was given for
  /// What the manifest reached when a decision was last recorded ("scope" in the file): an
  /// approval holds only as far as that. nullopt in an entry written by hand (the seed's
  /// shape) or by a dhara before scopes, which is compared with nothing (`extensions install
  /// --upgrade` first gives it the scope of the manifest it replaces).
  std::optional<capability_scope> scope;
  nlohmann::json extra = nlohmann::json::object();  ///< unknown fields, kept on write
};

/// The whole file: extension name → record.
struct permissions {
  std::map<std::string, permission_entry> entries;
};

/// Parsed permissions and the warnings found (e.g. an unknown capability key, which never
/// grants anything).
struct parsed_permissions {
  permissions value;
  std::vector<std::string> warnings;
};

/// Parses permissions.json text; empty text is `{}`. A malformed file is an error with
/// line and column; a wrong type or a state other than "approved"/"denied" is an error
/// naming the extension and key. Callers never overwrite a file that failed to parse.
result<parsed_permissions> parse_permissions(std::string_view text);
result<parsed_permissions> parse_permissions_json(const nlohmann::json& doc);

/// Serializes (2-space indent, trailing newline), known fields first, unknown fields kept.
std::string serialize_permissions(const permissions& p);

/// The approved and denied capabilities an entry grants an extension of `current_version`
/// at `level`, wildcards expanded, network:outbound ⇒ network:fetch applied, deny winning
/// over approve. On a version change: paranoid forgets everything (asks again); standard,
/// trusted and yolo keep what was recorded (new capabilities stay pending). With `current`
/// (the manifest's scope now) and a recorded scope, an approval whose reach the manifest
/// widened since (widened()) is pending again, whatever the version says.
struct effective_permissions {
  capability_set approved;
  capability_set denied;
};
effective_permissions effective_for(const permission_entry& entry, std::string_view current_version,
                                    security_level level, const capability_scope* current = nullptr);

/// True when the entry applies to an extension named `name` loaded from `folder`: a
/// recorded folder must equal it; without one, only $DHARA_HOME/extensions/<name> matches.
bool entry_applies_to(const permission_entry& entry, std::string_view name, std::string_view folder,
                      std::string_view dhara_home);

/// Records `pattern` (a name or "group:*", stored as written) as approved/denied for `ext`,
/// creating the entry with `version` and `folder` if absent, and stamping approvedAt
/// (`now_iso8601`) and approvedBy ("user"). Invalid patterns and invalid extension names
/// are errors, nothing changed. The entry's version and folder become the given ones (an
/// empty folder removes the binding). An entry recorded for another folder starts over
/// (its states belonged to another extension); an entry without a folder adopts `folder`.
/// A version change moves the entry as `level` binds approvals (rebind_version): at paranoid
/// the old version's states are forgotten before this one is recorded, so one approval or
/// revocation never brings back the others given to the version before. Likewise the
/// entry's scope becomes `*scope`, the manifest's now (rebind_scope): approvals whose reach
/// it widens are forgotten first. nullptr: no manifest at hand, the recorded scope stays.
result<permission_entry> record(permissions& p, std::string_view ext, std::string_view pattern,
                                permission_state state, std::string_view version,
                                std::string_view folder, std::string_view now_iso8601, security_level level,
                                const capability_scope* scope);

/// Moves an entry to `version` the way `level` binds approvals (see effective_for):
/// paranoid forgets every recorded capability, the other levels keep them. No-op when the
/// version is unchanged.
void rebind_version(permission_entry& entry, std::string_view version, security_level level);

/// Moves an entry to `scope`: an approval whose reach `scope` widens beyond the recorded one
/// is forgotten (pending: asked again), a wildcard covering such a capability with it;
/// denials stay. An entry without a recorded scope only takes this one.
void rebind_scope(permission_entry& entry, const capability_scope& scope);

/// Forgets an extension (back to pending). Returns false if it had no entry.
bool reset(permissions& p, std::string_view ext);

}  // namespace dhara::policy
