// The checker with a real audit writer: every decided check is audited in a line the checker
// serialized itself, except allowed checks that auditIgnorePatterns drop — never a denial.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/approval.hpp"
#include "actors/audit_writer.hpp"
#include "actors/checker.hpp"
#include "actors/scheduler.hpp"
#include "io/audit_log.hpp"
#include "io/name_lookup.hpp"
#include "io/path_resolver.hpp"
#include "support/extension_fixture.hpp"
#include "support/loopback_names.hpp"
#include "support/policy_fixture.hpp"

using namespace dhara;
using namespace std::chrono_literals;

namespace {

// A fetch by web-tools, which may fetch from api.example.com only.
actors::check_batch fetch(const std::string& url, const std::string& call_id) {
  return {"web-tools", "fetch", call_id, "s-1",
          {policy::gate_check{policy::capability::network_fetch, policy::subject_kind::url, url, {}, "url"}}};
}

using held_atom = caf::atom_constant<caf::atom("held")>;
using release_atom = caf::atom_constant<caf::atom("release")>;

// An approver that holds every question, tells `observer` it holds one, and answers allow to
// all it holds when told to release them.
caf::behavior releasable_approver(caf::event_based_actor* self, caf::actor observer) {
  auto held = std::make_shared<std::vector<caf::response_promise>>();
  return {
      [=](actors::question_atom, actors::hitl_question&) {
        auto rp = self->make_response_promise();
        held->push_back(rp);
        self->send(observer, held_atom::value);
        return rp;
      },
      [=](release_atom) {
        for (auto& rp : *held) rp.deliver(actors::hitl_answer{actors::hitl_decision::allow, {}});
        held->clear();
      },
  };
}

// An actor system with an audit writer on `home`'s trail (durability write).
struct writer_rig {
  caf::actor_system_config cfg;
  caf::actor_system sys{(actors::use_dhara_scheduler(cfg, 2), cfg)};
  caf::scoped_actor self{sys};
  actors::audit_writer_actor writer;

  explicit writer_rig(const testing::temp_home& home,
                      policy::audit_durability durability = policy::audit_durability::write) {
    actors::audit_writer_config wc;
    wc.dhara_home = home.dhara_home().string();
    wc.durability = durability;
    writer = actors::spawn_audit_writer(sys, wc);
  }

  // Ends `checker` and the writer, and waits until both are gone (the trail is then complete).
  void stop(const actors::checker_actor& checker) {
    caf::anon_send_exit(checker, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
    self->wait_for(checker, writer);
  }
};

// Receives the answers to `n` checks sent with tickets, alone or several in one message (the
// checker releases the answers of one append together), and passes each to `take`; returns how
// many messages brought them.
template <class F>
std::size_t receive_answers(caf::scoped_actor& self, std::size_t n, F take) {
  std::size_t got = 0;
  std::size_t messages = 0;
  while (got < n) {
    self->receive(
        [&](actors::check_outcome& o) {
          ++messages;
          ++got;
          take(o);
        },
        [&](actors::check_outcomes& os) {
          ++messages;
          got += os.outcomes.size();
          for (auto& o : os.outcomes) take(o);
        },
        caf::after(20s) >> [&] { FAIL("only " << got << " of " << n << " checks were answered"); });
  }
  return messages;
}

std::vector<std::string> trail_call_ids(const testing::temp_home& home) {
  std::vector<std::string> ids;
  std::ifstream in(home.dhara_home() / "audit.jsonl");
  for (std::string line; std::getline(in, line);) ids.push_back(nlohmann::json::parse(line)["toolCallId"]);
  return ids;
}

}  // namespace

TEST_CASE("a batch waiting for a human keeps the lines it wrote until it is answered", "[runtime][audit]") {
  testing::temp_home home;
  writer_rig rig(home);
  caf::actor_system& sys = rig.sys;
  caf::scoped_actor& self = rig.self;
  const actors::audit_writer_actor& writer = rig.writer;
  // ext-5 may read (approved), but its network:fetch is pending: an interactive session asks.
  testing::policy_fixture fixture;
  fixture.perms[5].capabilities = {{"filesystem:read", policy::permission_state::approved}};
  auto checker = actors::spawn_checker(sys, fixture.compile(/*interactive=*/true), writer, {});
  auto approver = sys.spawn(releasable_approver, caf::actor_cast<caf::actor>(self));
  caf::anon_send(checker, actors::approver_atom::value, caf::actor_cast<actors::hitl_actor>(approver));

  // A: a read decided at once, then a fetch that waits for the human (ext-5 has no domain list:
  // the URL names a public address, which no lookup must vet first).
  actors::check_batch a{"ext-5", "sync", "call-a", "s-1",
                        {policy::gate_check{policy::capability::filesystem_read, policy::subject_kind::path,
                                            "/home/u/proj/src/app.ts", {}, "path"},
                         policy::gate_check{policy::capability::network_fetch, policy::subject_kind::url,
                                            "https://93.184.216.34/v1", {}, "url"}}};
  auto waiting = self->request(checker, 10s, actors::check_atom::value, std::move(a));
  self->receive([](held_atom) {}, caf::after(10s) >> [] { FAIL("the checker never asked the approver"); });
  // B, decided and answered meanwhile: its append is written, and A's read must not be in it.
  self->request(checker, 10s, actors::check_atom::value, fetch("https://api.example.com/v2", "call-b"))
      .receive([](actors::check_outcome& o) { CHECK(o.allowed); },
               [&](caf::error& e) { FAIL("the check was not answered: " << sys.render(e)); });
  CHECK(trail_call_ids(home) == std::vector<std::string>{"call-b"});

  self->send(approver, release_atom::value);
  waiting.receive([](actors::check_outcome& o) { CHECK(o.allowed); },
                  [&](caf::error& e) { FAIL("the held check was not answered: " << sys.render(e)); });
  // A's two lines went out together, with the answer that waited for them.
  CHECK(trail_call_ids(home) == std::vector<std::string>{"call-b", "call-a", "call-a"});
  for (auto actor : {caf::actor_cast<caf::actor>(checker), approver, caf::actor_cast<caf::actor>(writer)})
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
}

TEST_CASE("allowed checks matching auditIgnorePatterns are not audited, denials always are", "[runtime][audit]") {
  testing::temp_home home;
  struct row {
    std::string url;
    bool allowed;
    bool audited;
  };
  const std::vector<row> rows = {
      {"https://api.example.com/skip/a", true, false},  // allowed, matches the whole-URL pattern
      {"https://api.example.com/keep", true, true},     // allowed, matches nothing
      {"https://api.example.com/quiet/b", true, true},  // allowed: its path alone drops nothing (a review)
      {"https://evil.test/quiet/b", false, true},       // denied: written although its path matches
  };
  {
    writer_rig rig(home);
    caf::actor_system& sys = rig.sys;
  caf::scoped_actor& self = rig.self;
  const actors::audit_writer_actor& writer = rig.writer;
    auto checker = actors::spawn_checker(sys, testing::policy_fixture{}.compile(), writer,
                                         {"https://api.example.com/skip/**", "/quiet/**"});
    for (std::size_t i = 0; i < rows.size(); ++i) {
      INFO(rows[i].url);
      self->request(checker, 10s, actors::check_atom::value, fetch(rows[i].url, "c-" + std::to_string(i)))
          .receive([&](actors::check_outcome& o) { CHECK(o.allowed == rows[i].allowed); },
                   [&](caf::error& e) { FAIL("the check was not answered: " << sys.render(e)); });
    }
    rig.stop(checker);
  }
  auto v = io::verify_audit(home.dhara_home().string());
  REQUIRE(v);
  CHECK(v->ok);
  std::vector<std::string> audited;
  std::ifstream in(home.dhara_home() / "audit.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    CHECK(j["extension"] == "web-tools");
    CHECK(j["tool"] == "fetch");
    CHECK(j["session"] == "s-1");
    CHECK(j["action"] == (j["details"]["url"] == "https://evil.test/quiet/b" ? "denied" : "allowed"));
    audited.push_back(j["details"]["url"]);
  }
  std::vector<std::string> expected;
  for (const row& r : rows)
    if (r.audited) expected.push_back(r.url);
  CHECK(audited == expected);
  CHECK(v->lines == expected.size());
}

TEST_CASE("a check sent with a ticket is answered with it even when its audit fails", "[runtime][audit]") {
  testing::temp_home home;
  writer_rig rig(home);
  caf::scoped_actor& self = rig.self;
  auto checker = actors::spawn_checker(rig.sys, testing::policy_fixture{}.compile(), rig.writer, {});
  auto send = [&](const std::string& url, std::uint64_t ticket) {
    actors::check_batch b = fetch(url, "c-" + std::to_string(ticket));
    b.ticket = ticket;
    self->send(checker, actors::check_atom::value, std::move(b));  // the answer comes as an ordinary message
    actors::check_outcome o;
    self->receive([&](actors::check_outcome& x) { o = std::move(x); }, caf::after(10s) >> [] { FAIL("no answer"); });
    return o;
  };
  auto allowed = send("https://api.example.com/v1", 41);
  CHECK(allowed.allowed);
  CHECK(allowed.ticket == 41);
  auto denied = send("https://evil.test/", 42);
  CHECK_FALSE(denied.allowed);
  CHECK(denied.ticket == 42);
  // With the writer gone, the decision cannot be audited: a denial, still with its ticket.
  caf::anon_send_exit(rig.writer, caf::exit_reason::user_shutdown);
  self->wait_for(rig.writer);
  auto unaudited = send("https://api.example.com/v2", 43);
  CHECK_FALSE(unaudited.allowed);
  CHECK(unaudited.decided_by == policy::decider::failure);
  CHECK(unaudited.ticket == 43);
  // A request that carries a ticket is still answered as a request, with its ticket.
  actors::check_batch b = fetch("https://api.example.com/v3", "c-44");
  b.ticket = 44;
  bool answered = false;
  self->request(checker, 10s, actors::check_atom::value, std::move(b))
      .receive(
          [&](actors::check_outcome& o) {
            answered = true;
            CHECK(o.ticket == 44);
            CHECK(o.decided_by == policy::decider::failure);
          },
          [&](caf::error& e) { FAIL("the request was not answered: " << rig.sys.render(e)); });
  CHECK(answered);
  caf::anon_send_exit(checker, caf::exit_reason::user_shutdown);
}

TEST_CASE("a URL whose host is not listed is decided by what the name resolves to", "[runtime][audit][url]") {
  testing::temp_home home;
  writer_rig rig(home);
  caf::scoped_actor& self = rig.self;
  // ext-3 has network:fetch approved and no domain list (any public host); ext-5's is pending,
  // and the session can ask.
  testing::policy_fixture fixture;
  auto checker = actors::spawn_checker(rig.sys, fixture.compile(/*interactive=*/true), rig.writer, {});
  auto approver = rig.sys.spawn(releasable_approver, caf::actor_cast<caf::actor>(self));
  caf::anon_send(checker, actors::approver_atom::value, caf::actor_cast<actors::hitl_actor>(approver));
  // A failed assertion ends the test with the checker waiting on the approver: both are ended
  // then, or the actor system would wait for them forever.
  struct end_actors {
    std::vector<caf::actor> actors;
    ~end_actors() {
      for (auto& a : actors) caf::anon_send_exit(a, caf::exit_reason::kill);
    }
  } ender{{caf::actor_cast<caf::actor>(checker), approver, caf::actor_cast<caf::actor>(rig.writer)}};

  struct row {
    std::string extension, url, reason_has;
  };
  std::vector<row> rows = {
      {"ext-3", "http://nonexistent.invalid/a", "could not be resolved"},  // .invalid never resolves (RFC 6761)
      // Pending: refused by the lookup without a question (the approver would hold it, and the
      // check would never be answered).
      {"ext-5", "http://nonexistent.invalid/b", "could not be resolved"},
  };
  const std::vector<std::string> loopback = testing::loopback_names();
  if (loopback.empty()) WARN("no plain name in /etc/hosts resolves to loopback here; that row is not run");
  for (const std::string& n : loopback) rows.push_back({"ext-3", "http://" + n + ":8080/", "resolves to 127."});

  // Each sent four times at once: one lookup a name, every check answered alike and audited.
  constexpr std::uint64_t copies = 4;
  for (std::uint64_t t = 0; t < rows.size() * copies; ++t) {
    const row& r = rows[t / copies];
    actors::check_batch b{r.extension, "fetch", "c-" + std::to_string(t), "s-1",
                          {policy::gate_check{policy::capability::network_fetch, policy::subject_kind::url, r.url, {}, "url"}}};
    b.ticket = t;
    self->send(checker, actors::check_atom::value, std::move(b));
  }
  receive_answers(self, rows.size() * copies, [&](actors::check_outcome& o) {
    const row& r = rows[o.ticket / copies];
    INFO(r.url << ": " << o.reason);
    CHECK_FALSE(o.allowed);
    CHECK(o.capability == "network:fetch");
    CHECK(o.decided_by == policy::decider::rule);
    CHECK(o.reason.find(r.reason_has) != std::string::npos);
  });

  // A public name (if this machine resolves one): allowed; for ext-5 the question comes after
  // the lookup, and the user's answer decides.
  std::string public_name;
  for (const char* candidate : {"deb.debian.org", "registry.npmjs.org"}) {
    policy::host_addresses a = io::look_up_host(candidate);
    if (!a.addresses.empty() &&
        std::none_of(a.addresses.begin(), a.addresses.end(), [](const auto& ip) { return policy::is_refused_address(ip); })) {
      public_name = candidate;
      break;
    }
  }
  if (public_name.empty()) {
    WARN("no public name resolves on this machine; the allowed rows are not run");
  } else {
    auto check_public = [&](const char* extension) {
      return self->request(checker, 20s, actors::check_atom::value,
                           actors::check_batch{extension, "fetch", std::string("pub-") + extension, "s-1",
                                               {policy::gate_check{policy::capability::network_fetch, policy::subject_kind::url,
                                                                   "https://" + public_name + "/x", {}, "url"}}});
    };
    check_public("ext-3").receive([](actors::check_outcome& o) { CHECK(o.allowed); },
                                  [&](caf::error& e) { FAIL("not answered: " << rig.sys.render(e)); });
    auto asked = check_public("ext-5");
    self->receive([](held_atom) {}, caf::after(20s) >> [] { FAIL("the checker never asked about the public name"); });
    self->send(approver, release_atom::value);
    asked.receive([](actors::check_outcome& o) { CHECK(o.allowed); },
                  [&](caf::error& e) { FAIL("not answered: " << rig.sys.render(e)); });
  }
  caf::anon_send_exit(approver, caf::exit_reason::user_shutdown);
  rig.stop(checker);

  // Every refusal is in the trail with its reason.
  std::size_t denied = 0;
  std::ifstream in(home.dhara_home() / "audit.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["action"] != "denied") continue;
    ++denied;
    const std::string url = j["details"]["url"];
    const std::string reason = j["reason"];
    CHECK(reason.find("the host '" + policy::parse_url(url)->host + "'") == 0);
  }
  CHECK(denied == rows.size() * copies);
}

namespace {

// An audit sink that writes nothing and says so: every append is answered with `why`.
actors::audit_sink_actor failing_sink(caf::actor_system& sys, std::string why) {
  return sys.spawn(
      [](actors::audit_sink_actor::pointer self, std::string error) -> actors::audit_sink_actor::behavior_type {
        return {
            [=](actors::append_atom, policy::audit_lines&) { return actors::audit_ack{0, error}; },
            [=](actors::append_atom, policy::audit_lines&, actors::audit_release_ptr& r) {
              if (r->claim()) r->answer(error, self->context());
            },
            [=](actors::append_atom, std::vector<policy::audit_entry>&) { return actors::audit_ack{0, error}; },
        };
      },
      std::move(why));
}

}  // namespace

TEST_CASE("answers released together reach each asker once, in one message per asker", "[runtime][audit]") {
  testing::temp_home home;
  writer_rig rig(home);
  caf::scoped_actor other{rig.sys};
  caf::scoped_actor requester{rig.sys};
  auto checker = actors::spawn_checker(rig.sys, testing::policy_fixture{}.compile(), rig.writer, {});
  // Two askers send their checks interleaved, tickets 1..n and n+1..2n, every third denied, and
  // a third asks by `request` among them. Each must get exactly its own answers, whatever
  // message brings them. (The sends outpace the checker by far, so checks share appends.)
  constexpr std::size_t n = 256;
  auto check = [](std::uint64_t ticket) {
    actors::check_batch b = fetch(ticket % 3 == 0 ? "https://evil.test/" : "https://api.example.com/v1",
                                  "c-" + std::to_string(ticket));
    b.ticket = ticket;
    return b;
  };
  // The requests' time limit is generous: they are read only after the askers' 512 answers.
  std::vector<decltype(requester->request(checker, 60s, actors::check_atom::value, check(1)))> requests;
  for (std::uint64_t t = 1; t <= n; ++t) {
    rig.self->send(checker, actors::check_atom::value, check(t));
    other->send(checker, actors::check_atom::value, check(n + t));
    if (t % 64 == 0) requests.push_back(requester->request(checker, 60s, actors::check_atom::value, check(5000 + t)));
  }
  const std::vector<std::pair<caf::scoped_actor*, std::uint64_t>> askers = {{&rig.self, 0}, {&other, n}};
  for (const auto& [asker, first] : askers) {
    std::vector<int> answers(n, 0);
    std::size_t wrong = 0;
    const std::size_t messages = receive_answers(*asker, n, [&, first = first](actors::check_outcome& o) {
      REQUIRE(o.ticket > first);  // its own tickets, and no other asker's
      REQUIRE(o.ticket <= first + n);
      ++answers[o.ticket - first - 1];
      wrong += o.allowed == (o.ticket % 3 == 0);
    });
    CHECK(std::count(answers.begin(), answers.end(), 1) == static_cast<long>(n));
    CHECK(wrong == 0);
    CHECK(messages < n);  // answers released together came together
    bool more = false;
    (*asker)->receive([&](actors::check_outcome&) { more = true; }, [&](actors::check_outcomes&) { more = true; },
                      caf::after(50ms) >> [] {});
    CHECK_FALSE(more);
  }
  // The requests are answered as requests, one each, with their tickets.
  for (auto& h : requests) {
    bool answered = false;
    h.receive([&](actors::check_outcome& o) { answered = o.ticket > 5000 && o.allowed == (o.ticket % 3 != 0); },
              [&](caf::error& e) { FAIL("a request was not answered: " << rig.sys.render(e)); });
    CHECK(answered);
  }
  // With the writer gone, every decision is a denial, still one per ticket.
  caf::anon_send_exit(rig.writer, caf::exit_reason::user_shutdown);
  rig.self->wait_for(rig.writer);
  for (std::uint64_t t = 1; t <= n; ++t) rig.self->send(checker, actors::check_atom::value, check(t));
  std::vector<int> answers(n, 0);
  std::size_t allowed = 0;
  receive_answers(rig.self, n, [&](actors::check_outcome& o) {
    REQUIRE(o.ticket >= 1);
    REQUIRE(o.ticket <= n);
    ++answers[o.ticket - 1];
    allowed += o.allowed;
    if (o.ticket % 3 != 0) CHECK(o.decided_by == policy::decider::failure);
  });
  CHECK(std::count(answers.begin(), answers.end(), 1) == static_cast<long>(n));
  CHECK(allowed == 0);
  caf::anon_send_exit(checker, caf::exit_reason::user_shutdown);
}

TEST_CASE("an answer the audit writer releases itself comes only once its line is in the trail", "[runtime][audit]") {
  // A check sent alone with a ticket hands its answer to the writer with its line; when the
  // answer comes, the line must already be in audit.jsonl (write: in the kernel; fsync: synced).
  const auto durability = GENERATE(policy::audit_durability::write, policy::audit_durability::fsync);
  CAPTURE(policy::to_string(durability));
  testing::temp_home home;
  writer_rig rig(home, durability);
  caf::scoped_actor& self = rig.self;
  auto checker = actors::spawn_checker(rig.sys, testing::policy_fixture{}.compile(), rig.writer, {});
  auto lines_naming = [&](const std::string& call_id) {
    std::ifstream in(home.dhara_home() / "audit.jsonl");
    std::size_t n = 0;
    for (std::string line; std::getline(in, line);) n += line.find("\"toolCallId\":\"" + call_id + "\"") != std::string::npos;
    return n;
  };
  for (std::uint64_t t = 1; t <= 20; ++t) {
    const bool allow = t % 4 != 0;
    actors::check_batch b = fetch(allow ? "https://api.example.com/v1" : "https://evil.test/", "rel-" + std::to_string(t));
    b.ticket = t;
    self->send(checker, actors::check_atom::value, std::move(b));
    actors::check_outcome o;
    self->receive([&](actors::check_outcome& x) { o = std::move(x); },
                  [&](actors::check_outcomes& xs) { FAIL("one check came back with " << xs.outcomes.size() << " answers"); },
                  caf::after(10s) >> [] { FAIL("no answer"); });
    CHECK(o.ticket == t);
    CHECK(o.allowed == allow);
    CHECK(lines_naming("rel-" + std::to_string(t)) == 1);
  }
  rig.stop(checker);
  auto v = io::verify_audit(home.dhara_home().string());
  REQUIRE(v);
  CHECK(v->ok);
  CHECK(v->lines == 20);
}

TEST_CASE("a writer that cannot open the trail refuses the answers handed to it, naming why", "[runtime][audit]") {
  // DHARA_HOME is a file: the writer cannot open audit.jsonl, and every check is denied with
  // the writer's reason, each with its ticket, whichever way its answer went.
  testing::temp_home home;
  std::filesystem::remove_all(home.dhara_home());
  std::ofstream(home.dhara_home()) << "not a folder\n";
  REQUIRE(std::filesystem::is_regular_file(home.dhara_home()));
  writer_rig rig(home);
  caf::scoped_actor& self = rig.self;
  auto checker = actors::spawn_checker(rig.sys, testing::policy_fixture{}.compile(), rig.writer, {});
  for (std::uint64_t t = 1; t <= 3; ++t) {
    actors::check_batch b = fetch("https://api.example.com/v1", "c-" + std::to_string(t));
    b.ticket = t;
    self->send(checker, actors::check_atom::value, std::move(b));
    actors::check_outcome o;
    self->receive([&](actors::check_outcome& x) { o = std::move(x); }, caf::after(10s) >> [] { FAIL("no answer"); });
    CHECK(o.ticket == t);
    CHECK_FALSE(o.allowed);
    CHECK(o.decided_by == policy::decider::failure);
    CHECK(o.capability == "network:fetch");
    CHECK(o.reason.rfind("the audit log cannot be written: ", 0) == 0);
    CHECK(o.reason.size() > std::string("the audit log cannot be written: ").size());
  }
  rig.stop(checker);
}

TEST_CASE("answers whose audit append failed are denied together, each once, naming why", "[runtime][audit]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{(actors::use_dhara_scheduler(cfg, 2), cfg)};
  caf::scoped_actor self{sys};
  auto sink = failing_sink(sys, "the disk is full");
  auto checker = actors::spawn_checker(sys, testing::policy_fixture{}.compile(), sink, {});
  constexpr std::size_t n = 256;
  for (std::uint64_t t = 1; t <= n; ++t) {
    actors::check_batch b = fetch("https://api.example.com/v1", "c-" + std::to_string(t));
    b.ticket = t;
    self->send(checker, actors::check_atom::value, std::move(b));
  }
  std::vector<int> answers(n, 0);
  std::size_t wrong = 0;
  const std::size_t messages = receive_answers(self, n, [&](actors::check_outcome& o) {
    REQUIRE(o.ticket >= 1);
    REQUIRE(o.ticket <= n);
    ++answers[o.ticket - 1];
    wrong += o.allowed || o.decided_by != policy::decider::failure || o.reason != "the disk is full" ||
             o.capability != "network:fetch";
  });
  CHECK(std::count(answers.begin(), answers.end(), 1) == static_cast<long>(n));
  CHECK(wrong == 0);
  CHECK(messages < n);
  for (auto a : {caf::actor_cast<caf::actor>(checker), caf::actor_cast<caf::actor>(sink)})
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

namespace {

// A project on disk for path checks: src/a.ts, docs/, secrets/key (denied), and two links into
// the secrets, src/to-secrets -> ../secrets and key-link -> secrets/key. web-tools may read
// the project.
struct disk_project {
  testing::temp_home home;
  std::filesystem::path proj = std::filesystem::canonical(home.project());
  testing::policy_fixture fixture;

  disk_project() {
    namespace fs = std::filesystem;
    fs::create_directories(proj / "src");
    fs::create_directories(proj / "docs");
    fs::create_directories(proj / "secrets");
    std::ofstream(proj / "src/a.ts") << "x\n";
    std::ofstream(proj / "secrets/key") << "k\n";
    fs::create_directory_symlink("../secrets", proj / "src/to-secrets");
    fs::create_symlink(proj / "secrets/key", proj / "key-link");
    fixture.config.allowed_paths[0] = proj.string();
    fixture.config.denied_paths[0] = (proj / "secrets").string();
  }
  std::shared_ptr<const policy::policy_snapshot> compile(bool interactive = false) const {
    static const io::real_path_resolver resolver;
    return fixture.compile_at((std::filesystem::canonical(home.root) / "home").string(), proj.string(), interactive,
                              &resolver);
  }
};

actors::check_batch read_of(const std::string& path, std::uint64_t ticket) {
  actors::check_batch b{"web-tools", "read", "c-" + std::to_string(ticket), "s-1", {}};
  b.checks.push_back(policy::gate_check{policy::capability::filesystem_read, policy::subject_kind::path, path, {}, "path"});
  b.ticket = ticket;
  return b;
}

// Sends every path at once (the checker's mailbox fills), tickets 1..n, and collects the
// answers by ticket.
std::vector<actors::check_outcome> check_all_at_once(caf::scoped_actor& self, const actors::checker_actor& checker,
                                                     const std::vector<std::string>& paths) {
  for (std::size_t i = 0; i < paths.size(); ++i) self->send(checker, actors::check_atom::value, read_of(paths[i], i + 1));
  std::vector<actors::check_outcome> out(paths.size());
  receive_answers(self, paths.size(), [&](actors::check_outcome& o) {
    REQUIRE(o.ticket >= 1);
    REQUIRE(o.ticket <= paths.size());
    out[o.ticket - 1] = std::move(o);
  });
  return out;
}

}  // namespace

TEST_CASE("path checks that arrive together are decided as each alone would be", "[runtime][audit]") {
  disk_project d;
  struct row {
    std::string path;
    bool allowed;
  };
  const std::vector<row> rows = {
      {"src/a.ts", true},
      {"docs", true},
      {"src/missing.ts", true},
      {"src/to-secrets/key", false},  // through a link into the denied folder
      {"key-link", false},            // a link to the denied file
      {"secrets/key", false},         // denied as written
      {"../outside", false},          // outside the allowed folder
      {(d.proj / "src/a.ts").string(), true},
  };
  std::vector<std::string> paths;
  for (int i = 0; i < 50; ++i)
    for (const row& r : rows) paths.push_back(r.path);
  const std::uint64_t rounds_before = io::real_path_resolver::look_ahead_rounds();
  {
    writer_rig rig(d.home);
    auto checker = actors::spawn_checker(rig.sys, d.compile(), rig.writer, {});
    const auto outcomes = check_all_at_once(rig.self, checker, paths);
    for (std::size_t i = 0; i < paths.size(); ++i) {
      INFO(paths[i] << " (ticket " << i + 1 << "): " << outcomes[i].reason);
      CHECK(outcomes[i].allowed == rows[i % rows.size()].allowed);
    }
    caf::anon_send_exit(checker, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(rig.writer, caf::exit_reason::user_shutdown);
    rig.self->wait_for(checker, rig.writer);
  }
  // The checks were decided in rounds whose looks went together (where io_uring can be used).
  const std::vector<std::string> two = {"/", "/"};
  if (io::real_path_resolver::look_ahead(two) > 0) CHECK(io::real_path_resolver::look_ahead_rounds() > rounds_before + 1);
  else WARN("io_uring cannot be used here: every look was taken alone");
  io::real_path_resolver::end_look_ahead();
  auto v = io::verify_audit(d.home.dhara_home().string());
  REQUIRE(v);
  CHECK(v->ok);
  CHECK(v->lines == paths.size());
}

TEST_CASE("checks that came before a new snapshot are decided under the one before it", "[runtime][audit]") {
  disk_project d;
  auto before = d.compile();
  d.fixture.config.allowed_paths[0] = "/nowhere-allowed";  // the project is no longer allowed
  auto after = d.compile();
  writer_rig rig(d.home);
  auto checker = actors::spawn_checker(rig.sys, before, rig.writer, {});
  constexpr std::size_t n = 300;
  for (std::size_t i = 0; i < n; ++i) rig.self->send(checker, actors::check_atom::value, read_of("src/a.ts", i + 1));
  rig.self->send(checker, actors::snapshot_atom::value, after);
  for (std::size_t i = n; i < 2 * n; ++i) rig.self->send(checker, actors::check_atom::value, read_of("src/a.ts", i + 1));
  std::size_t wrong = 0;
  receive_answers(rig.self, 2 * n, [&](actors::check_outcome& o) { wrong += o.allowed != (o.ticket <= n); });
  CHECK(wrong == 0);
  caf::anon_send_exit(checker, caf::exit_reason::user_shutdown);
}

TEST_CASE("checks that came before an approver are decided without it", "[runtime][audit]") {
  testing::temp_home home;
  writer_rig rig(home);
  testing::policy_fixture fixture;
  // ext-5 has filesystem:read approved only: a fetch is pending, refused without an approver.
  // (It has no domain list: the URL names a public address, so no check waits for a lookup,
  // which would decide it when the answer comes, under the approver set by then.)
  fixture.perms[5].capabilities = {{"filesystem:read", policy::permission_state::approved}};
  auto checker = actors::spawn_checker(rig.sys, fixture.compile(/*interactive=*/true), rig.writer, {});
  // An approver that answers `answer` to every question. (It takes an argument: CAF 0.17 trips
  // UBSan on a function actor spawned without one, ../shared/CAF017.md.)
  auto approver = rig.sys.spawn(
      [](caf::event_based_actor*, actors::hitl_decision answer) -> caf::behavior {
        return {[=](actors::question_atom, actors::hitl_question&) { return actors::hitl_answer{answer, {}}; }};
      },
      actors::hitl_decision::allow);
  auto batch = [](std::uint64_t ticket) {
    actors::check_batch b{"ext-5", "sync", "c-" + std::to_string(ticket), "s-1",
                          {policy::gate_check{policy::capability::network_fetch, policy::subject_kind::url,
                                              "https://93.184.216.34/v1", {}, "url"}}};
    b.ticket = ticket;
    return b;
  };
  constexpr std::size_t n = 300;
  for (std::size_t i = 0; i < n; ++i) rig.self->send(checker, actors::check_atom::value, batch(i + 1));
  rig.self->send(checker, actors::approver_atom::value, caf::actor_cast<actors::hitl_actor>(approver));
  for (std::size_t i = n; i < 2 * n; ++i) rig.self->send(checker, actors::check_atom::value, batch(i + 1));
  std::size_t wrong = 0;
  receive_answers(rig.self, 2 * n, [&](actors::check_outcome& o) { wrong += o.allowed != (o.ticket > n); });
  CHECK(wrong == 0);
  caf::anon_send_exit(checker, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(approver, caf::exit_reason::user_shutdown);
}

// A path check the user is asked about is decided again when the answer comes, under the rules
// in force then: a denial made meanwhile stands, and an allowed host request names the root and
// the resolution of that second decision, which its file operation opens.
TEST_CASE("a path check the user allowed is decided again under the rules in force when the answer comes",
          "[runtime][audit]") {
  disk_project d;
  d.fixture.perms[5].capabilities = {};  // ext-5: filesystem:read pending, so each read is asked
  writer_rig rig(d.home);
  auto checker = actors::spawn_checker(rig.sys, d.compile(/*interactive=*/true), rig.writer, {});
  auto approver = rig.sys.spawn(releasable_approver, caf::actor_cast<caf::actor>(rig.self));
  caf::anon_send(checker, actors::approver_atom::value, caf::actor_cast<actors::hitl_actor>(approver));
  auto host_read = [&](std::uint64_t ticket) {
    actors::check_batch b = read_of("src/a.ts", ticket);
    b.extension = "ext-5";
    b.opens_paths = true;
    return b;
  };
  auto answer_to = [&](actors::check_batch b) {
    auto waiting = rig.self->request(checker, 10s, actors::check_atom::value, std::move(b));
    rig.self->receive([](held_atom) {}, caf::after(10s) >> [] { FAIL("the checker never asked the approver"); });
    return waiting;
  };

  // The rules unchanged: allowed, naming the project and the file's resolution.
  auto first = answer_to(host_read(1));
  rig.self->send(approver, release_atom::value);
  first.receive(
      [&](actors::check_outcome& o) {
        CHECK(o.allowed);
        CHECK(o.allowed_root == d.proj.string());
        CHECK(o.checked_path == (d.proj / "src/a.ts").string());
      },
      [&](caf::error& e) { FAIL("the check was not answered: " << rig.sys.render(e)); });

  // src denied while the user is asked: the answer allow does not override the new denial.
  auto second = answer_to(host_read(2));
  d.fixture.config.denied_paths.push_back((d.proj / "src").string());
  rig.self->send(checker, actors::snapshot_atom::value, d.compile(/*interactive=*/true));
  rig.self->send(approver, release_atom::value);
  second.receive(
      [&](actors::check_outcome& o) {
        CHECK_FALSE(o.allowed);
        CHECK_THAT(o.reason, Catch::Contains("checked again when the user answered: "));
        CHECK_THAT(o.reason, Catch::Contains("denied by the rule " + (d.proj / "src").string()));
        CHECK(o.checked_path.empty());
      },
      [&](caf::error& e) { FAIL("the check was not answered: " << rig.sys.render(e)); });
  for (auto actor : {caf::actor_cast<caf::actor>(checker), approver, caf::actor_cast<caf::actor>(rig.writer)})
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  auto v = io::verify_audit(d.home.dhara_home().string());
  REQUIRE(v);
  CHECK(v->ok);
  CHECK(v->lines == 2);
  std::ifstream in(d.home.dhara_home() / "audit.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["action"] == "allowed");
  CHECK(lines[0]["decidedBy"] == "user");
  CHECK(lines[1]["action"] == "denied");
}
