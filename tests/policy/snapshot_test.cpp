// decide(): every step of DESIGN §4 on a compiled snapshot.
#include <catch2/catch.hpp>

#include "policy/snapshot.hpp"
#include "support/policy_fixture.hpp"

using namespace dhara::policy;
using dhara::testing::policy_fixture;

namespace {

check_request path_req(std::string_view ext, capability cap, std::string_view path) {
  return {ext, cap, subject_kind::path, path, {}};
}

}  // namespace

TEST_CASE("an approved capability on an allowed path is allowed by the user", "[policy][decide]") {
  auto snap = policy_fixture{}.compile();
  REQUIRE(snap);
  decision d = decide(*snap, path_req("web-tools", capability::filesystem_read, "src/auth.ts"));
  CHECK(d.verdict == verdict_kind::allow);
  CHECK(d.decided_by == decider::user);
  CHECK(d.matched_rule == "/home/u/proj");
}

TEST_CASE("path rules apply after approval: denied and outside paths are refused", "[policy][decide]") {
  auto snap = policy_fixture{}.compile();
  for (std::string_view p : {"/home/u/proj/secrets/k", "~/.ssh/id_rsa", "/etc/passwd", "../../etc/shadow",
                             "/home/u/.dhara/permissions.json", "/home/u/.aws/credentials"}) {
    CAPTURE(p);
    decision d = decide(*snap, path_req("web-tools", capability::filesystem_read, p));
    CHECK(d.verdict == verdict_kind::deny);
    CHECK(d.decided_by == decider::rule);
    CHECK_FALSE(d.reason.empty());
  }
}

TEST_CASE("a recorded denial wins and names the approve command", "[policy][decide]") {
  auto snap = policy_fixture{}.compile();
  decision d = decide(*snap, path_req("web-tools", capability::filesystem_write, "src/a.ts"));
  CHECK(d.verdict == verdict_kind::deny);
  CHECK(d.decided_by == decider::user);
  CHECK(d.reason.find("dhara config permissions approve web-tools filesystem:write") != std::string::npos);
}

TEST_CASE("a capability the manifest does not declare is refused", "[policy][decide]") {
  auto snap = policy_fixture{}.compile();
  decision d = decide(*snap, {"web-tools", capability::process_spawn, subject_kind::none, {}, {}});
  CHECK(d.verdict == verdict_kind::deny);
  CHECK(d.reason.find("does not declare process:spawn") != std::string::npos);
  decision unknown = decide(*snap, {"nope", capability::filesystem_read, subject_kind::none, {}, {}});
  CHECK(unknown.verdict == verdict_kind::deny);
}

TEST_CASE("pending: headless denies with the command, interactive asks", "[policy][decide]") {
  policy_fixture f;
  auto headless = f.compile(false);
  decision d = decide(*headless, path_req("ext-8", capability::filesystem_read, "src/a.ts"));  // 8 % 3 == 2, author someone
  CHECK(d.verdict == verdict_kind::deny);
  CHECK(d.reason.find("dhara config permissions approve ext-8 filesystem:read") != std::string::npos);

  auto interactive = f.compile(true);
  CHECK(decide(*interactive, path_req("ext-8", capability::filesystem_read, "src/a.ts")).verdict == verdict_kind::ask);
  // A request that would be refused anyway is refused without asking.
  CHECK(decide(*interactive, path_req("ext-8", capability::filesystem_read, "/etc/shadow")).verdict == verdict_kind::deny);
}

TEST_CASE("trusted level auto-approves trusted authors only", "[policy][decide]") {
  policy_fixture f{security_level::trusted};
  auto snap = f.compile(false);
  decision trusted = decide(*snap, path_req("ext-5", capability::filesystem_read, "a"));  // 5: zosmaai, pending
  CHECK(trusted.verdict == verdict_kind::allow);
  CHECK(trusted.decided_by == decider::trusted_author);
  decision other = decide(*snap, path_req("ext-8", capability::filesystem_read, "a"));    // 8: someone, pending
  CHECK(other.verdict == verdict_kind::deny);
}

TEST_CASE("yolo grants everything but dhara's own state files", "[policy][decide]") {
  policy_fixture f{security_level::yolo};
  auto snap = f.compile();
  decision any = decide(*snap, path_req("ext-8", capability::filesystem_write, "/etc/hosts"));
  CHECK(any.verdict == verdict_kind::allow);
  CHECK(any.decided_by == decider::yolo);
  CHECK(any.reason == "yolo");
  decision state = decide(*snap, path_req("ext-8", capability::filesystem_write, "/home/u/.dhara/audit.jsonl"));
  CHECK(state.verdict == verdict_kind::deny);
  // No other path rule: not even the built-in ~/.ssh (DESIGN §4, yolo).
  CHECK(decide(*snap, path_req("ext-8", capability::filesystem_read, "~/.ssh/id_rsa")).allowed());
  CHECK(decide(*snap, path_req("ext-8", capability::filesystem_read, "/home/u/proj/.dhara/config.json")).verdict == verdict_kind::deny);
}

TEST_CASE("urls are checked against the manifest's domains", "[policy][decide]") {
  auto snap = policy_fixture{}.compile();
  auto url = [&](std::string_view ext, std::string_view u) {
    return decide(*snap, {ext, capability::network_fetch, subject_kind::url, u, {}});
  };
  CHECK(url("web-tools", "https://api.example.com/data").allowed());
  CHECK_FALSE(url("web-tools", "https://evil.com/").allowed());
  CHECK(url("ext-3", "https://anything.example.net/").allowed());   // no list: public hosts
  CHECK_FALSE(url("ext-3", "http://127.0.0.1:8080/").allowed());
}

TEST_CASE("commands are checked against process.commands", "[policy][decide]") {
  auto snap = policy_fixture{}.compile();
  CHECK_FALSE(decide(*snap, {"shell-tools", capability::process_spawn, subject_kind::command_string, "git status; sh", {}}).allowed());
  // Without a locator a listed command cannot be placed: denied.
  std::vector<std::string> argv{"git", "status"};
  CHECK_FALSE(decide(*snap, {"shell-tools", capability::process_spawn, subject_kind::argv, {}, argv}).allowed());
}

TEST_CASE("network:outbound approved through a wildcard grants network:fetch", "[policy][decide]") {
  policy_fixture f;
  f.manifests[1].capabilities = {};
  f.manifests[1].capabilities.insert(capability::network_outbound);
  auto snap = f.compile();
  // fs-tools (1 % 3 == 1) has network:* approved; it declares only outbound, fetch is implied.
  CHECK(decide(*snap, {"fs-tools", capability::network_fetch, subject_kind::url, "https://x.org/", {}}).allowed());
}

TEST_CASE("paranoid asks again after a version change", "[policy][decide]") {
  policy_fixture f{security_level::paranoid};
  f.manifests[0].version = "2.0.0";
  auto snap = f.compile(false);
  CHECK_FALSE(decide(*snap, path_req("web-tools", capability::filesystem_read, "a")).allowed());
  policy_fixture standard;
  standard.manifests[0].version = "2.0.0";
  CHECK(decide(*standard.compile(false), path_req("web-tools", capability::filesystem_read, "a")).allowed());
}

TEST_CASE("a snapshot whose denied paths cannot be compiled is refused", "[policy][decide]") {
  policy_fixture f;
  f.config.denied_paths.push_back("relative/secret");
  CHECK(f.compile() == nullptr);
}

TEST_CASE("a failed snapshot denies every check with its reason", "[policy][decide]") {
  auto snap = failed_snapshot("permissions.json is malformed", 7);
  decision d = decide(snap, path_req("web-tools", capability::filesystem_read, "src/a.ts"));
  CHECK(d.verdict == verdict_kind::deny);
  CHECK(d.decided_by == decider::failure);
  CHECK(d.reason == "permissions.json is malformed");
  CHECK(snap.generation == 7);
}
