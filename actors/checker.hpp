// The capability checker: decides every check of a tool call or host request with
// policy::decide on the snapshot it holds itself, writes one audit entry per check through
// the audit writer, and answers only once those entries are durable. Any doubt — a failed
// audit write, a pending capability nobody can be asked about, a lost answer — denies.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/approval.hpp"
#include "actors/audit_writer.hpp"
#include "policy/snapshot.hpp"
#include "policy/tool_gate.hpp"

namespace dhara::actors {

using check_atom = caf::atom_constant<caf::atom("check")>;        ///< decide a set of checks
using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;  ///< a new policy snapshot
using approver_atom = caf::atom_constant<caf::atom("approver")>;  ///< who answers pending capabilities
using refused_atom = caf::atom_constant<caf::atom("refused")>;    ///< audit a refusal at the moment of use

/// What is being checked: one tool call or one host request.
struct check_batch {
  std::string extension;
  std::string tool;          ///< the tool, or the host method ("host/fs/read")
  std::string tool_call_id;
  std::string session;
  std::vector<policy::gate_check> checks;
  std::uint64_t ticket = 0;  ///< the caller's, echoed in the check_outcome (actors/ticketed_promise.hpp)
  /// A host request: the outcome of an allowed path check names the allowed root and the
  /// checked resolution, which a file operation opens. Tool calls do not pay for them.
  bool opens_paths = false;
};

/// The verdict on a batch: allowed, or the first denial with its capability and reason.
struct check_outcome {
  bool allowed = false;
  std::string capability;
  std::string reason;
  policy::decider decided_by = policy::decider::failure;
  /// For an allowed path check of a batch that opens_paths (the last one, should there be
  /// several): the resolved allowed entry it lies under, and the path's resolution the check
  /// matched, which a host file operation opens beneath it, refusing any symlink on the way.
  std::string allowed_root;
  std::string checked_path = {};
  /// The identities of the denied entries of the rules that allowed it (a host request's only):
  /// the file operation refuses what lies in one, wherever it was moved.
  std::shared_ptr<const std::vector<policy::file_id>> denied_ids = {};
  std::uint64_t ticket = 0;  ///< the batch's ticket, when it was sent with one

  check_outcome() = default;
  check_outcome(bool allowed_, std::string capability_, std::string reason_, policy::decider decided_by_,
                std::string allowed_root_)
      : allowed(allowed_),
        capability(std::move(capability_)),
        reason(std::move(reason_)),
        decided_by(decided_by_),
        allowed_root(std::move(allowed_root_)) {}
  check_outcome(const check_outcome&) = default;
  check_outcome& operator=(const check_outcome&) = default;
  /// A move that leaves an empty string alone: libstdc++ 12's string move constructor copies a
  /// short string with a call to memcpy, an empty one too, and an outcome, whose strings are
  /// mostly empty, is moved twice a check (135 instructions a check fewer with this). A member
  /// added must be moved here too: checker.cpp names every member in a structured binding,
  /// which fails to compile when one is added. (The string's move assignment already skips an
  /// empty string: the assignment is the default.)
  check_outcome(check_outcome&& o) noexcept
      : allowed(o.allowed), decided_by(o.decided_by), denied_ids(std::move(o.denied_ids)), ticket(o.ticket) {
    take(capability, o.capability);
    take(reason, o.reason);
    take(allowed_root, o.allowed_root);
    take(checked_path, o.checked_path);
  }
  check_outcome& operator=(check_outcome&&) noexcept = default;

 private:
  static void take(std::string& to, std::string& from) noexcept {
    if (!from.empty()) to = std::move(from);
  }
};

/// Several answers to one asker, released together: the checks it sent with `send` and a
/// ticket whose audit lines went to the writer in one append. One message instead of one per
/// answer (actors/ticketed_promise.hpp, answers_together); whoever sends tickets takes it as it
/// takes a check_outcome (call_replies::answered).
struct check_outcomes {
  std::vector<check_outcome> outcomes;
};

/// The checker's interface.
using checker_actor = caf::typed_actor<
    /// session / supervisor → checker: decide and audit every check; replies allowed or the
    /// first denial (decided_by failure when the audit could not be written). Sent with
    /// `send` and a ticket, the answer comes back as an ordinary message with the ticket, or in
    /// a check_outcomes with the other answers to the same asker released with it.
    caf::replies_to<check_atom, check_batch>::with<check_outcome>,
    /// host API → checker: an operation whose checks were allowed was refused when it ran (a
    /// symlink met on the way, a denied folder moved in, an address dhara did not vet; the
    /// string says why). Audited as a denial of the batch's first check, decided by the rules;
    /// answered (denied) once the entry is as durable as a check's, as a check is.
    caf::replies_to<refused_atom, check_batch, std::string>::with<check_outcome>,
    /// permissions store → checker: use this snapshot from the next check on.
    caf::reacts_to<snapshot_atom, policy::snapshot_ptr>,
    /// session → checker: ask this actor about a pending capability (verdict `ask`) instead of
    /// denying it; its answer is the user's decision (allow / deny; quit and lost deny).
    caf::reacts_to<approver_atom, hitl_actor>,
    /// self: send the entries of every check decided since the last flush to the audit writer
    /// in one append (queued behind the checks already in the mailbox, so they batch; with
    /// nothing else in the mailbox the entries go at once, without this message; every 128
    /// answers waiting go at once as well, so the writer works while the checker decides).
    caf::reacts_to<flush_atom>>;

/// Spawns a checker holding `snapshot`. It serializes each check's audit line itself and sends
/// the lines to `audit` (the append interface only), dropping allowed checks whose path or URL
/// matches `audit_ignore_patterns` (auditIgnorePatterns; a denial is always written).
checker_actor spawn_checker(caf::actor_system& sys, policy::snapshot_ptr snapshot, audit_sink_actor audit,
                            std::vector<std::string> audit_ignore_patterns);

}  // namespace dhara::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::check_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::check_outcome)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::check_outcomes)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::policy::snapshot_ptr)
