// The audit writer actor (see audit_writer.hpp).
#include "actors/audit_writer.hpp"

#include <chrono>
#include <optional>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "io/audit_log.hpp"

namespace dhara::actors {
namespace {

audit_ack audit_failure(const std::string& why);

// A caller waiting for its entries to be written. It always gets an answer: a waiter dropped
// undelivered (the writer ends) is told the entries were not confirmed, so its decisions are
// denied rather than left waiting forever (CAF 0.17 answers nothing for a dropped promise).
// Move-only: a copy would answer twice.
struct waiter {
  caf::typed_response_promise<audit_ack> rp;

  explicit waiter(caf::typed_response_promise<audit_ack> p) : rp(std::move(p)) {}
  waiter(waiter&&) = default;
  waiter& operator=(waiter&&) = default;
  waiter(const waiter&) = delete;
  waiter& operator=(const waiter&) = delete;
  ~waiter() {
    if (rp.pending()) rp.deliver(audit_failure("the audit writer stopped before the entries were confirmed"));
  }
};

struct writer_state {
  audit_writer_config cfg;
  std::optional<io::audit_log> log;
  std::string open_error;                  // why the log is not open (then every append fails)
  std::vector<policy::audit_entry> pending;
  std::size_t pending_bytes = 0;
  std::vector<waiter> waiters;             // answered after the next flush
  bool flush_scheduled = false;
  bool failing = false;                    // reported once per failure streak
  static inline const char* name = "audit_writer";
  // Whatever is pending when the writer ends is still written: entries released under
  // durability none, and those whose callers wait (answered here with the outcome; a waiter
  // not answered here is told the entries were not confirmed, see waiter).
  ~writer_state() {
    if (pending.empty() && waiters.empty()) return;
    std::uint64_t last = 0;
    std::string why = write(pending, last);
    answer(waiters, last, why);
  }

  // Appends `batch` to the log: "" with `last` the last seq on disk, or why it was not written.
  std::string write(std::vector<policy::audit_entry>& batch, std::uint64_t& last) {
    if (batch.empty()) return {};
    if (!log) return open_error.empty() ? "the audit log is not open" : open_error;
    auto written = log->append(batch);
    if (!written) return written.err().message;
    last = *written;
    return {};
  }

  // Tells each waiter how its entries went: confirmed up to `last`, or refused for `why`.
  static void answer(std::vector<waiter>& ws, std::uint64_t last, const std::string& why) {
    for (auto& w : ws) w.rp.deliver(why.empty() ? audit_ack{last, {}} : audit_failure(why));
  }
};

using self_ptr = audit_writer_actor::stateful_pointer<writer_state>;

std::size_t rough_size(const policy::audit_entry& e) {
  std::size_t n = 200 + e.extension.size() + e.capability.size() + e.reason.size() + e.tool.size();
  for (const auto& [k, v] : e.details) n += k.size() + v.size() + 8;
  return n;
}

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

void flush(self_ptr self) {
  auto& st = self->state;
  st.flush_scheduled = false;
  if (st.pending.empty() && st.waiters.empty()) return;
  std::vector<policy::audit_entry> batch;
  batch.swap(st.pending);
  st.pending_bytes = 0;
  std::vector<waiter> waiters;
  waiters.swap(st.waiters);
  // The next batch is likely as large: room for it now, not a regrowth per doubling.
  st.pending.reserve(batch.size());
  st.waiters.reserve(waiters.size());
  std::uint64_t last = 0;
  const std::string why = try_open(self) ? st.write(batch, last) : st.open_error;
  if (!why.empty()) {
    // Fail closed: every decision waiting on this batch is refused. Report once per streak.
    if (!st.failing) spdlog::error("the audit log cannot be written ({}); every check is denied until it can", why);
    st.failing = true;
  } else {
    if (st.failing) spdlog::warn("the audit log is writable again; checks resume");
    st.failing = false;
  }
  writer_state::answer(waiters, last, why);
}

}  // namespace

audit_writer_actor spawn_audit_writer(caf::actor_system& sys, audit_writer_config config) {
  return sys.spawn([](self_ptr self, audit_writer_config cfg) -> audit_writer_actor::behavior_type {
    self->state.cfg = std::move(cfg);
    if (!try_open(self)) spdlog::error("audit: {}", self->state.open_error);
    return {
        [=](append_atom, std::vector<policy::audit_entry>& entries) -> caf::typed_response_promise<audit_ack> {
          auto& st = self->state;
          auto rp = self->make_response_promise<audit_ack>();
          if (st.pending_bytes > st.cfg.max_pending_bytes) {
            rp.deliver(audit_failure("more than " + std::to_string(st.cfg.max_pending_bytes) + " bytes are waiting"));
            return rp;
          }
          for (auto& e : entries) {
            if (policy::is_ignored(e, st.cfg.ignore_patterns)) continue;  // never a denial
            st.pending_bytes += rough_size(e);
            st.pending.push_back(std::move(e));
          }
          if (st.cfg.durability == policy::audit_durability::none) {
            rp.deliver(audit_ack{});  // released now; written by the next tick
            if (!st.flush_scheduled) {
              st.flush_scheduled = true;
              self->delayed_send(self, std::chrono::milliseconds(5), flush_atom::value);
            }
            return rp;
          }
          st.waiters.emplace_back(rp);
          if (!st.flush_scheduled) {
            // Queued behind every append already in the mailbox: they all join this batch.
            st.flush_scheduled = true;
            self->send(self, flush_atom::value);
          }
          return rp;
        },
        [=](flush_atom) { flush(self); },
    };
  }, std::move(config));
}

}  // namespace dhara::actors
