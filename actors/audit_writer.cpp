// The audit writer actor (see audit_writer.hpp).
#include "actors/audit_writer.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <utility>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "io/audit_log.hpp"

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<dhara::io::audit_sync_handle>)

namespace dhara::actors {
namespace {

using audit_sync_atom = caf::atom_constant<caf::atom("auditsync")>;

/// fsync durability: makes the given files' lines durable on a thread of its own, so that the
/// writer serializes and hashes the next batch while the disk takes the last one (and no
/// scheduler worker blocks in fdatasync). Answers "" or why a sync failed.
using syncer_actor =
    caf::typed_actor<caf::replies_to<audit_sync_atom, std::vector<io::audit_sync_handle>>::with<std::string>>;

// The folder argument is unused: CAF 0.17 dereferences a null argument tuple when an actor is
// spawned from a function without arguments (UBSan reports it), so the syncer gets one.
syncer_actor::behavior_type syncer_behavior(syncer_actor::pointer, const std::string& /*audit folder*/) {
  return {
      [](audit_sync_atom, const std::vector<io::audit_sync_handle>& files) {
        std::string why;
        for (const auto& f : files) {
          if (std::string e = f.sync(); !e.empty() && why.empty()) why = std::move(e);
        }
        return why;
      },
  };
}

audit_ack audit_failure(const std::string& why);

// A caller waiting for its entries to be written: an append's promise, or the answers a
// checker handed over with its lines (audit_release). It always gets an answer: a waiter
// dropped undelivered (the writer ends) is told the entries were not confirmed, so its
// decisions are denied rather than left waiting forever (CAF 0.17 answers nothing for a
// dropped promise). Move-only: a copy would answer twice.
struct waiter {
  caf::typed_response_promise<audit_ack> rp;
  audit_release_ptr release;

  explicit waiter(caf::typed_response_promise<audit_ack> p) : rp(std::move(p)) {}
  explicit waiter(audit_release_ptr r) : release(std::move(r)) {}
  waiter(waiter&&) = default;
  waiter& operator=(waiter&&) = default;
  waiter(const waiter&) = delete;
  waiter& operator=(const waiter&) = delete;
  ~waiter() {
    if (rp.pending() || release)
      tell(0, "the audit writer stopped before the entries were confirmed", nullptr);
  }

  // How its entries went: confirmed up to `last`, or refused for `why`. `ctx`: the writer's
  // execution unit (null outside its run).
  void tell(std::uint64_t last, const std::string& why, caf::execution_unit* ctx) {
    if (release) {
      auto r = std::move(release);
      if (r->claim()) r->answer(why.empty() ? std::string() : audit_failure(why).error, ctx);
      return;
    }
    rp.deliver(why.empty() ? audit_ack{last, {}} : audit_failure(why));
  }
};

// A batch written in fsync durability whose sync has not yet succeeded: its callers wait.
struct unsynced_batch {
  std::vector<waiter> waiters;
  std::uint64_t last = 0;           // its last seq
  io::audit_checkpoint start;       // where the chain ended before it
  io::audit_sync_handle file;       // what to sync
};

struct writer_state {
  audit_writer_config cfg;
  std::optional<io::audit_log> log;
  std::string open_error;                  // why the log is not open (then every append fails)
  std::vector<policy::audit_lines> pending;  // appended batches, written together by the next flush
  std::size_t pending_bytes = 0;
  std::vector<waiter> waiters;             // answered after the next flush
  // The two vectors of an earlier flush, emptied with their room kept: the next batch goes
  // into them, so a flush in the steady state allocates neither.
  std::vector<policy::audit_lines> spare_pending;
  std::vector<waiter> spare_waiters;
  std::deque<unsynced_batch> unsynced;     // fsync durability, oldest first
  std::size_t syncing = 0;                 // the first `syncing` of them are being synced now
  syncer_actor syncer;                     // made at the first deferred sync
  bool flush_scheduled = false;
  bool failing = false;                    // reported once per failure streak
  // audit.lock kept between batches (lock_hold_ms, io::audit_log::keep_lock):
  std::chrono::steady_clock::time_point lease_start;     // when the kept lock was taken
  std::chrono::steady_clock::time_point no_lease_until;  // batches take it one by one until then
  static inline const char* name = "audit_writer";
  // Whatever is pending when the writer ends is still written: entries released under
  // durability none, and those whose callers wait (answered here with the outcome; a waiter
  // not answered here is told the entries were not confirmed, see waiter). Unsynced batches
  // are synced here, on this thread, and refused and cut away if that fails (refuse_unsynced).
  ~writer_state() {
    if (syncer) caf::anon_send_exit(syncer, caf::exit_reason::user_shutdown);
    std::string why;
    for (const auto& b : unsynced) {
      if (std::string e = b.file.sync(); why.empty()) why = std::move(e);
    }
    if (!why.empty()) refuse_unsynced(why, nullptr);
    for (auto& b : unsynced) answer(b.waiters, b.last, "", nullptr);
    if (pending.empty() && waiters.empty()) return;
    std::uint64_t last = 0;
    why = write(pending, last, io::audit_sync::now);
    answer(waiters, last, why, nullptr);
  }

  // Appends `batch` to the log: "" with `last` the last seq on disk, or why it was not written.
  std::string write(const std::vector<policy::audit_lines>& batch, std::uint64_t& last, io::audit_sync sync) {
    if (batch.empty()) return {};
    if (!log) return open_error.empty() ? "the audit log is not open" : open_error;
    auto written = log->append(batch, sync);
    if (!written) return written.err().message;
    last = *written;
    return {};
  }

  // A sync failed: the unsynced lines may be lost, and every batch after them chains on them.
  // All are refused and cut away, so the trail keeps no entry whose decision was refused.
  void refuse_unsynced(const std::string& why, caf::execution_unit* ctx) {
    if (log && !unsynced.empty()) {
      if (auto err = log->roll_back(unsynced.front().start)) spdlog::error("audit: {}", err->message);
    }
    for (auto& b : unsynced) answer(b.waiters, 0, why, ctx);
    unsynced.clear();
  }

  // Logs the start and the end of a failure streak, once each.
  void report(const std::string& why) {
    if (!why.empty()) {
      if (!failing) spdlog::error("the audit log cannot be written ({}); every check is denied until it can", why);
      failing = true;
    } else {
      if (failing) spdlog::warn("the audit log is writable again; checks resume");
      failing = false;
    }
  }

  // Tells each waiter how its entries went: confirmed up to `last`, or refused for `why`.
  static void answer(std::vector<waiter>& ws, std::uint64_t last, const std::string& why, caf::execution_unit* ctx) {
    for (auto& w : ws) w.tell(last, why, ctx);
  }
};

using self_ptr = audit_writer_actor::stateful_pointer<writer_state>;

void start_sync(self_ptr self);
void synced(self_ptr self, const std::string& why);

// A kept audit.lock is looked at this often (does another process wait for it?). After a
// lease ran its full length the writer takes the lock batch by batch for lease_pause; after
// another process wanted it, for contended_pause, so that sessions sharing one DHARA_HOME
// take turns batch by batch rather than lease by lease.
constexpr std::chrono::milliseconds lease_look{10};
constexpr std::chrono::milliseconds lease_pause{5};
constexpr std::chrono::seconds contended_pause{5};

audit_ack audit_failure(const std::string& why) { return {0, "the audit log cannot be written: " + why}; }

bool try_open(self_ptr self) {
  auto& st = self->state;
  if (st.log) return true;
  io::audit_log_options opts{st.cfg.durability, st.cfg.max_bytes, st.cfg.keep};
  auto opened = io::audit_log::open(st.cfg.dhara_home, opts);
  if (!opened) {
    st.open_error = opened.err().message;
    return false;
  }
  if (!opened->recovered().empty()) spdlog::warn("audit: {}", opened->recovered());
  st.log.emplace(std::move(*opened));
  st.open_error.clear();
  return true;
}

// A flushed batch's vectors go back to the state, emptied (every waiter in them answered or
// moved on), as the spares of the next flush; a burst's larger ones are let go.
constexpr std::size_t max_spare_room = 4096;

void keep_for_reuse(writer_state& st, std::vector<policy::audit_lines>& batch, std::vector<waiter>& waiters) {
  batch.clear();
  waiters.clear();
  if (batch.capacity() > st.spare_pending.capacity() && batch.capacity() <= max_spare_room) st.spare_pending.swap(batch);
  if (waiters.capacity() > st.spare_waiters.capacity() && waiters.capacity() <= max_spare_room)
    st.spare_waiters.swap(waiters);
}

void flush(self_ptr self) {
  auto& st = self->state;
  st.flush_scheduled = false;
  if (st.pending.empty() && st.waiters.empty()) return;
  std::vector<policy::audit_lines> batch;
  batch.swap(st.pending);
  st.pending_bytes = 0;
  std::vector<waiter> waiters;
  waiters.swap(st.waiters);
  // The next batch is likely as large: room for it now, not a regrowth per doubling (none in
  // the steady state: the spares have it).
  st.pending.swap(st.spare_pending);
  st.waiters.swap(st.spare_waiters);
  st.pending.reserve(batch.size());
  st.waiters.reserve(waiters.size());
  std::uint64_t last = 0;
  // fsync durability: the batch's sync runs on the syncer while the next batch is built.
  const auto sync = st.cfg.durability == policy::audit_durability::fsync ? io::audit_sync::deferred
                                                                          : io::audit_sync::now;
  std::string why;
  if (try_open(self)) {
    // Batches that follow each other keep audit.lock: three system calls fewer each.
    const auto now = std::chrono::steady_clock::now();
    const bool held = st.log->holds_lock();
    st.log->keep_lock(st.cfg.lock_hold_ms > 0 && now >= st.no_lease_until);
    why = st.write(batch, last, sync);
    if (st.log->waited_for_lock()) {  // another process writes too: no lease for a while
      st.log->release_lock();
      st.no_lease_until = now + contended_pause;
    } else if (!held && st.log->holds_lock()) {
      st.lease_start = now;
      self->delayed_send(self, std::min<std::chrono::milliseconds>(lease_look, std::chrono::milliseconds(st.cfg.lock_hold_ms)),
                         lease_atom::value);
    }
  } else {
    why = st.open_error;
  }
  if (why.empty() && !batch.empty() && st.log->sync_handle()) {
    st.unsynced.push_back({std::move(waiters), last, st.log->last_append_start(), st.log->sync_handle()});
    keep_for_reuse(st, batch, waiters);
    start_sync(self);
    return;
  }
  // Fail closed: every decision waiting on a batch that was not written is refused.
  st.report(why);
  writer_state::answer(waiters, last, why, self->context());
  keep_for_reuse(st, batch, waiters);
}

// A kept audit.lock goes back lock_hold_ms after it was taken, whether batches still come or
// not, or at the first look that finds another process waiting for it (one timer per look,
// not one per batch).
void look_at_lease(self_ptr self) {
  auto& st = self->state;
  if (!st.log || !st.log->holds_lock()) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - st.lease_start >= std::chrono::milliseconds(st.cfg.lock_hold_ms)) {
    st.log->release_lock();
    st.no_lease_until = now + lease_pause;
    return;
  }
  if (st.log->others_wait_for_lock()) {
    st.log->release_lock();
    st.no_lease_until = now + contended_pause;
    return;
  }
  self->delayed_send(self, lease_look, lease_atom::value);
}

// Syncs every batch written and not yet synced, unless a sync runs already (then those
// written meanwhile go together after it: group commit).
void start_sync(self_ptr self) {
  auto& st = self->state;
  if (st.syncing > 0 || st.unsynced.empty()) return;
  if (!st.syncer) st.syncer = self->spawn<caf::detached>(syncer_behavior, st.cfg.dhara_home);
  std::vector<io::audit_sync_handle> files;
  for (const auto& b : st.unsynced) {
    if (std::none_of(files.begin(), files.end(), [&](const auto& f) { return f.same_file(b.file); })) {
      files.push_back(b.file);
    }
  }
  st.syncing = st.unsynced.size();
  self->request(st.syncer, caf::infinite, audit_sync_atom::value, std::move(files))
      .then([=](std::string& why) { synced(self, why); },
            [=](caf::error& e) { synced(self, "the audit sync thread failed: " + self->system().render(e)); });
}

// The sync of the first `syncing` unsynced batches ended: "" (their callers are answered) or
// why it failed (then every unsynced batch is refused, see refuse_unsynced).
void synced(self_ptr self, const std::string& why) {
  auto& st = self->state;
  const std::size_t n = std::exchange(st.syncing, 0);
  if (why.empty()) {
    for (std::size_t i = 0; i < n && !st.unsynced.empty(); ++i) {
      writer_state::answer(st.unsynced.front().waiters, st.unsynced.front().last, "", self->context());
      st.unsynced.pop_front();
    }
    st.report("");
    start_sync(self);
    return;
  }
  st.report(why);
  st.refuse_unsynced(why, self->context());
}

// Takes serialized lines into the next batch; `w` is answered when they are as durable as
// configured (at once under durability none: written by the next tick).
void accept(self_ptr self, policy::audit_lines lines, waiter w) {
  auto& st = self->state;
  if (st.pending_bytes > st.cfg.max_pending_bytes) {
    w.tell(0, "more than " + std::to_string(st.cfg.max_pending_bytes) + " bytes are waiting", self->context());
    return;
  }
  if (!lines.empty()) {
    st.pending_bytes += lines.bytes() + lines.size() * (20 + policy::audit_hash_suffix_bytes);
    st.pending.push_back(std::move(lines));
  }
  if (st.cfg.durability == policy::audit_durability::none) {
    w.tell(0, "", self->context());  // released now; written by the next tick
    if (!st.flush_scheduled) {
      st.flush_scheduled = true;
      self->delayed_send(self, std::chrono::milliseconds(5), flush_atom::value);
    }
    return;
  }
  st.waiters.push_back(std::move(w));
  if (st.flush_scheduled) return;
  // Nothing else in the mailbox: written now. Otherwise the flush is queued behind every
  // append already there, and they all join this batch.
  if (self->mailbox().empty()) {
    flush(self);
    return;
  }
  st.flush_scheduled = true;
  self->send(self, flush_atom::value);
}

// An append answered with an audit_ack: its promise, handed to accept.
caf::typed_response_promise<audit_ack> accept_acked(self_ptr self, policy::audit_lines lines) {
  auto rp = self->make_response_promise<audit_ack>();
  accept(self, std::move(lines), waiter(rp));
  return rp;
}

}  // namespace

audit_writer_actor spawn_audit_writer(caf::actor_system& sys, audit_writer_config config) {
  return sys.spawn([](self_ptr self, audit_writer_config cfg) -> audit_writer_actor::behavior_type {
    self->state.cfg = std::move(cfg);
    if (!try_open(self)) spdlog::error("audit: {}", self->state.open_error);
    return {
        [=](append_atom, policy::audit_lines& lines) { return accept_acked(self, std::move(lines)); },
        [=](append_atom, policy::audit_lines& lines, audit_release_ptr& release) {
          accept(self, std::move(lines), waiter(std::move(release)));
        },
        [=](append_atom, std::vector<policy::audit_entry>& entries) {
          policy::audit_lines lines;
          for (const auto& e : entries) {
            if (!policy::is_ignored(e, self->state.cfg.ignore_patterns)) lines.add(e);  // never a denial
          }
          return accept_acked(self, std::move(lines));
        },
        [=](flush_atom) { flush(self); },
        [=](lease_atom) { look_at_lease(self); },
    };
  }, std::move(config));
}

}  // namespace dhara::actors
