// The answers an actor waits for from the checker, the supervisors or the host API's workers,
// matched by ticket in a hash map. The asker sends the check and the execute with `send` and a
// ticket (actors/ticketed_promise.hpp), not `request`: CAF 0.17 searches an actor's pending
// `request(…).then(…)` continuations linearly on every answer, and one caller runs every call
// of a batch (`-j` up to 1024), of serve and of `dhara bench`; the host API asks for every
// extension at once.
//
// A message to an actor that is gone is dropped, not answered, so the table watches (monitors)
// every actor it waits on: when one goes down, each call waiting on it is told, with the reason.
// The caller's state holds one `call_replies replies;`, and its behavior passes it the answers
// (`check_outcome`, `check_outcomes`, `call_result`, `call_results`) and its down messages.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <caf/error.hpp>
#include <caf/fwd.hpp>

#include "actors/checker.hpp"
#include "actors/messages.hpp"

namespace dhara::actors {

class call_replies {
 public:
  /// What runs when the answer comes: with it, or with none and why it will not come.
  template <class T>
  using handler = std::function<void(T* answer, const caf::error& lost)>;

  /// Registers `k` for the answer `to` sends, watching `to` from now on; returns the ticket
  /// to send with the message. `to` must be a valid handle (nothing would ever answer), and an
  /// actor of the caller's own actor system: calls are matched to the actors they wait on by
  /// actor id, which is unique within one system (dhara runs one a process, and no remote
  /// actors).
  template <class Self, class Handle>
  std::uint64_t expect_check(Self* self, const Handle& to, handler<check_outcome> k) {
    return add(checks_, watch(self, to), std::move(k));
  }
  template <class Self, class Handle>
  std::uint64_t expect_result(Self* self, const Handle& to, handler<call_result> k) {
    return add(results_, watch(self, to), std::move(k));
  }

  /// An answer came: runs its handler (an unknown ticket is ignored).
  void answered(check_outcome& o);
  void answered(check_outcomes& os);  ///< several, released together: each as if alone
  void answered(call_result& r);
  void answered(call_results& rs);    ///< several, released together: each as if alone

  /// An actor went down: every call still waiting on it is told, with the reason.
  void down(const caf::down_msg& m);

  /// Answers still awaited.
  std::size_t waiting() const { return checks_.live.size() + results_.live.size(); }

  /// Nodes kept for reuse per table at most (a burst of calls leaves this many behind).
  static constexpr std::size_t max_spare_nodes = 256;

 private:
  // `from` is the id of the actor that will answer, not its address: an address is a weak
  // reference, and taking and dropping one for every call is two atomic operations on the
  // answering actor's control block, which that actor's own thread keeps changing (seen at ~3 %
  // of the CPU of checks through the actors: docs/performance.md). Ids are unique in an actor
  // system and never reused, and a down message names its actor's.
  template <class T>
  struct waiter {
    caf::actor_id from = 0;
    handler<T> k;
  };
  // The waiting calls by ticket, and the nodes of answered ones kept for the next calls: a
  // call in the steady state then allocates no node of its own.
  template <class T>
  struct table {
    using map = std::unordered_map<std::uint64_t, waiter<T>>;
    map live;
    std::vector<typename map::node_type> spare;
  };

  template <class Self, class Handle>
  caf::actor_id watch(Self* self, const Handle& to) {
    if (!to) return 0;  // as documented, nothing would ever answer (0: no actor has that id)
    const caf::actor_id id = to.id();
    if (watched_.insert(id).second) self->monitor(to);
    return id;
  }

  template <class T>
  std::uint64_t add(table<T>& t, caf::actor_id from, handler<T> k) {
    const std::uint64_t ticket = ++last_ticket_;  // 0 is "no ticket"
    if (t.spare.empty()) {
      t.live.emplace(ticket, waiter<T>{from, std::move(k)});
      return ticket;
    }
    auto node = std::move(t.spare.back());
    t.spare.pop_back();
    node.key() = ticket;
    node.mapped() = waiter<T>{from, std::move(k)};
    t.live.insert(std::move(node));
    return ticket;
  }

  std::uint64_t last_ticket_ = 0;
  table<check_outcome> checks_;
  table<call_result> results_;
  std::unordered_set<caf::actor_id> watched_;  // the actors monitored
};

}  // namespace dhara::actors
