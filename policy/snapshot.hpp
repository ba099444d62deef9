// The compiled, immutable policy snapshot and decide(): every capability check of DESIGN §4
// in one pure function. Snapshots are compiled once per change (settings, permissions,
// extensions) and each checker keeps its own pointer.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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

/// The extensions of a snapshot by name, which every check looks up first. A flat table: the
/// entries in the order they were added, and slots of a power-of-two size (at least twice the
/// entries) holding each entry's index, probed in turn from the slot the name's hash names. The
/// lookup is a short hash of the name's bytes, a shift and a comparison of the name, where
/// std::unordered_map's took ~120 instructions of a ~1 260-instruction lexical check (the
/// library's byte hash and a division by a prime bucket count; docs/performance.md).
class extension_table {
 public:
  using value_type = std::pair<std::string, extension_policy>;  ///< seen through const only
  using const_iterator = const value_type*;

  /// Adds `ext` under `name` unless the name is there already (then nothing changes and the
  /// second member is false), as std::unordered_map::emplace. Invalidates iterators and
  /// references to entries (only compile_snapshot adds them, before anyone looks).
  std::pair<const_iterator, bool> emplace(std::string name, extension_policy ext);
  /// The entry named `name`, or end(). Inlined where it is called: it is the first step of
  /// every check, and a call of its own cost a fifth of its instructions (callgrind).
  [[gnu::always_inline]] const_iterator find(std::string_view name) const {
    if (slots_.empty()) return end();
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t at = hash_of(name) >> shift_;; at = (at + 1) & mask) {
      const std::uint32_t index = slots_[at];
      if (index == 0) return end();  // at least half the slots are empty: a probe ends
      const value_type& e = entries_[index - 1];
      if (same_name(e.first, name)) return &e;
    }
  }
  /// The entries in the order they were added.
  const_iterator begin() const { return entries_.data(); }
  const_iterator end() const { return entries_.data() + entries_.size(); }
  /// How many names the table holds.
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  /// The most slots a lookup of a name the table holds reads (1: every name at its own slot).
  /// A hash that lets similar names pile up shows here, where it would only slow checks down.
  std::size_t longest_probe() const;

 private:
  // A name's bytes as words: eight at a time, the last eight overlapping the one before; a
  // shorter name in one word (its first and last bytes overlapping in the same way). Two names
  // of the same length are equal exactly when their words are.
  static std::uint64_t word_at(const char* p) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  }
  static std::uint64_t short_word(const char* p, std::size_t n) {  // n < 8
    if (n >= 4) {
      std::uint32_t first, last;
      std::memcpy(&first, p, 4);
      std::memcpy(&last, p + n - 4, 4);
      return first | std::uint64_t(last) << 32;
    }
    if (n == 0) return 0;
    return static_cast<unsigned char>(p[0]) | std::uint64_t(static_cast<unsigned char>(p[n / 2])) << 8 |
           std::uint64_t(static_cast<unsigned char>(p[n - 1])) << 16;
  }
  // The length and the words, mixed by multiplications with SplitMix64's constants. A product's
  // high bits depend on every bit of what was multiplied (its low bits only on the low bits), so
  // the slot is taken from the top: names that differ only in their last bytes (`ext-3`,
  // `ext-4`; `bench-echo-10` to `-99`) land apart. A collision costs a probe, never a wrong
  // entry (find compares the names).
  static std::uint64_t hash_of(std::string_view name) {
    const char* p = name.data();
    const std::size_t n = name.size();
    std::uint64_t h = n * 0x9E3779B97F4A7C15ull;
    if (n < 8) {
      h = (h ^ short_word(p, n)) * 0xBF58476D1CE4E5B9ull;
    } else {
      for (std::size_t i = 0; i + 8 < n; i += 8) h = (h ^ word_at(p + i)) * 0xBF58476D1CE4E5B9ull;
      h = (h ^ word_at(p + n - 8)) * 0x94D049BB133111EBull;
    }
    return h;
  }
  static bool same_name(std::string_view a, std::string_view b) {
    const std::size_t n = a.size();
    if (n != b.size()) return false;
    if (n < 8) return short_word(a.data(), n) == short_word(b.data(), n);
    for (std::size_t i = 0; i + 8 < n; i += 8)
      if (word_at(a.data() + i) != word_at(b.data() + i)) return false;
    return word_at(a.data() + n - 8) == word_at(b.data() + n - 8);
  }
  void place(std::uint64_t hash, std::uint32_t index);

  std::vector<value_type> entries_;
  std::vector<std::uint32_t> slots_;  ///< an entry's index + 1, 0 when empty; none before the first
  unsigned shift_ = 61;               ///< 64 - log2(slots): a hash's top bits name its slot
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
  extension_table extensions;
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

/// The I/O views a full check uses; null members mean "lexical only" / "cannot locate" /
/// "host names are not looked up".
struct check_environment {
  const path_resolver* paths = nullptr;
  const executable_locator* executables = nullptr;
  const host_lookup* hosts = nullptr;
};

/// Decides one check against a snapshot (DESIGN §4): yolo; declared; recorded denial;
/// approved (user or trusted author); pending → ask when interactive, else denied with the
/// command that approves it; then the subject's rules (paths, url, command).
decision decide(const policy_snapshot& snapshot, const check_request& request,
                const check_environment& env = {});

/// The command a user runs to approve a capability: "dhara config permissions approve x cap".
std::string approve_command(std::string_view extension, capability cap);

}  // namespace dhara::policy
