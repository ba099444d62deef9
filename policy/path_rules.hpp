// Path rules (DESIGN §4): fast lexical normalization, `~` expansion, globs with `**`,
// and the allowed/denied check "denied if the lexical or the resolved path is denied;
// allowed only if the resolved path is under an allowed entry". Symlinks are resolved
// through the path_resolver interface so this file stays pure; io/ has the real one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/decision.hpp"
#include "policy/result.hpp"

namespace dhara::policy {

/// Longest path accepted (Linux PATH_MAX, including the NUL): longer paths are denied.
inline constexpr std::size_t max_path_bytes = 4095;

/// Lexically normalizes `path` into `out`: made absolute against the absolute `base` when
/// relative, `.` and empty segments dropped, `..` applied (never above `/`), no trailing
/// slash except for "/" itself. No allocation when `out` has capacity. Returns false for an
/// empty path, a NUL byte, or a relative path with a non-absolute base.
bool normalize_path_into(std::string_view path, std::string_view base, std::string& out);

/// normalize_path_into as a value; errc::invalid_path with a sentence on failure.
result<std::string> normalize_path(std::string_view path, std::string_view base);

/// Expands a leading "~" or "~/" with `home`; other paths are returned unchanged.
/// "~user" forms are errc::invalid_path (not supported, so never guessed).
result<std::string> expand_home(std::string_view path, std::string_view home);

/// True when `p` has a `..` segment ("a/../b", "..", not "a..b").
bool has_dotdot_segment(std::string_view p);

/// True when `s` is segments joined by single slashes, none of them empty, `.` or `..`, with no
/// NUL byte ("src/app.ts", not "src//app.ts", "./app.ts" or "src/"): appended to a normal
/// absolute path after a slash, it stays in normal form.
bool plain_segments(std::string_view s);

/// True when `p` is an absolute path in the form normalize_path_into returns: "/" or a slash
/// followed by plain_segments. No allocation; 16 bytes at a time with SSE2, else 8.
bool is_normal_abs_path(std::string_view p);

/// True when `path` equals `dir` or lies below it (`/run/hostage` is not under `/run/host`).
/// Both must be normalized absolute paths.
bool is_at_or_under(std::string_view path, std::string_view dir);

/// True when `text` holds a glob character (`*`, `?`, `[`) that no backslash escapes. In path
/// rules and audit patterns a backslash takes the next character as itself, as in glob(3):
/// `app\[2]` names the folder `app[2]`.
bool has_glob(std::string_view text);

/// The index of the first glob character no backslash escapes, or npos.
std::size_t first_glob_char(std::string_view text);

/// True when a backslash in `text` escapes a `/` (`a\/b`).
bool escapes_slash(std::string_view text);

/// Why glob(3), which finds the sandbox's masks, and dhara's matcher would read the pattern
/// `text` differently, as the end of a sentence naming it: a backslash before `/`, or `[.` or
/// `[=` in a bracket (glob(3)'s collating symbols and equivalence classes). Empty when they read
/// it alike. Path entries with a reason are refused: a denied one stops the rules compiling.
std::string read_apart(std::string_view text);

/// True when `text` holds a glob character or a backslash: it reads differently as a pattern.
bool has_glob_syntax(std::string_view text);

/// `literal` as a pattern that matches only itself (`*`, `?`, `[` and `\` escaped).
std::string escape_glob(std::string_view literal);

/// The name a pattern's escapes spell (each backslash dropped, the character after it kept).
std::string unescape_glob(std::string_view pattern);

/// The folder of an absolute pattern before its first glob character, unescaped and normalized
/// again (the whole path when there is no glob character); empty when it cannot be normalized.
std::string glob_literal_folder(std::string_view pattern);

/// Matches a normalized path against a glob: `**` spans any number of whole segments
/// (including none), `*` and `?` stay within one segment, `[abc]`/`[a-z]`/`[!x]` classes,
/// `\x` the character x itself.
bool glob_match(std::string_view pattern, std::string_view path);

/// True when the glob matches `path` or one of its ancestors (the "at or under" of globs).
bool glob_match_at_or_under(std::string_view pattern, std::string_view path);

/// Where a file lives (stat(2)'s device and inode): a folder is still known by it after a rename.
struct file_id {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  bool operator==(const file_id&) const = default;
};

/// Resolves symlinks in a normalized absolute path. Implementations follow every link,
/// including dangling ones, and append the non-existing rest, so a link cannot escape.
class path_resolver {
 public:
  virtual ~path_resolver() = default;
  /// The resolved path, or errc::resolve_failed (loop, permission, too long): callers deny.
  virtual result<std::string> resolve(std::string_view normalized_abs) const = 0;
  /// False for resolvers that never change a path, so checks can skip the call.
  virtual bool follows_links() const { return true; }
  /// The identity of what is at `resolved_abs` now, for resolvers that read the disk.
  virtual std::optional<file_id> identify(std::string_view /*resolved_abs*/) const { return std::nullopt; }
  /// The entries that exist now and match `glob`, a glob(3) pattern (backslash escapes, see
  /// glob3_pattern) of a normalized absolute path whose only glob characters are in its last
  /// segment (at most `limit`), for resolvers that read the disk.
  virtual std::vector<std::string> expand(std::string_view /*glob*/, std::size_t /*limit*/) const { return {}; }
};

/// A resolver for purely lexical checks: returns the path unchanged (no symlinks seen).
class lexical_resolver final : public path_resolver {
 public:
  result<std::string> resolve(std::string_view normalized_abs) const override {
    return std::string(normalized_abs);
  }
  bool follows_links() const override { return false; }
};

/// Whether a path is to be read or written (writes and reads share the rules today; the
/// mode is kept for the reason text and the audit).
enum class path_access { read, write };

/// What to compile path rules from. Entries may start with `~` and may be globs;
/// they must be absolute after `~` expansion (settings made relative ones absolute).
struct path_rules_input {
  std::vector<std::string> allowed;   ///< allowedPaths (empty means nothing is allowed)
  std::vector<std::string> denied;    ///< deniedPaths added to the built-in ones
  std::string home;                   ///< $HOME, for `~`
  std::string dhara_home;             ///< $DHARA_HOME: its state files are always denied
  std::string project_root;           ///< the project: its .dhara/config.json is always denied
  /// Only dhara's own state files as built-in denials (what yolo keeps, DESIGN §4); otherwise
  /// also /etc/shadow, ~/.ssh and the /proc magic links.
  bool only_state_files = false;
  /// Non-empty when an untrusted project narrowed allowedPaths (settings::allowed_confinement):
  /// an allowed entry counts only if its *resolved* form is at/under the resolved `confine_root`
  /// and the resolved form of one of `confine_within`; others are dropped as problems. The merge
  /// checked the entries lexically; this stops a symlink the repository ships (`docs -> /`)
  /// from widening them.
  std::string confine_root = {};
  std::vector<std::string> confine_within = {};
  /// extensionDirs: installed extensions' code and manifests, always denied to tool calls and
  /// host requests (an extension allowed to write `~` must not rewrite another extension, or
  /// its own manifest). The OS sandbox makes them read-only instead (each extension reads its
  /// own folder there): see `extension_dir_rule`.
  std::vector<std::string> extension_dirs = {};
  /// For each entry of `denied`, how a denial's reason names it, when not as in `denied`: the
  /// entry as the user wrote it and where (settings::denied_paths_named). May be shorter than
  /// `denied` or empty; an empty name means the entry's text.
  std::vector<std::string> denied_named = {};
};

/// The start of the `written` text of the built-in denial of an extensions folder; the
/// sandbox profile recognizes these entries by it.
inline constexpr std::string_view extension_dir_rule = "built-in: extensions folder ";
/// How a denial names the project's own .dhara folder (its config and extensions), which is
/// protected as the extension folders are (read-only in the OS sandbox).
inline constexpr std::string_view project_dhara_rule = "built-in: <project>/.dhara";

/// One compiled entry: the text the user wrote (for reasons) and its normalized form.
struct path_entry {
  std::string written;         ///< as the user wrote it (or "built-in: …"), for reasons
  std::string normalized;      ///< absolute, normalized (a glob keeps its pattern characters)
  bool glob = false;
  std::string literal_prefix;  ///< for globs: the directory part before the first glob
                               ///< character, unescaped and compared as text; only the rest is
                               ///< matched as a glob. A built-in's folder is taken whole, glob
                               ///< characters and all (a project named `app[2]`).
  std::string named_as = {};   ///< a denied entry: how a reason names it when not `written`
                               ///< ("~/.aws/ (deniedPaths in ~/.dhara/config.json)")
};

/// How a denial's reason names `e`: as the user wrote it and where, when known.
inline const std::string& rule_name(const path_entry& e) { return e.named_as.empty() ? e.written : e.named_as; }

/// `e` as a glob(3) pattern without GLOB_NOESCAPE: its literal part (for an entry that is no
/// glob, all of it) with `*`, `?`, `[` and `\` escaped, the rest as it is (its escapes mean
/// the same to glob(3)). The sandbox and `path_resolver::expand` glob with it.
std::string glob3_pattern(const path_entry& e);

/// A child of a trie node: its index, with its segment's length and first byte, which tell
/// most siblings apart without reading the child's own node.
struct path_trie_child {
  std::uint32_t node = 0;  ///< index into path_rule_set::trie
  std::uint32_t size = 0;  ///< of its segment (never 0)
  char first = 0;          ///< its segment's first byte
};

/// One node of the segment trie that indexes the entries: the node for "/home/u" has a
/// child "proj" when an entry is at or below "/home/u/proj". Globs hang on the node of their
/// literal directory, so a check walks the path's segments once and tests only candidates.
struct path_trie_node {
  std::string segment;
  std::vector<path_trie_child> children;     ///< sorted by segment
  std::int32_t denied = -1;                  ///< plain denied entry ending here (first wins)
  std::int32_t allowed = -1;                 ///< plain allowed entry ending here
  std::vector<std::uint32_t> denied_globs;   ///< glob entries whose literal directory is here
  std::vector<std::uint32_t> allowed_globs;
};

/// Compiled, immutable path rules.
struct path_rule_set {
  std::vector<path_entry> allowed;  ///< lexical and resolved forms of each allowed entry
  std::vector<path_entry> denied;   ///< lexical and resolved forms, built-ins first
  std::vector<std::string> problems;///< entries that could not be compiled (each denies nothing
                                    ///< away: a bad denied entry makes compile fail instead)
  std::vector<path_trie_node> trie; ///< index over allowed and denied; trie[0] is "/"
  /// The identity of every denied entry that existed when the rules were compiled (its
  /// resolved form; for a glob, see denied_targets). Rules name paths; these let a host file
  /// operation refuse what lies in a denied folder that was moved since (io/host_ops.hpp).
  std::shared_ptr<const std::vector<file_id>> denied_ids;
  /// The resolved form of each denied entry whose identity was asked for (entries that do not
  /// resolve have none; a glob whose only glob characters are in its last segment, such as the
  /// built-in `$DHARA_HOME/config.json*`, has those of the entries it matched when compiled,
  /// other globs none), so that what they name can be held across compiles
  /// (io/identity_keeper.hpp).
  std::vector<std::string> denied_targets;
};

/// The entries matching a normalized absolute path (null when none).
struct path_matches {
  const path_entry* denied = nullptr;
  const path_entry* allowed = nullptr;
};

/// Finds a denied and an allowed entry at or above `normalized_abs` in one walk of the trie.
path_matches match_path(const path_rule_set& rules, std::string_view normalized_abs);

/// Compiles the rules: expands `~`, normalizes, adds the built-in denials (/etc/shadow,
/// ~/.ssh, dhara's state files, /proc magic links) and the resolved form of every entry.
/// A denied entry that cannot be understood is an error (dropping it would loosen).
result<path_rule_set> compile_path_rules(const path_rules_input& input, const path_resolver& resolver);

/// Checks one path. `raw` is what the extension gave; `cwd` is the absolute session cwd.
/// Denied when empty, holding NUL, too long, `~user`, unresolvable, or when the lexical or
/// resolved form is at/under a denied entry; allowed only when the resolved form is at/under
/// an allowed entry.
decision check_path(const path_rule_set& rules, std::string_view raw, std::string_view cwd,
                    std::string_view home, path_access access, const path_resolver& resolver);

/// The path check_path(raw, cwd, home, …) asks a resolver that follows links to resolve, into
/// `out`; false when it would decide without resolving anything (a malformed path). The rules
/// are not consulted: a path they deny lexically is never resolved, so asking for it wastes
/// only the look (the checker's look-ahead, io/path_resolver.hpp).
bool path_to_resolve(std::string_view raw, std::string_view cwd, std::string_view home, std::string& out);

}  // namespace dhara::policy
