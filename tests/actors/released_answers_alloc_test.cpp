// Answers the audit writer releases for the checker (audit_release) when memory runs out part
// way through sending them: each allocation of the release is made to fail in turn. Whoever
// asked gets its answer, is refused because the checker ended, or learns that the checker went
// down (and so fails the call closed); never silence, and never an answer twice. Its own
// binary, because it replaces the global operator new and delete
// (support/failing_allocations.hpp).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
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

using arrived_atom = caf::atom_constant<caf::atom("arrived")>;
using released_atom = caf::atom_constant<caf::atom("released")>;

// Said in a refusal of answers the checker held or had handed over when it ended (checker.cpp).
const std::string checker_stopped = "the checker stopped before the decision was audited (dhara is shutting down)";

// An audit sink that releases the answers a checker hands over with its lines at once, as the
// writer does once they are written, with its thread's allocation number `fail_at` of release
// number `failing` (0: the first) made to fail; it tells `observer` of each release. It holds
// the first append a moment after telling `observer` it arrived, so that a second one waits
// behind it. After a release that failed it releases nothing more, and holds what it gets:
// that is the checker's to refuse as it ends (the writer was slower than the checker's end).
// Appends without answers are acknowledged.
actors::audit_sink_actor::behavior_type failing_release_sink(actors::audit_sink_actor::pointer self,
                                                             caf::actor observer, int failing, long fail_at) {
  struct progress {
    bool first = true;
    int releases = 0;
    bool failed = false;
    std::vector<actors::audit_release_ptr> held;  // after the failure
  };
  auto at = std::make_shared<progress>();
  return {[](actors::append_atom, policy::audit_lines&) { return actors::audit_ack{}; },
          [=](actors::append_atom, policy::audit_lines&, actors::audit_release_ptr& r) {
            if (at->first) {
              at->first = false;
              caf::anon_send(observer, arrived_atom::value);
              std::this_thread::sleep_for(100ms);
            }
            if (at->failed) {
              at->held.push_back(std::move(r));
            } else if (r->claim()) {
              bool armed = at->releases++ == failing;
              if (armed) testing::fail_allocation_after(fail_at);
              r->answer("", self->context());
              at->failed = armed && testing::armed_allocation_failed();
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

// What a sweep saw: runs that ended the checker, answers it refused as it ended, and whether a
// run went through with nothing failing.
struct sweep_result {
  std::size_t failures = 0;
  std::size_t refused = 0;
  bool completed = false;
};

// Three checks from one asker: the first alone in an append, then two sent once it reached the
// writer, which wait behind it there (in one append, answered together, when the checker finds
// both in its mailbox). Release number `failing` has its allocation k made to fail, for
// k = 0, 1, ... until a run goes through.
sweep_result sweep(int failing) {
  constexpr std::uint64_t checks = 3;
  sweep_result seen;
  for (long k = 0; k < 100 && !seen.completed; ++k) {
    INFO("the allocation made to fail: " << k);
    caf::actor_system_config cfg;
    actors::use_dhara_scheduler(cfg, 2);
    caf::actor_system sys{cfg};
    caf::scoped_actor self{sys};
    auto sink = sys.spawn(failing_release_sink, caf::actor_cast<caf::actor>(self), failing, k);
    auto checker = actors::spawn_checker(sys, testing::policy_fixture{}.compile(), sink, {});
    self->monitor(checker);
    std::map<std::uint64_t, int> answered;  // ticket -> answers received
    std::size_t refused_now = 0;
    bool down = false;
    caf::exit_reason why = caf::exit_reason::normal;
    // Allowed, or refused because the checker ended with the answer still its own.
    auto take = [&](const actors::check_outcome& o) {
      INFO("ticket " << o.ticket << ": " << o.reason);
      if (!o.allowed) {
        CHECK(o.reason == checker_stopped);
        CHECK(o.decided_by == policy::decider::failure);
        ++refused_now;
      }
      ++answered[o.ticket];
    };
    auto on_outcome = [&](actors::check_outcome& o) { take(o); };
    auto on_outcomes = [&](actors::check_outcomes& os) {
      for (const auto& o : os.outcomes) take(o);
    };
    auto on_down = [&](caf::down_msg& m) {
      down = true;
      why = static_cast<caf::exit_reason>(m.reason.code());
    };
    self->send(checker, actors::check_atom::value, fetch(1));
    bool arrived = false;
    self->receive_while([&] { return !arrived; })([&](arrived_atom) { arrived = true; },
                                                  caf::after(20s) >> [&] { FAIL("the first append never arrived"); });
    for (std::uint64_t t = 2; t <= checks; ++t) self->send(checker, actors::check_atom::value, fetch(t));
    // Until every check is answered or the checker is down, then a moment more for anything late.
    while (answered.size() < checks && !down) {
      self->receive(on_outcome, on_outcomes, [&](released_atom) {}, on_down, caf::after(20s) >> [&] {
        FAIL("silence: " << answered.size() << " of " << checks << " answered, the checker not down");
      });
    }
    bool quiet = false;
    self->receive_while([&] { return !quiet; })(on_outcome, on_outcomes, [&](released_atom) {}, on_down,
                                                caf::after(100ms) >> [&] { quiet = true; });
    for (const auto& [ticket, n] : answered) {
      INFO("ticket " << ticket);
      CHECK(n == 1);  // never twice
    }
    if (down) {
      CHECK(why == caf::exit_reason::unhandled_exception);  // ended because an answer could not be sent
      ++seen.failures;
    } else {
      CHECK(refused_now == 0);  // a refusal only from a checker that ended
      CHECK(answered.size() == checks);
      seen.completed = true;
      caf::anon_send_exit(checker, caf::exit_reason::user_shutdown);
    }
    seen.refused += refused_now;
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  }
  CHECK(seen.completed);
  CHECK(seen.failures >= 1);  // the release allocates: a run where nothing failed checked nothing
  return seen;
}

}  // namespace

TEST_CASE("answers the writer releases when memory runs out reach their askers or end the checker",
          "[runtime][audit]") {
  // The second release (usually of two answers together) fails: the first was answered, and
  // the asker of the others learns the checker went down.
  sweep(1);
}

TEST_CASE("a release that fails ends the checker, which refuses the answers still waiting in the writer",
          "[runtime][audit]") {
  // The first release fails with the second append waiting behind it in the writer's mailbox:
  // the checker, ending, refuses those two answers itself.
  CHECK(sweep(0).refused >= 1);
}
