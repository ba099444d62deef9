// The checker with a real audit writer: every decided check is audited in a line the checker
// serialized itself, except allowed checks that auditIgnorePatterns drop — never a denial.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/audit_writer.hpp"
#include "actors/checker.hpp"
#include "io/audit_log.hpp"
#include "support/extension_fixture.hpp"
#include "support/policy_fixture.hpp"

using namespace dhara;
using namespace std::chrono_literals;

namespace {

// A fetch by web-tools, which may fetch from api.example.com only.
actors::check_batch fetch(const std::string& url, const std::string& call_id) {
  return {"web-tools", "fetch", call_id, "s-1",
          {policy::gate_check{policy::capability::network_fetch, policy::subject_kind::url, url, {}, "url"}}};
}

}  // namespace

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
      {"https://api.example.com/quiet/b", true, false}, // allowed, its path matches "/quiet/**"
      {"https://evil.test/quiet/b", false, true},       // denied: written although its path matches
  };
  {
    caf::actor_system_config cfg;
    caf::actor_system sys{cfg};
    caf::scoped_actor self{sys};
    actors::audit_writer_config wc;
    wc.dhara_home = home.dhara_home().string();
    auto writer = actors::spawn_audit_writer(sys, wc);
    auto checker = actors::spawn_checker(sys, testing::policy_fixture{}.compile(), writer,
                                         {"https://api.example.com/skip/**", "/quiet/**"});
    for (std::size_t i = 0; i < rows.size(); ++i) {
      INFO(rows[i].url);
      self->request(checker, 10s, actors::check_atom::value, fetch(rows[i].url, "c-" + std::to_string(i)))
          .receive([&](actors::check_outcome& o) { CHECK(o.allowed == rows[i].allowed); },
                   [&](caf::error& e) { FAIL("the check was not answered: " << sys.render(e)); });
    }
    caf::anon_send_exit(checker, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
    self->wait_for(checker, writer);
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
