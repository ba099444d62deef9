// decide(): every step of DESIGN §4 on a compiled snapshot.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "policy/snapshot.hpp"
#include "support/policy_fixture.hpp"

using namespace dhara::policy;
using dhara::testing::policy_fixture;
using namespace std::string_view_literals;

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

TEST_CASE("an approval given for fewer hosts is pending once the manifest lists more", "[policy][decide]") {
  policy_fixture f;  // web-tools (0): network:fetch approved, its manifest lists two hosts
  f.perms[0].scope = capability_scope{std::vector<std::string>{"api.example.com", "*.example.org"}, std::nullopt};
  auto same = f.compile(false);
  REQUIRE(same);
  REQUIRE(same->extensions.find("web-tools") != same->extensions.end());
  CHECK(same->extensions.find("web-tools")->second.approved_by_user.contains(capability::network_fetch));
  f.perms[0].scope->network_domains = std::vector<std::string>{"api.example.com"};  // approved for one of them
  auto wider = f.compile(false);
  REQUIRE(wider);
  REQUIRE(wider->extensions.find("web-tools") != wider->extensions.end());
  const extension_policy& ext = wider->extensions.find("web-tools")->second;
  CHECK_FALSE(ext.approved_by_user.contains(capability::network_fetch));
  CHECK(ext.approved_by_user.contains(capability::filesystem_read));
  CHECK(ext.denied.contains(capability::filesystem_write));
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

TEST_CASE("a check for an extension the snapshot does not hold is denied, naming it", "[policy][decide]") {
  auto snap = policy_fixture{}.compile();
  REQUIRE(snap);
  REQUIRE(snap->extensions.find("web-tools") != snap->extensions.end());
  // Names near a loaded one: a prefix, a longer name, another case, the empty name.
  for (std::string_view name : {"web-tool"sv, "web-toolsx"sv, "Web-tools"sv, "web-tools "sv, ""sv, "web-tools\0"sv}) {
    INFO("extension '" << name << "'");
    decision d = decide(*snap, path_req(name, capability::filesystem_read, "src/auth.ts"));
    CHECK(d.verdict == verdict_kind::deny);
    CHECK(d.reason == "'" + std::string(name) + "' is not a loaded extension");
  }
}

TEST_CASE("the extension table finds each name it holds, and no other, as a scan of its entries does",
          "[policy][decide]") {
  // Names that share prefixes and lengths around the hash's eight-byte words, added in a
  // random order, some twice; each lookup is compared with a scan of what was added.
  std::mt19937 rng(20261205);
  const std::vector<std::string> stems = {"a", "web", "web-tools", "web-tools-", "file-stats-extension", "x"};
  auto random_name = [&] {
    std::string s = stems[rng() % stems.size()];
    const std::size_t extra = rng() % 20;
    for (std::size_t i = 0; i < extra; ++i) s.push_back("ab-9z"[rng() % 5]);
    return s;
  };
  for (int round = 0; round < 200; ++round) {
    extension_table table;
    std::vector<std::pair<std::string, std::string>> added;  // name, the version it was added with
    const std::size_t n = rng() % 70;
    for (std::size_t i = 0; i < n; ++i) {
      std::string name = random_name();
      extension_policy ext;
      ext.name = name;
      ext.version = std::to_string(i);
      const bool first = std::none_of(added.begin(), added.end(), [&](const auto& a) { return a.first == name; });
      auto [at, inserted] = table.emplace(name, ext);
      REQUIRE(inserted == first);
      REQUIRE(at != table.end());
      REQUIRE(at->first == name);
      if (first) added.emplace_back(name, ext.version);
      CHECK(at->second.version == (first ? ext.version : std::find_if(added.begin(), added.end(), [&](const auto& a) {
                                                            return a.first == name;
                                                          })->second));  // the first one stays
    }
    REQUIRE(table.size() == added.size());
    std::size_t i = 0;
    for (const auto& [name, ext] : table) {  // in the order they were added
      CHECK(name == added[i].first);
      CHECK(ext.version == added[i].second);
      ++i;
    }
    for (int probe = 0; probe < 60; ++probe) {
      const std::string name = probe % 3 == 0 && !added.empty() ? added[rng() % added.size()].first : random_name();
      auto expected = std::find_if(added.begin(), added.end(), [&](const auto& a) { return a.first == name; });
      auto it = table.find(name);
      if (expected == added.end()) {
        CHECK(it == table.end());
      } else {
        REQUIRE(it != table.end());
        CHECK(it->first == name);
        CHECK(it->second.version == expected->second);
      }
    }
  }
  extension_table empty;
  CHECK(empty.find("web-tools") == empty.end());
  CHECK(empty.find("") == empty.end());
}

TEST_CASE("the extension table tells a name from its twin one byte apart, at every length and place",
          "[policy][decide]") {
  // For each length 0..24 (around the hash's words of eight) and each place, a name and its
  // twin with that one byte changed: the twin is not found until added, then each finds its own.
  for (std::size_t n = 0; n <= 24; ++n) {
    for (std::size_t at = 0; at < std::max<std::size_t>(n, 1); ++at) {
      std::string name(n, 'a');
      for (std::size_t i = 0; i < n; ++i) name[i] = static_cast<char>('a' + (i * 7) % 26);
      std::string twin = name;
      if (n > 0) twin[at] = static_cast<char>(twin[at] ^ 0x20);  // the other case of that letter
      INFO("length " << n << ", byte " << at);
      extension_table table;
      extension_policy first;
      first.version = "name";
      REQUIRE(table.emplace(name, first).second);
      REQUIRE(table.find(name) != table.end());
      if (n == 0) {
        CHECK_FALSE(table.emplace(name, first).second);  // the empty name, held once
        continue;
      }
      CHECK(table.find(twin) == table.end());
      extension_policy second;
      second.version = "twin";
      REQUIRE(table.emplace(twin, second).second);
      CHECK(table.find(name)->second.version == "name");
      CHECK(table.find(twin)->second.version == "twin");
      CHECK(table.find(name.substr(0, n - 1)) == table.end());
      CHECK(table.find(name + "a") == table.end());
    }
  }
}

TEST_CASE("names that differ only in their last bytes do not pile up in the extension table", "[policy][decide]") {
  // `bench-echo-0` … `-999` (what `dhara bench --extensions 1000` installs) and `ext-0` … `ext-19`
  // (the policy fixture's): a hash whose slot came from its low bits alone put the names that
  // differ in their last three bytes at one slot (a probe of ~117 reads on average, 300 at
  // worst, for the thousand).
  for (const auto& [stem, count] : std::vector<std::pair<std::string, int>>{{"bench-echo-", 1000}, {"ext-", 20}}) {
    extension_table table;
    for (int i = 0; i < count; ++i) REQUIRE(table.emplace(stem + std::to_string(i), extension_policy{}).second);
    INFO(stem << "0.." << count - 1);
    CHECK(table.longest_probe() <= 12);
    for (int i = 0; i < count; ++i) CHECK(table.find(stem + std::to_string(i))->first == stem + std::to_string(i));
  }
}
