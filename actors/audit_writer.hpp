// The audit trail and its writer. The trail (audit.jsonl, its numbering and hash chain) is
// appended to under one lock. The writer actor batches entries (one write(2) per batch, one
// fdatasync per batch in fsync mode) and answers each append only when its entries are as
// durable as `security.audit.durability` asks; under `write` durability the checkers append
// their own entries to the trail instead (no round trip to the writer). Either way a decision
// is released only after its entries are written, and a write failure answers with an error:
// checks fail closed.
#pragma once

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

/// The answer to an append: the last seq written (0 when everything was dropped by
/// auditIgnorePatterns or is not written yet under durability none), or why it failed.
struct audit_ack {
  std::uint64_t last_seq = 0;
  std::string error;  ///< non-empty: the entries were not written; the decisions must deny
};

/// What a checker sees of the writer: append entries; the reply comes once they are as
/// durable as configured.
using audit_sink_actor = caf::typed_actor<caf::replies_to<append_atom, std::vector<policy::audit_entry>>::with<audit_ack>>;

/// The writer's whole interface: the sink, plus its own batching tick.
using audit_writer_actor = audit_sink_actor::extend<
    /// self: write every pending entry in one batch.
    caf::reacts_to<flush_atom>>;

/// How the writer works.
struct audit_writer_config {
  std::string dhara_home;
  policy::audit_durability durability = policy::audit_durability::write;
  std::uint64_t max_bytes = 104857600;
  std::uint32_t keep = 5;
  std::vector<std::string> ignore_patterns;    ///< auditIgnorePatterns: drop matching allowed entries
  std::size_t max_pending_bytes = 64u << 20;   ///< backlog budget: beyond it appends fail closed
};

/// $DHARA_HOME/audit.jsonl, opened (or created) with its chain continued, shared by the writer
/// and the checkers. Thread-safe: every append takes the trail's lock, so lines from several
/// threads get consecutive numbers and one chain. A trail that cannot be opened tries again at
/// each append (auditing resumes when the disk or the folder is fixed).
class audit_trail {
 public:
  explicit audit_trail(audit_writer_config config);
  ~audit_trail();
  audit_trail(const audit_trail&) = delete;
  audit_trail& operator=(const audit_trail&) = delete;

  const audit_writer_config& config() const { return config_; }
  /// Whether checkers append themselves: under `write` durability a line is as durable as it
  /// will be once write(2) returned. Under `fsync` the writer batches the fdatasync (group
  /// commit); under `none` it answers at once and writes a moment later.
  bool direct() const { return config_.durability == policy::audit_durability::write; }
  /// Drops the entries auditIgnorePatterns matches, then writes the rest in one write(2). The
  /// error of the ack says why nothing was written (logged once per failure streak).
  audit_ack append(std::vector<policy::audit_entry>& entries);

 private:
  struct state;
  const audit_writer_config config_;
  std::unique_ptr<state> state_;
};

/// Spawns the writer of `trail`.
audit_writer_actor spawn_audit_writer(caf::actor_system& sys, std::shared_ptr<audit_trail> trail);
/// Spawns a writer with a trail of its own.
audit_writer_actor spawn_audit_writer(caf::actor_system& sys, audit_writer_config config);

}  // namespace dhara::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<dhara::policy::audit_entry>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::audit_ack)
