// Settings (DESIGN §3.1): parsing one config.json layer with file/line/column errors and
// unknown-key warnings, and merging global → project → CLI where a project file can only
// tighten unless the project is in the global security.trustedProjects.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "policy/level.hpp"
#include "policy/result.hpp"

namespace dhara::policy {

/// How hard the audit writer pushes an entry before releasing its decision.
enum class audit_durability {
  none,   ///< batched in memory, flushed every few ms
  write,  ///< released after the entry reached write(2) (default)
  fsync,  ///< released after fdatasync (group commit)
};
std::string_view to_string(audit_durability d);

/// Which file a layer came from: decides how relative paths and loosenings are treated.
enum class layer_kind {
  global,   ///< $DHARA_HOME/config.json: absolute or `~` paths only
  project,  ///< <project>/.dhara/config.json: relative paths are relative to the project root
  cli,      ///< command-line overrides: trusted like the global file (absolute or `~` paths)
};

/// One parsed config file: every field optional, so the merge knows what a layer set.
/// Paths are kept as written; the merge makes them absolute.
struct settings_layer {
  std::optional<security_level> level;
  std::optional<std::vector<std::string>> trusted_authors;
  std::optional<std::vector<std::string>> allowed_paths;
  std::optional<std::vector<std::string>> denied_paths;
  std::optional<std::vector<std::string>> audit_ignore_patterns;
  std::optional<std::vector<std::string>> trusted_projects;
  std::optional<policy::audit_durability> audit_durability;  // qualified: the member reuses the name
  std::optional<std::uint64_t> audit_max_bytes;
  std::optional<std::uint32_t> audit_keep;
  std::optional<bool> require_os_sandbox;
  std::optional<std::vector<std::string>> extension_dirs;
  std::optional<std::uint64_t> call_timeout_ms;
  std::optional<std::uint64_t> cancel_grace_ms;
  std::optional<std::uint64_t> kill_grace_ms;
  std::optional<std::uint32_t> max_restarts;
  std::optional<std::uint64_t> restart_window_ms;
  std::optional<std::uint64_t> max_line_bytes;
};

/// A parsed layer and the warnings found on the way (unknown keys, with the closest key).
struct parsed_layer {
  settings_layer layer;
  std::vector<std::string> warnings;
};

/// Parses config text. `file` names the file in messages. An empty (or all-whitespace) text
/// is `{}`. Invalid JSON is errc::parse_error "FILE:LINE:COLUMN: …"; a wrong type or value is
/// errc::invalid_type / invalid_value naming the file and the dotted key and what is expected;
/// a relative path in a global layer is errc::invalid_value.
result<parsed_layer> parse_settings(std::string_view text, std::string_view file, layer_kind kind);

/// The same from an already parsed JSON value (the CLI's overrides, the fuzzer).
result<parsed_layer> parse_settings_json(const nlohmann::json& doc, std::string_view file,
                                         layer_kind kind);

/// The effective settings after the merge, with paths absolute (after `~` expansion) and
/// defaults filled in.
struct settings {
  security_level level = security_level::standard;
  std::vector<std::string> trusted_authors;
  std::vector<std::string> allowed_paths;          ///< default: [project root]
  std::vector<std::string> denied_paths;           ///< user entries; built-ins are added later
  /// For each of denied_paths, how a denial's reason names it: as its layer wrote it, and
  /// where ("~/.aws/ (deniedPaths in ~/.dhara/config.json)"), for path_rules_input.
  std::vector<std::string> denied_paths_named;
  std::vector<std::string> audit_ignore_patterns;
  std::vector<std::string> trusted_projects;
  policy::audit_durability audit_durability = policy::audit_durability::write;
  std::uint64_t audit_max_bytes = 104857600;
  std::uint32_t audit_keep = 5;
  bool require_os_sandbox = true;
  std::vector<std::string> extension_dirs;         ///< default: [$DHARA_HOME/extensions]
  /// Every extension folder any layer named (extensionDirs before a project or the command
  /// line narrowed it): installed code, always denied to tools (path_rules_input).
  std::vector<std::string> protected_extension_dirs;
  std::uint64_t call_timeout_ms = 120000;
  std::uint64_t cancel_grace_ms = 5000;
  std::uint64_t kill_grace_ms = 2000;
  std::uint32_t max_restarts = 3;
  std::uint64_t restart_window_ms = 60000;
  std::uint64_t max_line_bytes = 8388608;
  bool project_trusted = false;                    ///< the project is in trustedProjects
  /// Set when an untrusted project narrowed allowedPaths: the project root and the allowed
  /// entries it narrowed (absolute). The merge checks the project's entries lexically; the
  /// snapshot compile also requires each one's resolved form to stay under the resolved root
  /// and one of these, so a symlink shipped in the repository cannot widen them.
  struct allowed_confinement {
    std::string project_root;
    std::vector<std::string> within;
  };
  std::optional<allowed_confinement> allowed_confined_to;
};

/// Whether an extension may start only inside its OS sandbox: always at paranoid; at standard
/// and trusted unless the global config sets `requireOsSandbox: false` (DESIGN §9). yolo
/// starts none in a sandbox, so the question does not arise there.
inline bool os_sandbox_required(const settings& s) {
  return s.level == security_level::paranoid || s.require_os_sandbox;
}

/// Where the merge is happening: absolute, normalized paths.
struct merge_context {
  std::string home;          ///< $HOME for `~`
  std::string dhara_home;    ///< $DHARA_HOME (default extension dir lives here)
  std::string project_root;  ///< the project (relative project paths are relative to it)
};

/// Merged settings and the warnings of the merge (every ignored loosening, each saying how
/// to trust the project).
struct merged_settings {
  settings effective;
  std::vector<std::string> warnings;
};

/// Merges global, then project (may be null), then CLI overrides (may be null).
/// A project layer may only tighten unless ctx.project_root equals (exactly, after `~`
/// expansion and normalization) an entry of trustedProjects: the CLI's list when it gives
/// one, else the global layer's. `requireOsSandbox: false` and `trustedProjects` are
/// honoured only from the global file and the CLI. deniedPaths accumulate over all layers;
/// other lists of a later layer replace earlier ones.
merged_settings merge_settings(const settings_layer& global, const settings_layer* project,
                               const settings_layer* cli, const merge_context& ctx);

// ---- the keys one can get and set (`dhara config get|set|unset`) ---------------------

/// What a setting holds.
enum class setting_type {
  level,         ///< "paranoid", "standard", "trusted" or "yolo"
  durability,    ///< "none", "write" or "fsync"
  boolean,       ///< true or false
  whole_number,  ///< a whole number from `min` to `max`
  path_list,     ///< paths: absolute or `~`; a project file may also use project-relative ones
  pattern_list,  ///< globs or URLs; a relative glob matches at any depth
  name_list,     ///< author names
};

/// How the merge treats a project file's value of a setting (DESIGN §3.1).
enum class project_rule {
  added,         ///< always honoured: deniedPaths accumulate over every file
  tighten_only,  ///< honoured when it tightens; a loosening is ignored with a warning unless trusted
  trusted_only,  ///< ignored with a warning unless the project is trusted (audit rotation)
  global_only,   ///< never taken from a project file, trusted or not (trustedProjects)
};

/// One key of DESIGN §3.1 that `config get|set` accepts.
struct setting_key {
  std::string_view name;  ///< dotted, e.g. "security.audit.keep"
  setting_type type;
  project_rule project;
  std::uint64_t min = 0;  ///< whole_number only: the smallest accepted value
  std::uint64_t max = 0;  ///< whole_number only: the largest accepted value
};

/// Every settable key, in the order of DESIGN §3.1; the same ranges parse_settings enforces.
std::span<const setting_key> setting_keys();

/// The key of that exact dotted name, or nullptr.
const setting_key* find_setting_key(std::string_view name);

/// " (did you mean 'security.level'?)" for a mistyped or misplaced key ("levle", "level",
/// "extensions.level"), else "".
std::string suggest_setting_key(std::string_view name);

/// True for list-valued keys (paths, patterns, names).
bool is_list(setting_type type);

/// True for security.allowedPaths and security.deniedPaths, the two lists the path rules
/// compile: their entries are globs, anchored at the project, the home or "/".
bool is_path_rules_key(std::string_view name);

/// Checks one value of `key` as it would stand in a `kind` file, by the very rules of
/// parse_settings (type, allowed names, range, path form): nullopt when it is acceptable,
/// else the parser's error naming `file` and the key.
std::optional<error> check_setting_value(const setting_key& key, const nlohmann::json& value,
                                         std::string_view file, layer_kind kind);

/// For security.allowedPaths and security.deniedPaths, once check_setting_value accepted
/// `value`: the first entry that the path rules refuse to compile (read_apart: a backslash
/// before `/`, or `[.` or `[=` in a bracket), as `file`: security.deniedPaths entry "…" <why>,
/// the entry read as written. A file holding such a denied entry stops every session, an
/// allowed one is ignored; `config set` refuses both before writing. nullopt for other keys.
std::optional<error> path_rules_refusal(const setting_key& key, const nlohmann::json& value, std::string_view file);

/// Why a project file may never hold this value, whatever the trust (trustedProjects;
/// requireOsSandbox false): one sentence saying to use the global file; nullopt when it may.
std::optional<std::string> project_refusal(const setting_key& key, const nlohmann::json& value,
                                           std::string_view global_file);

/// The effective value of `key` as JSON: a string, number, boolean or array of strings.
nlohmann::json effective_value(const settings& s, const setting_key& key);

}  // namespace dhara::policy
