// The audit writer actor (see audit_writer.hpp).
#include "actors/audit_writer.hpp"

#include <chrono>
#include <mutex>
#include <optional>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "io/audit_log.hpp"

namespace dhara::actors {

struct audit_trail::state {
  std::mutex mtx;
  std::optional<io::audit_log> log;
  std::string open_error;  // why the log is not open (then every append fails)
  bool failing = false;    // reported once per failure streak
};

namespace {

audit_ack audit_failure(const std::string& why) { return {0, "the audit log cannot be written: " + why}; }

bool try_open(const audit_writer_config& cfg, std::optional<io::audit_log>& log, std::string& open_error) {
  if (log) return true;
  io::audit_log_options opts{cfg.durability, cfg.max_bytes, cfg.keep};
  auto opened = io::audit_log::open(cfg.dhara_home, opts);
  if (!opened) {
    open_error = opened.err().message;
    return false;
  }
  if (!opened->recovered().empty()) spdlog::warn("audit: {}", opened->recovered());
  log.emplace(std::move(*opened));
  open_error.clear();
  return true;
}

}  // namespace

audit_trail::audit_trail(audit_writer_config config) : config_(std::move(config)), state_(std::make_unique<state>()) {
  if (!try_open(config_, state_->log, state_->open_error)) spdlog::error("audit: {}", state_->open_error);
}

audit_trail::~audit_trail() = default;

audit_ack audit_trail::append(std::vector<policy::audit_entry>& entries) {
  if (!config_.ignore_patterns.empty())
    std::erase_if(entries, [&](const policy::audit_entry& e) { return policy::is_ignored(e, config_.ignore_patterns); });
  std::lock_guard lock(state_->mtx);
  state& st = *state_;
  std::string why;
  std::uint64_t last = 0;
  if (!try_open(config_, st.log, st.open_error)) {
    why = st.open_error;
  } else if (!entries.empty()) {
    auto written = st.log->append(entries);
    if (written) last = *written;
    else why = written.err().message;
  }
  if (!why.empty()) {
    // Fail closed: every decision waiting on these entries is refused. Reported once per streak.
    if (!st.failing) spdlog::error("the audit log cannot be written ({}); every check is denied until it can", why);
    st.failing = true;
    return audit_failure(why);
  }
  if (st.failing) spdlog::warn("the audit log is writable again; checks resume");
  st.failing = false;
  return {last, {}};
}

namespace {

struct waiter {
  caf::typed_response_promise<audit_ack> rp;
};

struct writer_state {
  std::shared_ptr<audit_trail> trail;
  std::vector<policy::audit_entry> pending;
  std::size_t pending_bytes = 0;
  std::vector<waiter> waiters;             // answered after the next flush
  bool flush_scheduled = false;
  static inline const char* name = "audit_writer";
  // Entries released under durability none are still written when the writer ends.
  ~writer_state() {
    if (trail && !pending.empty()) (void)trail->append(pending);
  }
};

using self_ptr = audit_writer_actor::stateful_pointer<writer_state>;

std::size_t rough_size(const policy::audit_entry& e) {
  std::size_t n = 200 + e.extension.size() + e.capability.size() + e.reason.size() + e.tool.size();
  for (const auto& [k, v] : e.details) n += k.size() + v.size() + 8;
  return n;
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
  audit_ack ack = st.trail->append(batch);
  for (auto& w : waiters) w.rp.deliver(ack);
}

}  // namespace

audit_writer_actor spawn_audit_writer(caf::actor_system& sys, std::shared_ptr<audit_trail> trail) {
  return sys.spawn([](self_ptr self, std::shared_ptr<audit_trail> t) -> audit_writer_actor::behavior_type {
    self->state.trail = std::move(t);
    return {
        [=](append_atom, std::vector<policy::audit_entry>& entries) -> caf::typed_response_promise<audit_ack> {
          auto& st = self->state;
          const audit_writer_config& cfg = st.trail->config();
          auto rp = self->make_response_promise<audit_ack>();
          if (st.pending_bytes > cfg.max_pending_bytes) {
            rp.deliver(audit_failure("more than " + std::to_string(cfg.max_pending_bytes) + " bytes are waiting"));
            return rp;
          }
          for (auto& e : entries) {
            st.pending_bytes += rough_size(e);
            st.pending.push_back(std::move(e));
          }
          if (cfg.durability == policy::audit_durability::none) {
            rp.deliver(audit_ack{});  // released now; written by the next tick
            if (!st.flush_scheduled) {
              st.flush_scheduled = true;
              self->delayed_send(self, std::chrono::milliseconds(5), flush_atom::value);
            }
            return rp;
          }
          st.waiters.push_back({rp});
          if (!st.flush_scheduled) {
            // Queued behind every append already in the mailbox: they all join this batch.
            st.flush_scheduled = true;
            self->send(self, flush_atom::value);
          }
          return rp;
        },
        [=](flush_atom) { flush(self); },
    };
  }, std::move(trail));
}

audit_writer_actor spawn_audit_writer(caf::actor_system& sys, audit_writer_config config) {
  return spawn_audit_writer(sys, std::make_shared<audit_trail>(std::move(config)));
}

}  // namespace dhara::actors
