// The caller's table of awaited answers, with real actors on real threads: answers found by
// ticket in any order, and every call waiting on an actor that goes down told so.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "actors/checker.hpp"
#include "actors/scheduler.hpp"
#include "actors/call_replies.hpp"
#include "actors/ticketed_promise.hpp"

using namespace dhara;
using namespace std::chrono_literals;

namespace {

using go_atom = caf::atom_constant<caf::atom("go")>;
using release_atom = caf::atom_constant<caf::atom("release")>;
using together_atom = caf::atom_constant<caf::atom("together")>;

// A stand-in checker that holds every check and, told to release them, answers the held ones
// last first (allowed when the tool is `allowed_tool`), each with its ticket. (It takes an
// argument: CAF 0.17 spawning a function actor without one dereferences a null pointer, which
// UBSan reports.)
caf::behavior holding_checker(caf::event_based_actor* self, std::string allowed_tool) {
  struct held {
    caf::actor to;
    actors::check_batch batch;
  };
  auto all = std::make_shared<std::vector<held>>();
  return {
      [=](actors::check_atom, actors::check_batch& b) {
        all->push_back({caf::actor_cast<caf::actor>(self->current_sender()), std::move(b)});
      },
      [=](release_atom) {
        for (auto it = all->rbegin(); it != all->rend(); ++it) {
          actors::check_outcome o;
          o.allowed = it->batch.tool == allowed_tool;
          o.reason = "for " + it->batch.tool_call_id;
          o.ticket = it->batch.ticket;
          self->send(it->to, std::move(o));
        }
        all->clear();
      },
      // The same, in one message to each asker, as the real checker releases the answers of
      // one audit append (the held ones in the order they came).
      [=](together_atom) {
        std::vector<std::pair<caf::actor, actors::check_outcomes>> by_asker;
        for (auto& h : *all) {
          if (by_asker.empty() || by_asker.back().first != h.to) by_asker.emplace_back(h.to, actors::check_outcomes{});
          actors::check_outcome o;
          o.allowed = h.batch.tool == allowed_tool;
          o.reason = "for " + h.batch.tool_call_id;
          o.ticket = h.batch.ticket;
          by_asker.back().second.outcomes.push_back(std::move(o));
        }
        for (auto& [to, answers] : by_asker) self->send(to, std::move(answers));
        all->clear();
      },
  };
}

// Holds every check as a ticketed promise and, told to release them, answers them through one
// answers_together in the order they came, each with the reason "for <call id>"; a call id
// starting with "skip" is only counted (expect) and never answered.
caf::behavior together_answerer(caf::event_based_actor* self, std::string /*unused, see above*/) {
  struct held {
    actors::ticketed_promise<actors::check_outcome> rp;
    std::string id;
  };
  auto all = std::make_shared<std::vector<held>>();
  return {
      [=](actors::check_atom, actors::check_batch& b) {
        all->push_back({actors::ticketed_promise<actors::check_outcome>(self, b.ticket), b.tool_call_id});
        return all->back().rp.handle();
      },
      [=](release_atom) {
        actors::answers_together<actors::check_outcome, actors::check_outcomes> answers;
        for (const auto& h : *all) answers.expect(h.rp);
        for (auto& h : *all) {
          if (h.id.rfind("skip", 0) == 0) continue;
          actors::check_outcome o;
          o.allowed = true;
          o.reason = "for " + h.id;
          answers.add(h.rp, std::move(o));
        }
        all->clear();
      },
  };
}

struct caller_state {
  actors::call_replies replies;
};

// Sends one check per call id to `to` through its table, and tells `observer` how each ended:
// "<id> allowed|denied: <reason>" or "<id> lost", then "<id> waiting <n>" after the handler.
caf::behavior caller(caf::stateful_actor<caller_state>* self, caf::actor observer) {
  self->set_down_handler([self](caf::down_msg& m) { self->state.replies.down(m); });
  return {
      [=](go_atom, caf::actor to, std::vector<std::string>& ids) {
        for (const std::string& id : ids) {
          actors::check_batch b;
          b.tool_call_id = id;
          b.tool = id.rfind("ok", 0) == 0 ? "ok" : "no";
          b.ticket = self->state.replies.expect_check(
              self, to, [=](actors::check_outcome* o, const caf::error& lost) {
                std::string what = !o ? id + " lost: " + self->system().render(lost)
                                      : id + (o->allowed ? " allowed: " : " denied: ") + o->reason;
                self->send(observer, what);
              });
          self->send(to, actors::check_atom::value, std::move(b));
        }
        self->send(observer, std::string("sent, waiting ") + std::to_string(self->state.replies.waiting()));
      },
      [=](actors::check_outcome& o) { self->state.replies.answered(o); },
      [=](actors::check_outcomes& os) { self->state.replies.answered(os); },
  };
}

std::vector<std::string> receive_lines(caf::scoped_actor& self, std::size_t n) {
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < n; ++i)
    self->receive([&](std::string& s) { lines.push_back(std::move(s)); },
                  caf::after(10s) >> [&] { FAIL("only " << lines.size() << " of " << n << " answers came"); });
  return lines;
}

struct rig {
  caf::actor_system_config cfg;
  caf::actor_system sys{(actors::use_dhara_scheduler(cfg, 2), cfg)};
  caf::scoped_actor self{sys};
};

}  // namespace

TEST_CASE_METHOD(rig, "answers find their calls by ticket in any order", "[runtime][calls]") {
  auto checker = sys.spawn(holding_checker, std::string("ok"));
  auto c = sys.spawn(caller, caf::actor_cast<caf::actor>(self));
  self->send(c, go_atom::value, checker, std::vector<std::string>{"ok-1", "no-2", "ok-3"});
  CHECK(receive_lines(self, 1) == std::vector<std::string>{"sent, waiting 3"});
  self->send(checker, release_atom::value);
  // Released last first: each answer reached the handler of its own call.
  CHECK(receive_lines(self, 3) ==
        std::vector<std::string>{"ok-3 allowed: for ok-3", "no-2 denied: for no-2", "ok-1 allowed: for ok-1"});
  // An answer nobody waits for (its ticket was used) changes nothing.
  actors::check_outcome stale;
  stale.ticket = 1;
  self->send(c, stale);
  self->send(c, go_atom::value, checker, std::vector<std::string>{});
  CHECK(receive_lines(self, 1) == std::vector<std::string>{"sent, waiting 0"});
  for (auto a : {checker, caf::actor_cast<caf::actor>(c)}) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(rig, "answers that come together in one message each find their call", "[runtime][calls]") {
  auto checker = sys.spawn(holding_checker, std::string("ok"));
  auto c = sys.spawn(caller, caf::actor_cast<caf::actor>(self));
  self->send(c, go_atom::value, checker, std::vector<std::string>{"ok-1", "no-2", "ok-3"});
  CHECK(receive_lines(self, 1) == std::vector<std::string>{"sent, waiting 3"});
  self->send(checker, together_atom::value);
  CHECK(receive_lines(self, 3) ==
        std::vector<std::string>{"ok-1 allowed: for ok-1", "no-2 denied: for no-2", "ok-3 allowed: for ok-3"});
  // Handled, each call leaves the table: nothing is waited for any more.
  self->send(c, go_atom::value, checker, std::vector<std::string>{});
  CHECK(receive_lines(self, 1) == std::vector<std::string>{"sent, waiting 0"});
  for (auto a : {checker, caf::actor_cast<caf::actor>(c)}) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(rig, "every call waiting on an actor that goes down is told so", "[runtime][calls]") {
  auto checker = sys.spawn(holding_checker, std::string("ok"));
  auto other = sys.spawn(holding_checker, std::string("ok"));
  auto c = sys.spawn(caller, caf::actor_cast<caf::actor>(self));
  self->send(c, go_atom::value, checker, std::vector<std::string>{"ok-1", "ok-2"});
  self->send(c, go_atom::value, other, std::vector<std::string>{"ok-3"});
  CHECK(receive_lines(self, 2) == std::vector<std::string>{"sent, waiting 2", "sent, waiting 3"});
  // Held checks die with the checker, unanswered: both calls on it are told, with the reason.
  caf::anon_send_exit(checker, caf::exit_reason::kill);
  auto lost = receive_lines(self, 2);
  std::sort(lost.begin(), lost.end());
  const std::string why = sys.render(caf::make_error(caf::exit_reason::kill));
  CHECK(lost == std::vector<std::string>{"ok-1 lost: " + why, "ok-2 lost: " + why});
  // A call sent to it after it is gone is dropped by CAF: told as well, not left waiting.
  self->send(c, go_atom::value, checker, std::vector<std::string>{"ok-4"});
  auto after = receive_lines(self, 2);
  std::sort(after.begin(), after.end());
  CHECK(after == std::vector<std::string>{"ok-4 lost: " + why, "sent, waiting 2"});
  // The call on the other actor still gets its answer.
  self->send(other, release_atom::value);
  CHECK(receive_lines(self, 1) == std::vector<std::string>{"ok-3 allowed: for ok-3"});
  for (auto a : {other, caf::actor_cast<caf::actor>(c)}) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(rig, "a ticket answered twice does not reach the call that took its place", "[runtime][calls]") {
  // An answered call's place in the table is kept for the next call; the next call has its
  // own ticket, and a late or repeated answer to the old one still finds nobody.
  auto checker = sys.spawn(holding_checker, std::string("ok"));
  auto c = sys.spawn(caller, caf::actor_cast<caf::actor>(self));
  self->send(c, go_atom::value, checker, std::vector<std::string>{"ok-1"});
  CHECK(receive_lines(self, 1) == std::vector<std::string>{"sent, waiting 1"});
  self->send(checker, release_atom::value);
  CHECK(receive_lines(self, 1) == std::vector<std::string>{"ok-1 allowed: for ok-1"});
  self->send(c, go_atom::value, checker, std::vector<std::string>{"ok-2"});
  CHECK(receive_lines(self, 1) == std::vector<std::string>{"sent, waiting 1"});
  actors::check_outcome stale;
  stale.ticket = 1;
  stale.reason = "a second answer to ok-1";
  self->send(c, stale);
  self->send(c, go_atom::value, checker, std::vector<std::string>{});
  CHECK(receive_lines(self, 1) == std::vector<std::string>{"sent, waiting 1"});
  self->send(checker, release_atom::value);
  CHECK(receive_lines(self, 1) == std::vector<std::string>{"ok-2 allowed: for ok-2"});
  for (auto a : {checker, caf::actor_cast<caf::actor>(c)}) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(rig, "answers released together reach each asker in one message, alone as an outcome", "[runtime][calls]") {
  // Three askers' checks interleaved, and a request among them: the asker with one answer gets
  // it as a check_outcome, those with several one check_outcomes holding theirs in the order
  // they were added, the request its own answer; an asker whose only check is expected and not
  // answered gets nothing.
  auto answerer = sys.spawn(together_answerer, std::string());
  caf::scoped_actor one{sys}, two{sys}, three{sys}, skipped{sys};
  auto check = [](const std::string& id, std::uint64_t ticket) {
    actors::check_batch b;
    b.tool_call_id = id;
    b.ticket = ticket;
    return b;
  };
  two->send(answerer, actors::check_atom::value, check("two-a", 21));
  one->send(answerer, actors::check_atom::value, check("one-a", 11));
  three->send(answerer, actors::check_atom::value, check("three-a", 31));
  two->send(answerer, actors::check_atom::value, check("two-b", 22));
  auto asked = self->request(answerer, 10s, actors::check_atom::value, check("req", 0));
  skipped->send(answerer, actors::check_atom::value, check("skip-1", 41));
  three->send(answerer, actors::check_atom::value, check("three-b", 32));
  two->send(answerer, actors::check_atom::value, check("two-c", 23));
  // Every send above is made from this thread: each is in the answerer's mailbox before the
  // next, so the release comes after all of them.
  self->send(answerer, release_atom::value);
  auto lines_of = [](std::vector<actors::check_outcome>& os) {
    std::vector<std::string> out;
    for (auto& o : os) out.push_back(o.reason + " #" + std::to_string(o.ticket));
    return out;
  };
  // The answers of `asker`'s one message; `many`: they came as a check_outcomes.
  auto one_message = [&](caf::scoped_actor& asker, bool& many) {
    std::vector<actors::check_outcome> got;
    std::size_t messages = 0;
    asker->receive(
        [&](actors::check_outcome& o) {
          got.push_back(std::move(o));
          ++messages;
        },
        [&](actors::check_outcomes& os) {
          got = std::move(os.outcomes);
          many = true;
          ++messages;
        },
                   caf::after(10s) >> [] { FAIL("no answer came"); });
    asker->receive([&](actors::check_outcome&) { ++messages; }, [&](actors::check_outcomes&) { ++messages; },
                   caf::after(50ms) >> [] {});
    CHECK(messages == 1);
    return got;
  };
  bool many = false;
  std::vector<actors::check_outcome> got_one = one_message(one, many);
  CHECK(lines_of(got_one) == std::vector<std::string>{"for one-a #11"});
  CHECK_FALSE(many);
  many = false;
  std::vector<actors::check_outcome> got_two = one_message(two, many);
  CHECK(lines_of(got_two) == std::vector<std::string>{"for two-a #21", "for two-b #22", "for two-c #23"});
  CHECK(many);
  many = false;
  std::vector<actors::check_outcome> got_three = one_message(three, many);
  CHECK(lines_of(got_three) == std::vector<std::string>{"for three-a #31", "for three-b #32"});
  CHECK(many);
  bool answered = false;
  asked.receive([&](actors::check_outcome& o) { answered = o.reason == "for req"; },
                [&](caf::error& e) { FAIL("the request was not answered: " << sys.render(e)); });
  CHECK(answered);
  bool more = false;
  skipped->receive([&](actors::check_outcome&) { more = true; }, [&](actors::check_outcomes&) { more = true; },
                   caf::after(50ms) >> [] {});
  CHECK_FALSE(more);
  caf::anon_send_exit(answerer, caf::exit_reason::user_shutdown);
}
