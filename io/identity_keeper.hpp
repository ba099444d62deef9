// What the denied entries named, kept across compiles of the rules. Rules name paths: after
// `mv a z` the entry a/private names nothing, so the rules compiled next could not know the
// folder now at z/private, and a host file operation would open it. The keeper remembers it.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/atomic_file.hpp"
#include "io/path_resolver.hpp"
#include "policy/path_rules.hpp"

namespace dhara::io {

/// The real resolver, whose identify() keeps what it identified open (`O_PATH`), so that what
/// a compile knew by identity is held as it was then, with no second look in which it could
/// move. The permissions store compiles with one and hands it to its keepers.
class pinning_resolver final : public policy::path_resolver {
 public:
  policy::result<std::string> resolve(std::string_view normalized_abs) const override {
    return real_.resolve(normalized_abs);
  }
  std::optional<policy::file_id> identify(std::string_view resolved_abs) const override;
  std::vector<std::string> expand(std::string_view glob, std::size_t limit) const override {
    return real_.expand(glob, limit);
  }
  /// A new descriptor (close-on-exec) of what `resolved_abs` was identified as, if it was.
  unique_fd pinned(std::string_view resolved_abs, policy::file_id& id) const;
  /// How many identities were taken by stat(2) alone, not held open (past max_held, or the
  /// open failed): the keepers keep those numbers without a descriptor.
  std::size_t unheld() const { return unheld_; }

 private:
  struct pin {
    policy::file_id id;
    unique_fd fd;
  };
  real_path_resolver real_;
  mutable std::map<std::string, pin, std::less<>> pins_;  // by resolved path
  mutable std::size_t unheld_ = 0;
};

/// Most descriptors one keeper, or one compile, holds: a project may list any number of
/// denied paths, and dhara's descriptors are for extensions' pipes first.
inline constexpr std::size_t max_held = 64;

/// Holds an `O_PATH` descriptor (close-on-exec: no extension process ever has one) of
/// everything a denied entry of one rule set named at a compile this session, for as long as
/// it is linked somewhere: what an entry names now, and what it named before, which covers a
/// folder renamed away, one an extension made anew in its place, an entry that no longer
/// resolves, and the target a denied link had before it was pointed elsewhere. What is
/// deleted (link count 0) is let go at the next refresh. A held descriptor keeps its inode from
/// being freed, so its number cannot pass to another file while it is held. Past max_held
/// descriptors, and for what could not be held open, the keeper keeps the bare numbers for the
/// rest of the session: never let go, so a freed number given to another file is refused too
/// (a false refusal, never an allow).
/// The permissions store owns one per rule set (actors/permissions_store.cpp).
class identity_keeper {
 public:
  /// Takes what `rules.denied_targets` named at their compile: from `compiled_with` when the
  /// rules were compiled with it, else by opening each target now (the session's first
  /// rules, compiled before any extension runs). Returns the identities for
  /// `rules.denied_ids`: everything held, and the rules' own.
  std::shared_ptr<const std::vector<policy::file_id>> refresh(const policy::path_rule_set& rules,
                                                              const pinning_resolver* compiled_with);
  /// How many identities are held open, and how many are kept as bare numbers (tests).
  std::size_t held() const { return held_.size(); }
  std::size_t bare() const { return bare_.size(); }

 private:
  struct held_id {
    policy::file_id id;
    unique_fd fd;
  };
  std::vector<held_id> held_;
  std::vector<policy::file_id> bare_;
};

}  // namespace dhara::io
