// What each denied entry named, kept across compiles of the rules. Rules name paths: after
// `mv a z` the entry a/private names nothing, so the rules compiled next could not know the
// folder now at z/private, and a host file operation would open it. The keeper remembers it.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/atomic_file.hpp"
#include "policy/path_rules.hpp"

namespace dhara::io {

/// Holds, for each denied entry of one rule set, an O_PATH descriptor of everything the entry
/// named at a compile since the keeper began: what it names now, and what it named before for
/// as long as that is still linked somewhere (a folder renamed away, or one an extension put a
/// new folder in place of). Something deleted is let go at the next refresh, and an entry the
/// rules no longer have is forgotten with all it named. A held descriptor keeps its inode from
/// being freed, so its number cannot pass to another file while it is remembered.
/// The permissions store owns one per rule set (actors/permissions_store.cpp).
class identity_keeper {
 public:
  /// Looks at what each of `rules.denied_targets` names now and updates what is held. Returns
  /// the identities for `rules.denied_ids`: everything held, and the rules' own.
  std::shared_ptr<const std::vector<policy::file_id>> refresh(const policy::path_rule_set& rules);
  /// How many identities are held (tests).
  std::size_t held() const;

 private:
  struct held_id {
    policy::file_id id;
    unique_fd fd;  ///< O_PATH, close-on-exec: no extension process ever has it
  };
  std::map<std::string, std::vector<held_id>, std::less<>> by_entry_;
};

}  // namespace dhara::io
