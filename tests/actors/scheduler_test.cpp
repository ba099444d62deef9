// dhara's scheduler (actors/scheduler.hpp) on real threads: every job runs, long chains of
// hand-offs complete, work that waits while a worker is busy reaches the other worker, and
// an idle worker looks for work only briefly before it sleeps.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <caf/all.hpp>

#include "actors/scheduler.hpp"

using namespace dhara;
using namespace std::chrono_literals;

namespace {

using ping_atom = caf::atom_constant<caf::atom("ping")>;
using go_atom = caf::atom_constant<caf::atom("go")>;

struct rig {
  caf::actor_system_config cfg;
  caf::actor_system sys{(actors::use_dhara_scheduler(cfg, 2), cfg)};
  caf::scoped_actor self{sys};
};

// Answers a ping with the next number. It takes an argument on purpose: CAF 0.17's spawn of
// a function with no arguments binds a null shared_ptr<tuple<>>, which UBSan reports.
caf::behavior counter(caf::event_based_actor*, int step) {
  return {[=](ping_atom, int n) { return n + step; }};
}

// Pings `peer` `rounds` times, each ping after the previous answer, then tells `done` how
// many answers came back.
caf::behavior pinger(caf::event_based_actor* self, caf::actor peer, int rounds, caf::actor done) {
  return {
      [=](go_atom) { self->send(peer, ping_atom::value, 0); },
      [=](int back) {  // the peer's answer to the last ping: how many it answered
        if (back < rounds) {
          self->send(peer, ping_atom::value, back);
        } else {
          self->send(done, back);
          self->quit();
        }
      },
  };
}

// Counts itself in and waits (at most 30 s) for a second one to arrive, then tells `report`
// whether it met it: two of these only both meet when two workers run them at once.
caf::behavior meet(caf::event_based_actor* self, std::shared_ptr<std::atomic<int>> arrived, caf::actor report) {
  return {[=](go_atom) {
    arrived->fetch_add(1);
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (arrived->load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(100us);
    self->send(report, arrived->load() >= 2);
  }};
}

// On `go`, hands `go` to both peers from a worker thread.
caf::behavior fan_out(caf::event_based_actor* self, caf::actor a, caf::actor b) {
  return {[=](go_atom) {
    self->send(a, go_atom::value);
    self->send(b, go_atom::value);
  }};
}

int count_met(caf::scoped_actor& self) {
  int met = 0;
  for (int i = 0; i < 2; ++i) self->receive([&](bool m) { met += m ? 1 : 0; }, caf::after(60s) >> [] {});
  return met;
}

}  // namespace

TEST_CASE("dhara's scheduler runs the configured number of workers", "[actors][scheduler]") {
  rig r;
  CHECK(r.sys.scheduler().num_workers() == 2);
}

TEST_CASE("a long chain of hand-offs between actors completes on dhara's scheduler", "[actors][scheduler]") {
  rig r;
  constexpr int rounds = 20000;
  auto peer = r.sys.spawn(counter, 1);
  auto ping = r.sys.spawn(pinger, peer, rounds, caf::actor_cast<caf::actor>(r.self));
  r.self->send(ping, go_atom::value);
  int got = -1;
  r.self->receive([&](int n) { got = n; }, caf::after(60s) >> [] {});
  CHECK(got == rounds);
  r.self->send_exit(peer, caf::exit_reason::user_shutdown);
}

TEST_CASE("jobs sent from outside the workers wake both workers", "[actors][scheduler]") {
  rig r;
  auto arrived = std::make_shared<std::atomic<int>>(0);
  auto report = caf::actor_cast<caf::actor>(r.self);
  r.self->send(r.sys.spawn(meet, arrived, report), go_atom::value);
  r.self->send(r.sys.spawn(meet, arrived, report), go_atom::value);
  CHECK(count_met(r.self) == 2);
}

TEST_CASE("two jobs a worker hands off while it is busy wake the other worker", "[actors][scheduler]") {
  rig r;
  auto arrived = std::make_shared<std::atomic<int>>(0);
  auto report = caf::actor_cast<caf::actor>(r.self);
  auto fan = r.sys.spawn(fan_out, r.sys.spawn(meet, arrived, report), r.sys.spawn(meet, arrived, report));
  // Both workers go idle first (nothing else runs), so only a wake-up can bring the second
  // one to the second job: `go` wakes one, which runs fan_out and then one of the peers.
  std::this_thread::sleep_for(100ms);
  r.self->send(fan, go_atom::value);
  CHECK(count_met(r.self) == 2);
}

namespace {

// Both workers asleep with no job queued. A worker notified of a job counts as sleeping until
// it wakes and takes it: right after a spawn, `sleeping == 2` alone may hold while a worker is
// about to run the new actor (and then look, and take a job a test meant for another thread).
bool both_asleep(const actors::worker_activity& w) { return w.sleeping == 2 && w.queued == 0; }

// Waits (at most 30 s) until `ok` holds for the workers' activity, looking again every
// `pause`; returns whether it did.
template <class Pred>
bool workers_become(caf::actor_system& sys, Pred ok, std::chrono::microseconds pause = 100us) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!ok(actors::activity_of_workers(sys))) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }
  return true;
}

// Where the hops of a relay ran: how many on the thread that started it, how many elsewhere.
struct hop_count {
  std::thread::id here;
  std::atomic<int> on_here{0};
  std::atomic<int> elsewhere{0};
};

// Passes a number to `next` until it reaches `last`, then tells `done`; counts where it ran.
caf::behavior relay(caf::event_based_actor* self, std::shared_ptr<hop_count> hops, int last, caf::actor done) {
  return {
      [=](caf::actor& next, int n) {
        (std::this_thread::get_id() == hops->here ? hops->on_here : hops->elsewhere).fetch_add(1);
        if (n == last) return self->send(done, n);
        self->send(next, caf::actor_cast<caf::actor>(self), n + 1);
      },
  };
}

bool never_busy(const void*) { return false; }
bool always_busy(const void*) { return true; }

// From a thread of its own (as the io thread), with the workers asleep, starts a relay of
// `hops` between two actors inside a run_here_scope; returns where the hops ran.
std::shared_ptr<hop_count> relay_from_outside(caf::actor_system& sys, caf::scoped_actor& self, int hops,
                                              bool (*busy)(const void*), bool on_dhara_scheduler = true) {
  auto count = std::make_shared<hop_count>();
  auto done = caf::actor_cast<caf::actor>(self);
  auto a = sys.spawn(relay, count, hops, done);
  auto b = sys.spawn(relay, count, hops, done);
  // The workers finish starting them and go to sleep (CAF's own scheduler says nothing of its
  // workers: a pause does there).
  if (on_dhara_scheduler)
    REQUIRE(workers_become(sys, both_asleep));
  else
    std::this_thread::sleep_for(100ms);
  std::thread io([&] {
    count->here = std::this_thread::get_id();
    actors::run_here_scope scope(sys, busy, nullptr);
    caf::anon_send(a, b, 1);
  });
  io.join();
  int last = -1;
  self->receive([&](int n) { last = n; }, caf::after(60s) >> [] {});
  CHECK(last == hops);
  return count;
}

}  // namespace

TEST_CASE("a thread in a run_here_scope runs the jobs it sends while both workers sleep", "[actors][scheduler]") {
  rig r;
  auto hops = relay_from_outside(r.sys, r.self, 6, never_busy);
  CHECK(hops->on_here.load() == 6);
  CHECK(hops->elsewhere.load() == 0);
}

TEST_CASE("a run_here_scope runs at most its budget and leaves the rest to a worker", "[actors][scheduler]") {
  rig r;
  const int total = 3 * static_cast<int>(actors::run_here_scope::budget);
  auto hops = relay_from_outside(r.sys, r.self, total, never_busy);
  CHECK(hops->on_here.load() >= 1);
  CHECK(hops->on_here.load() <= static_cast<int>(actors::run_here_scope::budget));
  CHECK(hops->on_here.load() + hops->elsewhere.load() == total);
}

TEST_CASE("a run_here_scope whose thread has other work wakes a worker instead", "[actors][scheduler]") {
  rig r;
  auto hops = relay_from_outside(r.sys, r.self, 6, always_busy);
  CHECK(hops->on_here.load() == 0);
  CHECK(hops->elsewhere.load() == 6);
}

TEST_CASE("a run_here_scope on CAF's own scheduler changes nothing", "[actors][scheduler]") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 2);
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  CHECK(relay_from_outside(sys, self, 6, never_busy, false)->on_here.load() == 0);
}

namespace {

// Counts where each message ran; tells `done` at the `last`-th.
caf::behavior tally(caf::event_based_actor* self, std::shared_ptr<hop_count> count, int last, caf::actor done) {
  return {[=](int) {
    auto& c = std::this_thread::get_id() == count->here ? count->on_here : count->elsewhere;
    c.fetch_add(1);
    if (count->on_here.load() + count->elsewhere.load() == last) self->send(done, last);
  }};
}

}  // namespace

TEST_CASE("a run_here_scope runs at most its budget of actor runs of a bounded number of messages each",
          "[actors][scheduler]") {
  rig r;
  constexpr auto most = actors::run_here_scope::budget * actors::run_here_scope::max_messages_per_run;
  const int total = static_cast<int>(most) + 1000;
  auto count = std::make_shared<hop_count>();
  auto sink = r.sys.spawn(tally, count, total, caf::actor_cast<caf::actor>(r.self));
  // The workers start it and go to sleep.
  REQUIRE(workers_become(r.sys, both_asleep));
  std::thread io([&] {
    count->here = std::this_thread::get_id();
    actors::run_here_scope scope(r.sys, never_busy, nullptr);
    for (int i = 0; i < total; ++i) caf::anon_send(sink, i);  // one job: the rest wait in its mailbox
  });
  io.join();
  int last = -1;
  r.self->receive([&](int n) { last = n; }, caf::after(60s) >> [] {});
  CHECK(last == total);
  CHECK(count->on_here.load() >= static_cast<int>(actors::run_here_scope::max_messages_per_run));
  CHECK(count->on_here.load() <= static_cast<int>(most));
  CHECK(count->on_here.load() + count->elsewhere.load() == total);
}

TEST_CASE("a worker with nothing to do looks for a job briefly, then sleeps", "[actors][scheduler]") {
  rig r;
  auto peer = r.sys.spawn(counter, 1);
  REQUIRE(workers_become(r.sys, both_asleep));
  const std::size_t looks_before = actors::activity_of_workers(r.sys).looks;
  for (int i = 0; i < 20; ++i) {
    int back = -1;
    r.self->request(peer, 60s, ping_atom::value, i).receive([&](int n) { back = n; }, [](caf::error&) {});
    CHECK(back == i + 1);
  }
  // After the last answer no job waits, so the worker that ran the peer looked for one before
  // it slept (after the earlier answers it may have found the next ping already waiting, when
  // the machine is busy and the ping came first); then both sleep, no worker is left looking
  // (a look is bounded), and nothing wakes them.
  CHECK(workers_become(r.sys, [](const actors::worker_activity& a) { return both_asleep(a) && a.looking == 0; }));
  CHECK(actors::activity_of_workers(r.sys).looks > looks_before);
}

TEST_CASE("a thread in a run_here_scope keeps the job it sends while a worker looks for one", "[actors][scheduler]") {
  rig r;
  for (int round = 0; round < 20; ++round) {
    auto count = std::make_shared<hop_count>();
    auto done = caf::actor_cast<caf::actor>(r.self);
    auto a = r.sys.spawn(relay, count, 6, done);
    auto b = r.sys.spawn(relay, count, 6, done);
    auto poke = r.sys.spawn(counter, 1);
    REQUIRE(workers_become(r.sys, both_asleep));
    // A job from outside wakes a worker; once it has run it, that worker looks for another,
    // then sleeps: idle either way, while the other worker sleeps.
    const std::size_t looks = actors::activity_of_workers(r.sys).looks;
    caf::anon_send(poke, ping_atom::value, 0);
    // (Asked without a pause, so that the send below mostly comes while that worker looks.)
    REQUIRE(workers_become(r.sys, [&](const actors::worker_activity& w) { return w.looks > looks; }, 0us));
    // So the scope's thread keeps the job it sends, to run it when the scope ends, rather than
    // wake a worker (counted as busy while it looks, the worker would have been woken instead,
    // in the rounds that catch it looking).
    const std::size_t held = actors::activity_of_workers(r.sys).held;
    std::thread io([&] {
      count->here = std::this_thread::get_id();
      actors::run_here_scope scope(r.sys, never_busy, nullptr);
      caf::anon_send(a, b, 1);
    });
    io.join();
    int last = -1;
    r.self->receive([&](int n) { last = n; }, caf::after(60s) >> [] {});
    REQUIRE(last == 6);
    CHECK(actors::activity_of_workers(r.sys).held == held + 1);
    // Every hop ran once. Where: the scope's thread ran them all unless a worker whose look
    // ended took one from the queue first (a busy machine), so that is not asserted.
    CHECK(count->on_here.load() + count->elsewhere.load() == 6);
  }
}
