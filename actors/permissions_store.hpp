// The permissions store: owns permissions.json for a session. It watches $DHARA_HOME, and
// when the file changes (an approval, a `dhara config permissions revoke` from another
// terminal) it reads it again, compiles a new snapshot and sends it to every checker, so a
// revoked capability is denied from the next check on, without a restart. A file that cannot
// be read makes a snapshot that denies everything, with the reason.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/checker.hpp"
#include "io/event_loop.hpp"
#include "io/identity_keeper.hpp"
#include "policy/snapshot.hpp"

namespace dhara::actors {

using changed_atom = caf::atom_constant<caf::atom("changed")>;  ///< the file may have changed
using reload_atom = caf::atom_constant<caf::atom("reload")>;    ///< read, compile, broadcast

/// The store's interface.
using permissions_store_actor = caf::typed_actor<
    /// io thread (directory watch) → store: permissions.json changed; reloaded 50 ms later,
    /// so the several events of one atomic write cause one reload.
    caf::reacts_to<changed_atom>,
    /// self: the debounce elapsed: read the file, compile, send the snapshot to every checker.
    caf::reacts_to<reload_atom>,
    /// anyone → store: the generation of the last snapshot sent (tests wait on it).
    caf::replies_to<caf::get_atom>::with<std::uint64_t>,
    /// session → store: reload now (after this session wrote the file itself), reply with the
    /// new generation once the snapshot is on its way to every checker.
    caf::replies_to<caf::put_atom>::with<std::uint64_t>,
    /// anyone → store: the snapshot the checkers use now (what `tools/list` reports).
    caf::replies_to<snapshot_atom>::with<policy::snapshot_ptr>,
    /// session → store: send `actor` each new snapshot too, `(snapshot_atom, snapshot)`, as
    /// the checkers get it, starting with the one in force (the kernel follower).
    caf::reacts_to<caf::join_atom, caf::actor>>;

/// What the store compiles snapshots from (a copy of the session's loaded policy).
struct permissions_store_config {
  policy::session_inputs inputs;        ///< dhara_home in it is where permissions.json lives
  std::vector<checker_actor> checkers;
  std::uint64_t first_generation = 1;  ///< the generation the checkers already hold
  policy::snapshot_ptr first;           ///< that snapshot
};

/// Spawns the store and starts watching $DHARA_HOME through `loop`.
permissions_store_actor spawn_permissions_store(caf::actor_system& sys, std::shared_ptr<io::event_loop> loop,
                                                permissions_store_config config);

/// What the denied entries of each rule set named at the compiles so far (the store's own).
struct kept_identities {
  io::identity_keeper paths;
  io::identity_keeper state_files;
};

/// Compiles the snapshot for the given permissions (the failed snapshot when the file could
/// not be read: `read_error` non-empty). The rules' denied identities include what `kept`
/// remembers: a denied folder moved away since an earlier compile stays refused.
policy::snapshot_ptr compile_for(const permissions_store_config& cfg, const policy::permissions& perms,
                                 const std::string& read_error, std::uint64_t generation, kept_identities& kept);

}  // namespace dhara::actors
