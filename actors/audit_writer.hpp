// The audit writer: the only writer of audit.jsonl. Entries from every checker are batched
// (one write(2) per batch; in fsync mode a syncer thread runs one fdatasync for the batches
// written while the last one ran, as the writer goes on) and each append is answered
// only when its entries are as durable as `security.audit.durability` asks — the checker
// releases a decision only then, or the writer releases the decisions a checker handed over
// with the entries (audit_release). A write failure answers with an error: checks fail closed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/messages.hpp"
#include "policy/audit_entry.hpp"
#include "policy/settings.hpp"


namespace dhara::actors {

using append_atom = caf::atom_constant<caf::atom("append")>;  ///< entries to write
using flush_atom = caf::atom_constant<caf::atom("flush")>;    ///< write what is pending
using lease_atom = caf::atom_constant<caf::atom("lease")>;    ///< look whether to keep audit.lock

/// The answer to an append: the last seq written (0 when everything was dropped by
/// auditIgnorePatterns or is not written yet under durability none), or why it failed.
struct audit_ack {
  std::uint64_t last_seq = 0;
  std::string error;  ///< non-empty: the entries were not written; the decisions must deny
};

/// Answers that wait for an append's lines, released by the audit writer itself once the
/// lines are as durable as configured, or refused with why they are not: the checker hands its
/// decisions over with their lines, and they reach their askers without a message back to the
/// checker first (one hop fewer a check; docs/performance.md). Whoever claims it first answers,
/// exactly once: the writer, the checker when it ends first, or the last owner dropping it.
class audit_release {
 public:
  audit_release() = default;
  audit_release(const audit_release&) = delete;
  audit_release& operator=(const audit_release&) = delete;
  virtual ~audit_release() = default;

  /// True for the first caller only, which must then call answer().
  bool claim() noexcept { return !claimed_.exchange(true, std::memory_order_acq_rel); }

  /// Answers every asker: released (`why` empty) or refused for `why`. `ctx`: the caller's
  /// execution unit (null from outside an actor's run). Called once, after claim().
  virtual void answer(const std::string& why, caf::execution_unit* ctx) = 0;

 private:
  std::atomic<bool> claimed_{false};
};
using audit_release_ptr = std::shared_ptr<audit_release>;

/// What a checker sees of the writer: append entries; the reply comes once they are as
/// durable as configured.
using audit_sink_actor = caf::typed_actor<
    /// checker → writer: lines the checker serialized and already filtered by
    /// auditIgnorePatterns (the checker's hot path: the writer only numbers, hashes, writes).
    caf::replies_to<append_atom, policy::audit_lines>::with<audit_ack>,
    /// checker → writer: the same lines, with the answers that wait for them, which the writer
    /// releases or refuses itself (no reply).
    caf::reacts_to<append_atom, policy::audit_lines, audit_release_ptr>,
    /// session, serve, extension host → writer: entries (user decisions, refusals), which the
    /// writer filters by auditIgnorePatterns and serializes itself.
    caf::replies_to<append_atom, std::vector<policy::audit_entry>>::with<audit_ack>>;

/// The writer's whole interface: the sink, plus its own batching tick.
using audit_writer_actor = audit_sink_actor::extend<
    /// self: write every pending entry in one batch (an append that finds nothing else in the
    /// mailbox is written at once, without this message).
    caf::reacts_to<flush_atom>,
    /// self: look whether to give back audit.lock (see lock_hold_ms).
    caf::reacts_to<lease_atom>>;

/// How the writer works.
struct audit_writer_config {
  std::string dhara_home;
  policy::audit_durability durability = policy::audit_durability::write;
  std::uint64_t max_bytes = 104857600;
  std::uint32_t keep = 5;
  std::vector<std::string> ignore_patterns;    ///< auditIgnorePatterns: drop matching allowed entries
  std::size_t max_pending_bytes = 64u << 20;   ///< backlog budget: beyond it appends fail closed
  /// audit.lock stays locked between batches for this long after a batch took it; then the
  /// writer takes it batch by batch for 5 ms. Every 10 ms the writer looks whether another
  /// process waits for it (`dhara config permissions …`, a verification, another session), and
  /// if so gives it back and takes it batch by batch for 5 s, as it does when its own batch had
  /// to wait: another process waits about 10 ms at most. 0: the lock is taken and released for
  /// every batch.
  std::uint32_t lock_hold_ms = 50;
};

/// Spawns the writer; it opens (or creates) $DHARA_HOME/audit.jsonl and continues its chain.
audit_writer_actor spawn_audit_writer(caf::actor_system& sys, audit_writer_config config);

}  // namespace dhara::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<dhara::policy::audit_entry>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::policy::audit_lines)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::audit_ack)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::audit_release_ptr)
