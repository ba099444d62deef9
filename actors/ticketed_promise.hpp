// A reply that carries the caller's ticket back. A caller with many requests out sends them
// with `send` and a ticket, not `request`: the answer then comes back as an ordinary message,
// and the caller finds its continuation in a hash map by the ticket (actors/call_replies.hpp).
// CAF 0.17 keeps the continuations of `request(…).then(…)` in a vector it searches from the
// front on every answer: ~20 instructions a call per call in flight (docs/performance.md).
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/local_actor.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/message_id.hpp>
#include <caf/typed_response_promise.hpp>

namespace dhara::actors {

/// The answer to the message an actor handles now. A `request` is answered through CAF's
/// response promise, which CAF matches itself. A message sent with `send` and a ticket is answered
/// with an ordinary message to its sender, stamped with the ticket: one allocation for the
/// answer, where CAF's promise makes a message and then a mailbox element around it. Every
/// answer goes through here or through answers_together (below), which stamp the ticket, so
/// no path can forget it.
template <class T>
class ticketed_promise {
 public:
  ticketed_promise() = default;

  /// For the message `self` is handling (call it inside that message's handler).
  template <class Self>
  ticketed_promise(Self* self, std::uint64_t ticket) : ticket_(ticket) {
    if (ticket == 0 || self->current_message_id().is_request()) rp_ = self->template make_response_promise<T>();
    else {
      self_ = self->ctrl();
      // Taken from the message, as CAF's own response promise takes it: a copy would add a
      // reference to the asker's control block here and drop the message's later, two atomic
      // operations on a block the asker's own thread changes with every message it sends.
      // The handler reads current_sender() before it makes its promise, if at all.
      to_ = std::move(self->current_sender());
    }
  }

  void deliver(T&& answer) {
    answer.ticket = ticket_;
    if (!self_) {
      rp_.deliver(std::move(answer));
      return;
    }
    if (!to_) return;  // answered already, or sent anonymously (nobody to answer)
    auto* me = static_cast<caf::local_actor*>(caf::actor_cast<caf::abstract_actor*>(self_));
    auto to = std::move(to_);
    to->enqueue(caf::make_mailbox_element(self_, caf::make_message_id(), {}, std::move(answer)), me->context());
  }

  void deliver(const T& answer) { deliver(T(answer)); }

  /// Not answered yet (and someone waits for the answer).
  bool pending() const { return self_ ? static_cast<bool>(to_) : rp_.pending(); }

  /// Answered with an ordinary message, not through a request's CAF promise: answers_together
  /// may then send it from another actor's run (answers_together::context).
  bool ticketed() const { return static_cast<bool>(self_); }

  /// Never answered from here on, not even by a destructor that answers what is pending: for
  /// an answer that could not be sent, when the answering actor is ended instead (its askers
  /// watch it and fail the call).
  void forget() {
    to_.reset();
    rp_ = caf::typed_response_promise<T>{};
  }

  /// What the handler returns to CAF: for a request, its promise (CAF then answers nothing
  /// itself); for a ticketed message, an empty one (the same: nothing).
  caf::typed_response_promise<T> handle() const { return rp_; }

 private:
  template <class, class>
  friend class answers_together;

  caf::typed_response_promise<T> rp_;
  caf::strong_actor_ptr self_;  // the answering actor (the sender of the answer); none: rp_ answers
  caf::strong_actor_ptr to_;    // the asker; reset once answered
  std::uint64_t ticket_ = 0;
};

/// Answers released together (the checker's, once an append of audit lines is written; a
/// supervisor's, for the replies of one read): one message to each asker, not one per answer.
/// A ticketed answer is held with the others to the same asker and sent by send_all(), alone
/// as a `T`, several as a `Many` (a struct holding a `std::vector<T>`, which the asker's
/// behavior takes as it takes a `T`); a request's answer goes at once through CAF's promise.
/// Whatever is held when this ends is sent then.
template <class T, class Many>
class answers_together {
 public:
  answers_together() = default;
  /// `hint`: how many answers an asker's group makes room for when none were expect()ed.
  explicit answers_together(std::size_t hint) : hint_(hint) {}
  answers_together(const answers_together&) = delete;
  answers_together& operator=(const answers_together&) = delete;
  // Sends what is held. A failure to send (memory) propagates and ends the answering actor,
  // whose askers watch it: the calls not answered are told it went down, and fail closed. While
  // another exception unwinds (the actor ends with it), what is held is sent as far as it can
  // be, and the askers of the rest are told the same way.
  ~answers_together() noexcept(false) {
    if (std::uncaught_exceptions() > unwinding_) {
      try {
        send_all();
      } catch (...) {  // NOLINT(bugprone-empty-catch): the actor ends already, see above
      }
      return;
    }
    send_all();
  }

  /// Sends with `ctx`, the execution unit of the actor whose run sends them (null: from outside
  /// any actor's run), rather than the answering actor's own: for answers that another actor
  /// releases for it (the audit writer, an append's; actors/audit_writer.hpp). Only ticketed
  /// answers may be added then: a request's promise reads the answering actor's unit itself.
  void context(caf::execution_unit* ctx) {
    ctx_ = ctx;
    own_ctx_ = false;
  }

  /// Counts an answer `p` will get through add(), so that each asker's answers are moved once
  /// into room made for all of them (optional; a vector grown one answer at a time moved
  /// each answer about twice).
  void expect(const ticketed_promise<T>& p) {
    if (p.self_ && p.to_) ++group_of(p.to_.get()).expected;
  }

  /// `p` counts as answered from here on (its destructor answers nothing more).
  void add(ticketed_promise<T>& p, T&& answer) {
    if (!p.self_ && !own_ctx_) throw std::logic_error("a request's answer can only be sent by the actor that was asked");
    if (!p.self_ || !p.to_) return p.deliver(std::move(answer));  // a request; answered or anonymous
    answer.ticket = p.ticket_;
    if (!self_) self_ = p.self_;
    group& g = group_of(p.to_.get());
    if (!g.only && g.answers.empty()) {
      g.only.emplace(std::move(answer));  // an asker's only answer, often, sent as a `T`
    } else {
      if (g.answers.empty()) {
        g.answers.reserve(std::max<std::size_t>(2, g.expected > 0 ? g.expected : hint_));
        g.answers.push_back(std::move(*g.only));
        g.only.reset();
      }
      g.answers.push_back(std::move(answer));
    }
    // Held here now, sent by send_all. The group's first answer brings the asker's reference
    // with it (moved: no atomic operation on the asker's control block); the others drop theirs.
    if (!g.to) g.to = std::move(p.to_);
    else p.to_.reset();
  }

  /// Sends what is held: one message to each asker. A group is forgotten once it is sent, so
  /// nothing is sent twice should this be called again after a failure.
  void send_all() {
    if (!first_used_) return;
    if (!self_) {  // only expect()ed, nothing added: nothing to send
      more_.clear();
      first_ = group{};
      first_used_ = false;
      return;
    }
    caf::execution_unit* ctx = ctx_;
    if (own_ctx_) ctx = static_cast<caf::local_actor*>(caf::actor_cast<caf::abstract_actor*>(self_))->context();
    while (!more_.empty()) {
      group g = std::move(more_.back());
      more_.pop_back();
      send(g, ctx);
    }
    first_used_ = false;
    group g = std::move(first_);
    first_ = group{};
    send(g, ctx);
  }

 private:
  // An asker's answers. The first waits in `only` (no vector for an asker that gets one: at
  // one call in flight every asker does); a second moves it into `answers`.
  struct group {
    const caf::actor_control_block* asker = nullptr;  // whom the group answers
    caf::strong_actor_ptr to;  // a reference to it, from the first answer added
    std::optional<T> only;
    std::vector<T> answers;
    std::size_t expected = 0;
  };

  // Sends a group's answers in one message (none when it has none: expected, never added).
  void send(group& g, caf::execution_unit* ctx) {
    if (g.only)
      g.to->enqueue(caf::make_mailbox_element(self_, caf::make_message_id(), {}, std::move(*g.only)), ctx);
    else if (!g.answers.empty())
      g.to->enqueue(caf::make_mailbox_element(self_, caf::make_message_id(), {}, Many{std::move(g.answers)}), ctx);
  }

  // The group of `asker`, made when there is none. The pointer only names the asker: a
  // promise that holds a reference to it is alive while its group is looked up, so no other
  // actor's block can have taken its address.
  group& group_of(const caf::actor_control_block* asker) {
    // Answers to one asker usually come in a run: the last group first, then the others.
    for (auto it = more_.rbegin(); it != more_.rend(); ++it)
      if (it->asker == asker) return *it;
    if (first_used_ && first_.asker == asker) return first_;
    if (!first_used_) {
      first_used_ = true;
      first_.asker = asker;
      return first_;
    }
    return more_.emplace_back(group{asker, nullptr, std::nullopt, {}, 0});
  }

  caf::strong_actor_ptr self_;  // the answering actor
  // The groups, in the order made: the first here (no vector when one asker is answered),
  // the others in `more_`.
  group first_;
  bool first_used_ = false;
  std::vector<group> more_;
  caf::execution_unit* ctx_ = nullptr;  // see context()
  bool own_ctx_ = true;                 // the answering actor's unit, read when sending
  std::size_t hint_ = 0;
  int unwinding_ = std::uncaught_exceptions();  // exceptions in flight when this was made
};

}  // namespace dhara::actors
