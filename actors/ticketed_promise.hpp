// A reply that carries the caller's ticket back. A caller with many requests out sends them
// with `send` and a ticket, not `request`: the answer then comes back as an ordinary message,
// and the caller finds its continuation in a hash map by the ticket (broker/call_replies.hpp).
// CAF 0.17 keeps the continuations of `request(…).then(…)` in a vector it searches from the
// front on every answer: ~20 instructions a call per call in flight (docs/performance.md).
#pragma once

#include <cstdint>
#include <utility>

#include <caf/typed_response_promise.hpp>

namespace dhara::actors {

/// A response promise that stamps its answer with the ticket of the message it answers
/// (0 for a `request`, whose answer CAF matches itself). Every answer goes through it, so no
/// path can forget the ticket.
template <class T>
struct ticketed_promise {
  caf::typed_response_promise<T> rp;
  std::uint64_t ticket = 0;

  void deliver(T answer) {
    answer.ticket = ticket;
    rp.deliver(std::move(answer));
  }
  /// Not answered yet (and someone waits for the answer).
  bool pending() const { return rp.pending(); }
};

}  // namespace dhara::actors
