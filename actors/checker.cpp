// The capability checker actor (see checker.hpp).
#include "actors/checker.hpp"

#include <chrono>
#include <cstdlib>

#include <caf/all.hpp>

#include "io/files.hpp"
#include "io/path_resolver.hpp"

namespace dhara::actors {
namespace {

struct waiting_reply {
  caf::typed_response_promise<check_outcome> rp;
  check_outcome outcome;
};

struct checker_state {
  policy::snapshot_ptr snapshot;
  audit_sink_actor audit;
  std::vector<policy::audit_entry> entries;  // decided, not yet sent to the writer
  std::vector<waiting_reply> replies;        // released once those entries are durable
  bool flush_scheduled = false;
  io::real_path_resolver resolver;
  std::unique_ptr<io::path_executable_locator> locator;
  static inline const char* name = "checker";
};

std::string joined(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

}  // namespace

policy::audit_entry audit_entry_for(const check_batch& batch, const policy::gate_check& check,
                                    const policy::decision& d) {
  policy::audit_entry e;
  e.timestamp_ms = io::wall_clock_ms();
  e.extension = batch.extension;
  e.capability = std::string(policy::to_string(check.cap));
  e.action = d.allowed() ? policy::audit_action::allowed : policy::audit_action::denied;
  switch (check.kind) {
    case policy::subject_kind::none: break;
    case policy::subject_kind::path: e.details.push_back({"path", check.subject}); break;
    case policy::subject_kind::url: e.details.push_back({"url", check.subject}); break;
    case policy::subject_kind::command_string: e.details.push_back({"command", check.subject}); break;
    case policy::subject_kind::argv: e.details.push_back({"command", joined(check.argv)}); break;
  }
  e.reason = d.reason;
  e.decided_by = d.decided_by;
  e.tool = batch.tool;
  e.tool_call_id = batch.tool_call_id;
  e.session = batch.session;
  return e;
}

checker_actor spawn_checker(caf::actor_system& sys, policy::snapshot_ptr snapshot, audit_sink_actor audit) {
  return sys.spawn([](checker_actor::stateful_pointer<checker_state> self, policy::snapshot_ptr snap,
                      audit_sink_actor sink) -> checker_actor::behavior_type {
    auto& st = self->state;
    st.snapshot = std::move(snap);
    st.audit = std::move(sink);
    const char* path_env = std::getenv("PATH");
    st.locator = std::make_unique<io::path_executable_locator>(path_env ? path_env : "/usr/bin:/bin",
                                                               st.snapshot ? st.snapshot->cwd : "/");
    return {
        [=](check_atom, check_batch& batch) -> caf::typed_response_promise<check_outcome> {
          auto& s = self->state;
          auto rp = self->make_response_promise<check_outcome>();
          if (!s.snapshot) {
            rp.deliver(check_outcome{false, "", "no policy is loaded", policy::decider::failure, {}});
            return rp;
          }
          policy::check_environment env{&s.resolver, s.locator.get()};
          std::vector<policy::audit_entry> entries;
          entries.reserve(batch.checks.size());
          check_outcome outcome{true, "", "", policy::decider::rule, {}};
          for (const policy::gate_check& c : batch.checks) {
            policy::decision d = policy::decide(*s.snapshot, c.request(batch.extension), env);
            if (d.verdict == policy::verdict_kind::ask) {
              // SEAM: an interactive session asks the approval actor here (CLI issue). Until a
              // session can prompt, a pending capability is refused with the approve command.
              d = {policy::verdict_kind::deny,
                   std::string(policy::to_string(c.cap)) + " is not approved for '" + batch.extension + "'; run '" +
                       policy::approve_command(batch.extension, c.cap) + "'",
                   policy::decider::rule, {}};
            }
            entries.push_back(audit_entry_for(batch, c, d));
            if (d.allowed() && c.kind == policy::subject_kind::path) outcome.allowed_root = std::string(d.matched_rule);
            if (!d.allowed() && outcome.allowed)
              outcome = {false, std::string(policy::to_string(c.cap)), d.reason, d.decided_by, {}};
            if (!d.allowed()) break;  // the first denial decides; later checks are not run
          }
          // The decision is released only once its entries are as durable as configured; the
          // entries of all checks in the mailbox go to the writer together.
          s.entries.insert(s.entries.end(), std::make_move_iterator(entries.begin()), std::make_move_iterator(entries.end()));
          s.replies.push_back({rp, std::move(outcome)});
          if (!s.flush_scheduled) {
            s.flush_scheduled = true;
            self->send(self, flush_atom::value);
          }
          return rp;
        },
        [=](flush_atom) {
          auto& s = self->state;
          s.flush_scheduled = false;
          auto replies = std::make_shared<std::vector<waiting_reply>>(std::move(s.replies));
          s.replies.clear();
          std::vector<policy::audit_entry> batch;
          batch.swap(s.entries);
          self->request(s.audit, caf::infinite, append_atom::value, std::move(batch))
              .then(
                  [replies](audit_ack& ack) {
                    for (auto& w : *replies) {
                      if (ack.error.empty()) w.rp.deliver(w.outcome);
                      else w.rp.deliver(check_outcome{false, w.outcome.capability, ack.error, policy::decider::failure, {}});
                    }
                  },
                  [replies](caf::error&) {
                    for (auto& w : *replies)
                      w.rp.deliver(check_outcome{false, w.outcome.capability, "the audit writer is gone", policy::decider::failure, {}});
                  });
        },
        [=](snapshot_atom, policy::snapshot_ptr& next) { self->state.snapshot = std::move(next); },
    };
  }, std::move(snapshot), std::move(audit));
}

}  // namespace dhara::actors
