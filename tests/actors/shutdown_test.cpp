// A session that ends while checks are under way: whoever asked the checker or the audit
// writer gets an answer (a denial, or the outcome of the entries' last write), never silence.
// CAF 0.17 sends nothing for a response promise an ending actor drops, and a caller waiting
// forever keeps the actor system from ending: `dhara serve` hung after Ctrl-C this way.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/approval.hpp"
#include "actors/audit_writer.hpp"
#include "actors/checker.hpp"
#include "actors/scheduler.hpp"
#include "io/audit_log.hpp"
#include "support/extension_fixture.hpp"
#include "support/policy_fixture.hpp"

using namespace dhara;
using namespace std::chrono_literals;

namespace {

using held_atom = caf::atom_constant<caf::atom("held")>;

// Checks of web-tools (approved network:fetch for api.example.com) or of ext-5 (nothing
// recorded: pending, so an interactive snapshot asks the approver). ext-5 has no domain list:
// its URL names a public address, which no lookup must vet first.
actors::check_batch fetch(const std::string& extension, const std::string& call_id) {
  const char* url = extension == "web-tools" ? "https://api.example.com/v1" : "https://93.184.216.34/v1";
  return {extension, "fetch", call_id, "s-1",
          {policy::gate_check{policy::capability::network_fetch, policy::subject_kind::url, url, {}, "url"}}};
}

// An audit sink that keeps every append unanswered, as a writer stuck on a slow disk would,
// and tells `observer` each time it holds one.
actors::audit_sink_actor::behavior_type stalled_sink(actors::audit_sink_actor::pointer self, caf::actor observer) {
  auto held = std::make_shared<std::vector<caf::typed_response_promise<actors::audit_ack>>>();
  auto hold = [=] {
    auto rp = self->make_response_promise<actors::audit_ack>();
    held->push_back(rp);
    caf::anon_send(observer, held_atom::value);
    return rp;
  };
  // Answers a checker hands over with its lines are held the same way, never released.
  auto releases = std::make_shared<std::vector<actors::audit_release_ptr>>();
  return {[=](actors::append_atom, policy::audit_lines&) { return hold(); },
          [=](actors::append_atom, policy::audit_lines&, actors::audit_release_ptr& r) {
            releases->push_back(std::move(r));
            caf::anon_send(observer, held_atom::value);
          },
          [=](actors::append_atom, std::vector<policy::audit_entry>&) { return hold(); }};
}

// An approver that never answers, as a human who walked away would.
actors::hitl_actor::behavior_type silent_approver(actors::hitl_actor::pointer self, caf::actor observer) {
  auto held = std::make_shared<std::vector<caf::typed_response_promise<actors::hitl_answer>>>();
  return {[=](actors::question_atom, actors::hitl_question&) -> caf::typed_response_promise<actors::hitl_answer> {
    auto rp = self->make_response_promise<actors::hitl_answer>();
    held->push_back(rp);
    caf::anon_send(observer, held_atom::value);
    return rp;
  }};
}

// The answer to `h`, or a failed check naming the error (a request that was never answered
// times out after 10 s).
template <class Handle>
actors::check_outcome outcome_of(Handle& h, caf::actor_system& sys) {
  actors::check_outcome got;
  h.receive([&](actors::check_outcome& o) { got = std::move(o); },
            [&](caf::error& e) { FAIL("the check was not answered: " << sys.render(e)); });
  return got;
}

// A checker whose audit sink holds every append (stalled_sink), telling `self` of each.
struct stalled_rig {
  caf::actor_system_config cfg;
  caf::actor_system sys{(actors::use_dhara_scheduler(cfg, 2), cfg)};
  caf::scoped_actor self{sys};
  actors::audit_sink_actor sink = sys.spawn(stalled_sink, caf::actor_cast<caf::actor>(self));
  actors::checker_actor checker = actors::spawn_checker(sys, testing::policy_fixture{}.compile(), sink, {});
};

}  // namespace

TEST_CASE("a check waiting for its audit entries is denied when the checker ends", "[runtime][shutdown]") {
  stalled_rig rig;
  caf::actor_system& sys = rig.sys;
  caf::scoped_actor& self = rig.self;
  const auto& sink = rig.sink;
  const auto& checker = rig.checker;
  auto h = self->request(checker, 10s, actors::check_atom::value, fetch("web-tools", "c-1"));
  self->receive([](held_atom) {}, caf::after(10s) >> [] { FAIL("the checker never sent the entries to the writer"); });
  caf::anon_send_exit(checker, caf::exit_reason::user_shutdown);
  auto o = outcome_of(h, sys);
  CHECK_FALSE(o.allowed);  // allowed by the policy, but its entry was never confirmed: denied
  CHECK(o.capability == "network:fetch");
  CHECK(o.reason.find("shutting down") != std::string::npos);
  CHECK(o.decided_by == policy::decider::failure);
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
}

TEST_CASE("a ticketed check whose answer the writer holds is denied when the checker ends, or the writer",
          "[runtime][shutdown]") {
  // Sent with a ticket, the answer goes to the writer with its lines (the writer releases it):
  // whichever ends first while the writer holds them, the asker is told, once, and denied.
  const bool checker_ends = GENERATE(true, false);
  CAPTURE(checker_ends);
  stalled_rig rig;
  caf::scoped_actor& self = rig.self;
  const auto& sink = rig.sink;
  const auto& checker = rig.checker;
  actors::check_batch b = fetch("web-tools", "c-3");
  b.ticket = 7;
  self->send(checker, actors::check_atom::value, std::move(b));
  self->receive([](held_atom) {}, caf::after(10s) >> [] { FAIL("the checker never sent the entries to the writer"); });
  caf::anon_send_exit(checker_ends ? caf::actor_cast<caf::actor>(checker) : caf::actor_cast<caf::actor>(sink),
                      caf::exit_reason::user_shutdown);
  actors::check_outcome o;
  self->receive([&](actors::check_outcome& x) { o = std::move(x); },
                caf::after(10s) >> [] { FAIL("the ticketed check was not answered"); });
  CHECK(o.ticket == 7);
  CHECK_FALSE(o.allowed);  // allowed by the policy, but its entry was never confirmed: denied
  CHECK(o.capability == "network:fetch");
  CHECK(o.reason == (checker_ends ? "the checker stopped before the decision was audited (dhara is shutting down)"
                                  : "the audit writer is gone"));
  CHECK(o.decided_by == policy::decider::failure);
  // Once only: the other one ending later answers nothing more.
  caf::anon_send_exit(checker_ends ? caf::actor_cast<caf::actor>(sink) : caf::actor_cast<caf::actor>(checker),
                      caf::exit_reason::user_shutdown);
  bool again = false;
  self->receive([&](actors::check_outcome&) { again = true; }, [&](actors::check_outcomes&) { again = true; },
                caf::after(200ms) >> [] {});
  CHECK_FALSE(again);
}

TEST_CASE("a check waiting for a human is denied when the checker ends", "[runtime][shutdown]") {
  caf::actor_system_config cfg;
  actors::use_dhara_scheduler(cfg, 2);
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  testing::temp_home home;
  actors::audit_writer_config wc;
  wc.dhara_home = home.dhara_home().string();
  auto writer = actors::spawn_audit_writer(sys, wc);
  auto approver = sys.spawn(silent_approver, caf::actor_cast<caf::actor>(self));
  auto checker = actors::spawn_checker(sys, testing::policy_fixture{}.compile(/*interactive=*/true), writer, {});
  caf::anon_send(checker, actors::approver_atom::value, approver);
  auto h = self->request(checker, 10s, actors::check_atom::value, fetch("ext-5", "c-2"));
  self->receive([](held_atom) {}, caf::after(10s) >> [] { FAIL("the checker never asked the approver"); });
  caf::anon_send_exit(checker, caf::exit_reason::user_shutdown);
  auto o = outcome_of(h, sys);
  CHECK_FALSE(o.allowed);
  CHECK(o.capability == "network:fetch");
  CHECK(o.reason.find("shutting down") != std::string::npos);
  caf::anon_send_exit(approver, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
}

TEST_CASE("entries pending when the audit writer ends are written and their callers answered", "[runtime][shutdown]") {
  testing::temp_home home;
  std::vector<actors::audit_ack> acks;
  // fsync: batches may also be written and waiting for their sync on the syncer thread.
  const auto durability = GENERATE(policy::audit_durability::write, policy::audit_durability::fsync);
  CAPTURE(policy::to_string(durability));
  {
    caf::actor_system_config cfg;
    actors::use_dhara_scheduler(cfg, 2);
    caf::actor_system sys{cfg};
    caf::scoped_actor self{sys};
    actors::audit_writer_config wc;
    wc.dhara_home = home.dhara_home().string();
    wc.durability = durability;
    auto writer = actors::spawn_audit_writer(sys, wc);
    policy::audit_entry allowed;
    allowed.extension = "web-tools";
    allowed.capability = "network:fetch";
    allowed.action = policy::audit_action::allowed;
    allowed.details = {{"url", "https://api.example.com/v1"}};
    allowed.decided_by = policy::decider::rule;
    allowed.tool_call_id = "c-3";
    auto append = [&] {
      std::vector<policy::audit_entry> entries{allowed};
      return self->request(writer, 10s, actors::append_atom::value, std::move(entries));
    };
    std::vector<decltype(append())> handles;
    // Appends and the exit in one burst: the exit comes before the writer's own flush tick.
    for (int i = 0; i < 50; ++i) handles.push_back(append());
    caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
    for (auto& h : handles)
      h.receive([&](actors::audit_ack& a) { acks.push_back(a); },
                [&](caf::error& e) { FAIL("an append was not answered: " << sys.render(e)); });
  }
  REQUIRE(acks.size() == 50);
  std::uint64_t confirmed = 0;
  for (const auto& a : acks) {
    // Each caller learns the outcome: confirmed up to a seq, or the sentence why not.
    if (a.error.empty()) confirmed = std::max(confirmed, a.last_seq);
    else CHECK(a.error.find("audit") != std::string::npos);
  }
  // Whatever was confirmed is on disk, in one verified chain.
  auto report = io::verify_audit(home.dhara_home().string());
  REQUIRE(report);
  CHECK(report->ok);
  CHECK(report->last_seq >= confirmed);
  CHECK(confirmed > 0);
}
