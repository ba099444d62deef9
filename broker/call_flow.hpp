// One tool call from a resolved tool to its result, shared by the batch runner and serve:
// the gate (checker: decided and audited) → in approve mode the human's yes → the extension →
// in review mode the human's look at the result. Every human decision is audited (decidedBy
// user) and released only once its entry is written. Include only from .cpp files that
// already pull in caf/all.hpp: this is a template over the calling actor.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/approval.hpp"
#include "actors/call_replies.hpp"
#include "broker/extension_host.hpp"
#include "broker/hitl_mode.hpp"
#include "io/files.hpp"
#include "io/jsonrpc.hpp"
#include "policy/tool_gate.hpp"

namespace dhara::broker {

/// A call ready to run: the tool it resolved to and the call the extension gets.
struct call_spec {
  registered_tool tool;
  actors::tool_call call;
  /// Set by the caller (in its own actor's context) to cancel the call: a call still at the
  /// gate, at a question or waiting for its audit entry never reaches the extension; one
  /// already there is cancelled through its supervisor by the caller.
  std::shared_ptr<bool> cancelled = std::make_shared<bool>(false);
};

/// How a call ended.
struct call_outcome {
  actors::call_result result;
  bool rejected = false;  ///< the user said no (approve) or rejected the result (review)
  bool quit = false;      ///< the user answered q: the session ends with 130
};

/// The text approve mode shows after `[tool] `: the subject, plus `(N lines)` for an existing
/// regular file (a relative path is taken from `cwd`).
std::string shown_subject(const nlohmann::json& input, const std::string& cwd);

/// A result as review mode shows it: its text content, cut to `max_lines` lines of at most
/// `max_columns` characters, with a line saying how much was left out.
std::string shown_result(const actors::call_result& r, std::size_t max_lines, std::size_t max_columns);

/// The result a rejection returns to the caller: isError, with `text` as its content.
nlohmann::json rejection_result(const std::string& text);

/// The audit entry of a human decision about a call: decidedBy user, details {prompt:
/// "approve"|"review", subject}.
policy::audit_entry human_decision_entry(const call_spec& spec, std::string_view prompt, bool allowed,
                                         const std::string& reason);

namespace detail {

template <class Self, class Done>
void audit_then(Self* self, const extension_host& host, policy::audit_entry entry, Done next) {
  std::vector<policy::audit_entry> entries{std::move(entry)};
  self->request(host.audit(), caf::infinite, actors::append_atom::value, std::move(entries))
      .then([next](actors::audit_ack& ack) mutable { next(ack.error); },
            [self, next](caf::error& e) mutable { next("the audit writer is gone: " + self->system().render(e)); });
}

// The call was cancelled while its question was open (serve's tools/cancel): -32004, as any
// cancel is, and nothing audited as the human's answer, for nobody answered (a review: it was
// a rejection "decided by" the user).
inline call_outcome cancelled_while_asked() {
  return {actors::call_error(io::rpc_error::cancelled, "cancelled while its question was open"), false, false};
}

inline call_outcome denied_by_audit(const std::string& error) {
  return {actors::call_error(io::rpc_error::denied, "the decision could not be audited: " + error,
                             {{"capability", nullptr}, {"reason", error}}),
          false, false};
}

template <class Self, class Done>
void review(Self* self, const extension_host& host, std::shared_ptr<call_spec> spec, actors::hitl_actor approver,
            actors::call_result r, Done done) {
  if (!r.ok) return done(call_outcome{std::move(r), false, false});  // errors are not reviewed
  actors::hitl_question q;
  q.kind = actors::question_kind::result;
  q.extension = spec->tool.extension;
  q.tool = spec->tool.name;
  q.tool_call_id = spec->call.tool_call_id;
  q.subject = policy::approval_subject(spec->call.input).whole();
  q.status = r.result.is_object() && r.result.value("isError", false) ? "error" : "ok";
  q.shown = shown_result(r, 20, 160);
  q.result = r.result;
  auto result = std::make_shared<actors::call_result>(std::move(r));
  self->request(approver, caf::infinite, actors::question_atom::value, std::move(q))
      .then(
          [self, &host, spec, result, done](actors::hitl_answer& a) mutable {
            if (a.decision == actors::hitl_decision::lost && *spec->cancelled) return done(cancelled_while_asked());
            // Every answer is audited (a `y` and a `q` were not), and released once written.
            if (a.decision == actors::hitl_decision::allow || a.decision == actors::hitl_decision::always)
              return audit_then(self, host, human_decision_entry(*spec, "review", true, ""),
                                [result, done](const std::string& error) mutable {
                                  if (!error.empty()) return done(denied_by_audit(error));
                                  done(call_outcome{std::move(*result), false, false});
                                });
            if (a.decision == actors::hitl_decision::quit)
              return audit_then(self, host, human_decision_entry(*spec, "review", false, "the user quit"),
                                [result, done](const std::string&) mutable {
                                  done(call_outcome{std::move(*result), false, true});  // quits all the same
                                });
            std::string why = a.decision == actors::hitl_decision::deny ? "result rejected by reviewer"
                                                                       : "result rejected: " + a.failure;
            audit_then(self, host, human_decision_entry(*spec, "review", false, why), [why, done](const std::string& error) mutable {
              if (!error.empty()) return done(denied_by_audit(error));
              done(call_outcome{{true, rejection_result(why), 0, {}, nullptr}, true, false});
            });
          },
          [done](caf::error&) mutable {
            done(call_outcome{{true, rejection_result("result rejected: the review prompt was lost"), 0, {}, nullptr}, true,
                              false});
          });
}

template <class Self>
call_outcome supervisor_gone(Self* self, const caf::error& why) {
  return {actors::call_error(io::rpc_error::crashed, "the extension's supervisor is gone: " + self->system().render(why)),
          false, false};
}

template <class Self>
call_outcome checker_failed(Self* self, const caf::error& why) {
  return {actors::call_error(io::rpc_error::denied, "the capability checker failed: " + self->system().render(why)), false,
          false};
}

inline call_outcome cancelled_before_start() {
  return {actors::call_error(io::rpc_error::cancelled, "cancelled before it reached the extension"), false, false};
}

template <class Self, class Done>
void execute(Self* self, const extension_host& host, std::shared_ptr<call_spec> spec, hitl_mode mode,
             actors::hitl_actor approver, Done done) {
  if (*spec->cancelled) return done(cancelled_before_start());
  auto sup = host.supervisor(spec->tool.extension);
  if (!sup) return done(supervisor_gone(self, caf::make_error(caf::sec::invalid_argument)));
  // Review mode still shows the input after the call; otherwise it moves to the extension.
  actors::tool_call call = mode == hitl_mode::review ? spec->call : std::move(spec->call);
  call.ticket = self->state.replies.expect_result(
      self, sup, [self, &host, spec, mode, approver, done](actors::call_result* r, const caf::error& lost) mutable {
        if (!r) return done(supervisor_gone(self, lost));
        if (mode == hitl_mode::review) return review(self, host, spec, approver, std::move(*r), done);
        done(call_outcome{std::move(*r), false, false});
      });
  self->send(sup, actors::execute_atom::value, std::move(call));
}

template <class Self, class Done>
void ask_then_execute(Self* self, const extension_host& host, std::shared_ptr<call_spec> spec,
                      actors::hitl_actor approver, Done done) {
  if (*spec->cancelled) return done(cancelled_before_start());
  actors::hitl_question q;
  q.kind = actors::question_kind::tool;
  q.extension = spec->tool.extension;
  q.tool = spec->tool.name;
  q.tool_call_id = spec->call.tool_call_id;
  q.subject = shown_subject(spec->call.input, spec->call.cwd);
  self->request(approver, caf::infinite, actors::question_atom::value, std::move(q))
      .then(
          [self, &host, spec, approver, done](actors::hitl_answer& a) mutable {
            using actors::hitl_decision;
            if (a.decision == hitl_decision::lost && *spec->cancelled) return done(cancelled_while_asked());
            if (a.decision == hitl_decision::quit)
              return audit_then(self, host, human_decision_entry(*spec, "approve", false, "the user quit"),
                                [done](const std::string&) mutable {  // quits all the same
                                  done(call_outcome{actors::call_error(io::rpc_error::cancelled, "cancelled: the user quit"),
                                                    false, true});
                                });
            bool yes = a.decision == hitl_decision::allow || a.decision == hitl_decision::always;
            // A lost prompt is a no (fail closed), with the reason; a yes given without asking
            // (an earlier "always") says so.
            std::string why = yes ? a.failure : a.decision == hitl_decision::deny ? "rejected by user"
                                                                                 : "rejected: " + a.failure;
            audit_then(self, host, human_decision_entry(*spec, "approve", yes, why),
                       [self, &host, spec, approver, yes, why, done](const std::string& error) mutable {
                         if (!error.empty()) return done(denied_by_audit(error));
                         if (!yes) return done(call_outcome{{true, rejection_result(why), 0, {}, nullptr}, true, false});
                         execute(self, host, spec, hitl_mode::approve, approver, done);
                       });
          },
          [done](caf::error&) mutable {
            done(call_outcome{{true, rejection_result("rejected: the approval prompt was lost"), 0, {}, nullptr}, true, false});
          });
}

}  // namespace detail

/// Runs one call; `done(call_outcome)` is called exactly once, in `self`'s context. `host`
/// must outlive the call. `approver` answers approve and review questions (unused in auto).
/// Self's state holds a `call_replies replies` that its behavior feeds (call_replies.hpp).
template <class Self, class Done>
void run_tool_call(Self* self, const extension_host& host, call_spec spec, hitl_mode mode,
                   actors::hitl_actor approver, Done done) {
  auto shared = std::make_shared<call_spec>(std::move(spec));
  actors::check_batch gate{shared->tool.extension, shared->tool.name, shared->call.tool_call_id, shared->call.session_id,
                           policy::tool_call_checks(shared->tool.required, shared->call.input)};
  // A subject too large to be checked is malformed input, refused before any check (a review:
  // 5 100 denied calls with URLs of 70 KiB rotated the kept audit files away in 6 s).
  if (std::string why = policy::oversized_subject(gate.checks, policy::tool_call_limits); !why.empty())
    return done(call_outcome{actors::call_error(io::rpc_error::invalid_params, "the call is refused unchecked: " + why),
                             false, false});
  auto checker = host.checker(shared->tool.extension);
  if (!checker) return done(detail::checker_failed(self, caf::make_error(caf::sec::invalid_argument)));
  // Every call is checked and audited before anyone is asked or it reaches the extension.
  gate.ticket = self->state.replies.expect_check(
      self, checker,
      [self, &host, shared, mode, approver, done](actors::check_outcome* verdict, const caf::error& lost) mutable {
        if (!verdict) return done(detail::checker_failed(self, lost));
        if (!verdict->allowed)
          return done(call_outcome{actors::call_error(io::rpc_error::denied, verdict->reason,
                                                      {{"capability", verdict->capability}, {"reason", verdict->reason}}),
                                   false, false});
        if (mode == hitl_mode::approve) return detail::ask_then_execute(self, host, shared, approver, done);
        detail::execute(self, host, shared, mode, approver, done);
      });
  self->send(checker, actors::check_atom::value, std::move(gate));
}

}  // namespace dhara::broker
