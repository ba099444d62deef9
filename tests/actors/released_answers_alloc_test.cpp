// Answers the audit writer releases for the checker (audit_release) when memory runs out part
// way through sending them: each allocation of the release is made to fail in turn. Whoever
// asked gets its answer or learns that the checker went down (and so fails the call closed),
// never silence, and never an answer twice. Its own binary, because it replaces the global
// operator new and delete (support/failing_allocations.hpp).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/audit_writer.hpp"
#include "actors/checker.hpp"
#include "actors/scheduler.hpp"
#include "support/failing_allocations.hpp"
#include "support/policy_fixture.hpp"

using namespace dhara;
using namespace std::chrono_literals;

namespace {

using released_atom = caf::atom_constant<caf::atom("released")>;

// An audit sink that releases the answers a checker hands over with its lines at once, as the
// writer does once they are written, with its thread's allocation number `fail_at` of the
// release made to fail; then tells `observer`. Appends without answers are acknowledged.
actors::audit_sink_actor::behavior_type failing_release_sink(actors::audit_sink_actor::pointer self,
                                                             caf::actor observer, long fail_at) {
  return {[](actors::append_atom, policy::audit_lines&) { return actors::audit_ack{}; },
          [=](actors::append_atom, policy::audit_lines&, actors::audit_release_ptr& r) {
            if (r->claim()) {
              testing::fail_allocation_after(fail_at);
              r->answer("", self->context());
              testing::fail_allocation_after(-1);
            }
            caf::anon_send(observer, released_atom::value);
          },
          [](actors::append_atom, std::vector<policy::audit_entry>&) { return actors::audit_ack{}; }};
}

// A fetch by web-tools (allowed), sent with a ticket: its answer goes to the writer with its line.
actors::check_batch fetch(std::uint64_t ticket) {
  actors::check_batch b{"web-tools", "fetch", "call-" + std::to_string(ticket), "s-1",
                        {policy::gate_check{policy::capability::network_fetch, policy::subject_kind::url,
                                            "https://api.example.com/v1", {}, "url"}}};
  b.ticket = ticket;
  return b;
}

}  // namespace

TEST_CASE("answers the writer releases when memory runs out reach their askers or end the checker",
          "[runtime][audit]") {
  constexpr std::uint64_t checks = 3;  // from one asker, answered together when they share an append
  std::size_t failures = 0;
  bool completed = false;
  for (long k = 0; k < 100 && !completed; ++k) {
    INFO("the allocation made to fail: " << k);
    caf::actor_system_config cfg;
    actors::use_dhara_scheduler(cfg, 2);
    caf::actor_system sys{cfg};
    caf::scoped_actor self{sys};
    auto sink = sys.spawn(failing_release_sink, caf::actor_cast<caf::actor>(self), k);
    auto checker = actors::spawn_checker(sys, testing::policy_fixture{}.compile(), sink, {});
    self->monitor(checker);
    for (std::uint64_t t = 1; t <= checks; ++t) self->send(checker, actors::check_atom::value, fetch(t));
    std::map<std::uint64_t, int> answered;  // ticket -> answers received
    bool down = false;
    caf::exit_reason why = caf::exit_reason::normal;
    auto take = [&](const actors::check_outcome& o) {
      CHECK(o.allowed);
      ++answered[o.ticket];
    };
    // Until every check is answered or the checker is down, then a moment more for anything late.
    while (answered.size() < checks && !down) {
      self->receive([&](actors::check_outcome& o) { take(o); },
                    [&](actors::check_outcomes& os) {
                      for (const auto& o : os.outcomes) take(o);
                    },
                    [&](released_atom) {},
                    [&](caf::down_msg& m) {
                      down = true;
                      why = static_cast<caf::exit_reason>(m.reason.code());
                    },
                    caf::after(20s) >> [&] {
                      FAIL("silence: " << answered.size() << " of " << checks << " answered, the checker not down");
                    });
    }
    bool quiet = false;
    self->receive_while([&] { return !quiet; })(
        [&](actors::check_outcome& o) { take(o); },
        [&](actors::check_outcomes& os) {
          for (const auto& o : os.outcomes) take(o);
        },
        [&](released_atom) {}, [&](caf::down_msg&) { down = true; }, caf::after(100ms) >> [&] { quiet = true; });
    for (const auto& [ticket, n] : answered) {
      INFO("ticket " << ticket);
      CHECK(n == 1);  // never twice
    }
    if (down) {
      CHECK(why == caf::exit_reason::unhandled_exception);  // ended because an answer could not be sent
      ++failures;
    } else {
      CHECK(answered.size() == checks);
      completed = true;
      caf::anon_send_exit(checker, caf::exit_reason::user_shutdown);
    }
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  }
  CHECK(completed);
  CHECK(failures >= 1);  // the release allocates: a run where nothing failed checked nothing
}
