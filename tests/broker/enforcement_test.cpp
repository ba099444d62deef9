// Capability enforcement end to end with a real extension process: pending headless, approved
// and denied paths, a symlink planted in the project, a tool refused at load, revocation while
// running, the audit trail (its hash chain checked by an independent implementation), and a
// full disk that makes checks fail closed.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <set>
#include <thread>

#include <caf/all.hpp>

#include "actors/scheduler.hpp"
#include "broker/batch.hpp"
#include "broker/extension_host.hpp"
#include "io/permissions_file.hpp"
#include "support/extension_fixture.hpp"

using namespace dhara;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

struct enforcement_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{(actors::use_dhara_scheduler(cfg, 2), cfg)};
  testing::temp_home home;

  enforcement_fixture() {
    home.add_extension("fs-tool");
    testing::fs::create_directories(home.project() / "src");
    std::ofstream(home.project() / "src/a.txt") << "project text\n";
    testing::fs::create_directories(home.home() / ".ssh");
    std::ofstream(home.home() / ".ssh/id_rsa") << "PRIVATE KEY\n";
  }

  io::locations where() const {
    return {home.home().string(), home.dhara_home().string(), home.project().string(), home.project().string()};
  }

  void approve_read() {
    auto written = io::update_permissions(io::permissions_path(home.dhara_home().string()), [](policy::permissions& p) {
      auto r = policy::record(p, "fs-tool", "filesystem:read", policy::permission_state::approved, "1.0.0", "", "2026-11-30T00:00:00Z", policy::security_level::standard, nullptr);
      if (!r) return policy::result<bool>(r.err());
      return policy::result<bool>(true);
    });
    REQUIRE(written);
  }

  // Runs one batch and returns its result lines.
  std::vector<json> run(broker::extension_host& host, const std::string& calls) {
    std::FILE* out = std::tmpfile();
    broker::run_batch(sys, host, broker::parse_batch(calls), {.concurrency = 1, .session_id = "test-session", .cwd = home.project().string()}, out);
    std::rewind(out);
    std::string text;
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, out)) text.append(buf, n);
    std::fclose(out);
    std::vector<json> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) lines.push_back(json::parse(line));
    return lines;
  }

  std::vector<json> audit_lines() const {
    std::vector<json> lines;
    std::ifstream in(home.dhara_home() / "audit.jsonl");
    for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
    return lines;
  }

  // The chain recomputed by Python's hashlib, independently of dhara's code: prints OK.
  std::string verify_with_python() const {
    std::string script = (home.root / "verify.py").string();
    std::ofstream(script) << R"PY(
import hashlib, sys
prev = "0" * 64
seq = 0
for n, raw in enumerate(open(sys.argv[1], "rb"), 1):
    line = raw.rstrip(b"\n")
    body, suffix = line[:-75], line[-75:]
    if not suffix.startswith(b',"hash":"') or not suffix.endswith(b'"}'):
        print(f"line {n}: no hash suffix"); sys.exit(1)
    want = suffix[9:73].decode()
    got = hashlib.sha256(prev.encode() + body).hexdigest()
    if got != want:
        print(f"line {n}: hash mismatch"); sys.exit(1)
    import json
    s = json.loads(line)["seq"]
    if s != seq + 1:
        print(f"line {n}: seq {s} after {seq}"); sys.exit(1)
    prev, seq = want, s
print("OK", seq)
)PY";
    std::string cmd = "python3 " + script + " " + (home.dhara_home() / "audit.jsonl").string() + " 2>&1";
    std::FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
    return out;
  }
};

}  // namespace

TEST_CASE_METHOD(enforcement_fixture, "a pending capability is denied headless with the command that approves it", "[runtime][enforcement]") {
  auto loaded = broker::load_policy(where(), false);
  REQUIRE(loaded);
  broker::extension_host host(sys, *loaded);
  host.start();
  auto lines = run(host, R"({"tool": "read", "input": {"path": "src/a.txt"}})");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["status"] == "denied");
  CHECK(lines[0]["error"]["code"] == -32002);
  CHECK(lines[0]["error"]["data"]["capability"] == "filesystem:read");
  CHECK(lines[0]["error"]["message"].get<std::string>().find("dhara config permissions approve fs-tool filesystem:read") !=
        std::string::npos);
  host.shutdown();
  auto audit = audit_lines();
  REQUIRE(audit.size() == 2);
  CHECK(audit[0]["capability"] == "*");  // the overreaching tool, refused at load
  CHECK(audit[0]["tool"] == "overreach");
  CHECK(audit[1]["action"] == "denied");
  CHECK(audit[1]["details"]["path"] == "src/a.txt");
  CHECK(audit[1]["tool"] == "read");
  CHECK(audit[1]["session"] == "test-session");
  CHECK_FALSE(audit[1]["reason"].get<std::string>().empty());
}

TEST_CASE_METHOD(enforcement_fixture, "approved reads run, while denied paths, escapes and planted symlinks do not", "[runtime][enforcement]") {
  approve_read();
  testing::fs::create_directory_symlink(home.home() / ".ssh", home.project() / "keys");  // planted link
  auto loaded = broker::load_policy(where(), false);
  REQUIRE(loaded);
  broker::extension_host host(sys, *loaded);
  host.start();
  auto lines = run(host,
                   R"({"tool": "read", "input": {"path": "src/a.txt"}})" "\n"
                   R"({"tool": "read", "input": {"path": "~/.ssh/id_rsa"}})" "\n"
                   R"({"tool": "read", "input": {"path": "../home/.ssh/id_rsa"}})" "\n"
                   R"({"tool": "read", "input": {"path": "keys/id_rsa"}})" "\n"
                   R"({"tool": "overreach"})" "\n");
  REQUIRE(lines.size() == 5);
  CHECK(lines[0]["status"] == "ok");
  CHECK(lines[0]["result"]["content"][0]["text"] == "project text\n");
  for (int i = 1; i <= 3; ++i) {
    CAPTURE(i);
    CHECK(lines[i]["status"] == "denied");
    CHECK(lines[i]["error"]["data"]["reason"].is_string());
  }
  CHECK(lines[3]["error"]["message"].get<std::string>().find("resolves to") != std::string::npos);
  CHECK(lines[4]["error"]["code"] == -32601);  // refused at load: not a callable tool
  CHECK(lines[4]["error"]["data"]["reason"].get<std::string>().find("process:spawn") != std::string::npos);
  host.shutdown();
  auto audit = audit_lines();
  REQUIRE(audit.size() == 5);  // refusal at load + four checked calls
  CHECK(audit[1]["action"] == "allowed");
  CHECK(audit[1]["decidedBy"] == "user");
  CHECK(audit[2]["action"] == "denied");
  CHECK(audit[2]["decidedBy"] == "rule");
  for (std::size_t i = 0; i < audit.size(); ++i) CHECK(audit[i]["seq"] == i + 1);
  CHECK(verify_with_python().rfind("OK 5", 0) == 0);
}

TEST_CASE_METHOD(enforcement_fixture, "a batch whose reader stops reading still runs and audits every call", "[runtime][enforcement][batch]") {
  approve_read();
  std::ofstream(home.project() / "src/big.txt") << std::string(2000, 'b') << "\n";
  auto loaded = broker::load_policy(where(), false);
  REQUIRE(loaded);
  broker::extension_host host(sys, *loaded);
  host.start();
  const int calls = 200;  // about 420 KB of result lines: several times what a pipe holds (64 KiB)
  std::string batch;
  for (int i = 0; i < calls; ++i) batch += R"({"id": )" + std::to_string(i) + R"(, "tool": "read", "input": {"path": "src/big.txt"}})" "\n";
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  std::FILE* out = ::fdopen(fds[1], "w");
  REQUIRE(out != nullptr);
  auto running = std::async(std::launch::async, [&] {
    auto sum = broker::run_batch(sys, host, broker::parse_batch(batch), {.concurrency = 4, .session_id = "test-session", .cwd = home.project().string()}, out);
    std::fclose(out);  // EOF for the reader below
    return sum;
  });
  // Nobody reads yet: every call still runs, and is audited (the refusal at load is line 1).
  auto complete_audit_lines = [&] {
    std::ifstream in(home.dhara_home() / "audit.jsonl");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    return std::count(text.begin(), text.end(), '\n');
  };
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (complete_audit_lines() < calls + 1 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  CHECK(complete_audit_lines() == calls + 1);
  std::string text;
  char buf[65536];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  auto sum = running.get();
  CHECK(sum.ok == calls);
  std::set<int> ids;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line);
    CHECK(j["status"] == "ok");
    CHECK(j["result"]["content"][0]["text"].get<std::string>().size() == 2001);
    ids.insert(j["id"].get<int>());
  }
  CHECK(ids.size() == static_cast<std::size_t>(calls));
  host.shutdown();
  CHECK(verify_with_python().rfind("OK " + std::to_string(calls + 1), 0) == 0);
}

TEST_CASE_METHOD(enforcement_fixture, "a revocation from another process is enforced from the next check on", "[runtime][enforcement]") {
  approve_read();
  auto loaded = broker::load_policy(where(), false);
  REQUIRE(loaded);
  broker::extension_host host(sys, *loaded);
  host.start();
  CHECK(run(host, R"({"tool": "read", "input": {"path": "src/a.txt"}})")[0]["status"] == "ok");
  caf::scoped_actor self{sys};
  std::uint64_t before = 0;
  self->request(host.permissions_store(), 5s, caf::get_atom::value).receive([&](std::uint64_t g) { before = g; }, [](caf::error&) {});
  // The revocation, made by another process: the real `dhara config permissions revoke`. (A
  // fork that ran dhara's code without exec could deadlock on a lock another thread of this
  // process held at the fork; it did, once, under ASan. Between fork and exec only
  // async-signal-safe calls.)
  std::string home_var = "HOME=" + home.home().string(), dhara_var = "DHARA_HOME=" + home.dhara_home().string();
  std::string path_var = std::string("PATH=") + (std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin");
  char* env[] = {home_var.data(), dhara_var.data(), path_var.data(), nullptr};
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    if (::chdir(home.project().c_str()) != 0) ::_exit(126);
    ::execle(DHARA_BINARY, DHARA_BINARY, "config", "permissions", "revoke", "fs-tool", "filesystem:read",
             static_cast<char*>(nullptr), env);
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  // Wait until the store holds the revocation. (Not just a new generation: the revoking
  // process writes a lock file and a temporary file first, and a reload may catch those and
  // compile the old approvals before the rename lands.)
  auto revoked = [](const policy::snapshot_ptr& s) {
    if (!s) return false;
    auto it = s->extensions.find("fs-tool");
    return it != s->extensions.end() && !it->second.approved_by_user.contains(policy::capability::filesystem_read);
  };
  policy::snapshot_ptr now;
  for (auto deadline = std::chrono::steady_clock::now() + 5s; !revoked(now) && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(20ms);
    self->request(host.permissions_store(), 5s, actors::snapshot_atom::value)
        .receive([&](policy::snapshot_ptr& s) { now = std::move(s); }, [](caf::error&) {});
  }
  REQUIRE(revoked(now));
  CHECK(now->generation > before);
  // The store sent that snapshot to every checker before it answered: the next check sees it.
  auto denied = run(host, R"({"tool": "read", "input": {"path": "src/a.txt"}})");
  CHECK(denied[0]["status"] == "denied");
  host.shutdown();
  CHECK(audit_lines().back()["decidedBy"] == "user");
}

TEST_CASE_METHOD(enforcement_fixture, "a full disk makes checks fail closed", "[runtime][enforcement]") {
  approve_read();
  std::ofstream(home.root / "calls.jsonl") << R"({"tool": "read", "input": {"path": "src/a.txt"}})" << "\n";
  // dhara in a child whose file-size limit lets no byte be written to a regular file: the
  // audit append fails with EFBIG. Output goes through a pipe, which the limit does not cover.
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  // Made before the fork: between fork and exec only async-signal-safe calls (this process
  // has other threads, whose locks a forked child could find held).
  std::string home_var = "HOME=" + home.home().string(), dhara_var = "DHARA_HOME=" + home.dhara_home().string();
  std::string path_var = std::string("PATH=") + (std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin");
  char* env[] = {home_var.data(), dhara_var.data(), path_var.data(), nullptr};
  const std::string project = home.project().string();
  int calls = ::open((home.root / "calls.jsonl").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(calls >= 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();  // no controlling terminal: headless whoever runs the tests
    ::dup2(calls, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    rlimit lim{0, 0};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    if (::chdir(project.c_str()) != 0) ::_exit(126);
    ::execle(DHARA_BINARY, DHARA_BINARY, "run", "--calls", "-", static_cast<char*>(nullptr), env);
    ::_exit(127);
  }
  ::close(calls);
  ::close(fds[1]);
  std::string output;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) output.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CAPTURE(output);
  REQUIRE(WIFEXITED(status));  // never killed by SIGXFSZ
  CHECK(WEXITSTATUS(status) == 3);
  CHECK(output.find("\"status\":\"denied\"") != std::string::npos);
  CHECK(output.find("the audit log cannot be written") != std::string::npos);
  CHECK(output.find("\"capability\":\"filesystem:read\"") != std::string::npos);  // what was refused
  CHECK(output.find("\"decidedBy\"") == std::string::npos);  // nothing was audited, nothing claims so
}

namespace {

// One host request made by the host-client extension inside a tool call: dhara's answer.
json host_call(enforcement_fixture& f, broker::extension_host& host, const std::string& method, const json& params) {
  json call = {{"tool", "host"}, {"input", {{"method", method}, {"params", params}}}};
  auto lines = f.run(host, call.dump());
  REQUIRE(lines.size() == 1);
  REQUIRE(lines[0]["status"] == "ok");
  return json::parse(lines[0]["result"]["content"][0]["text"].get<std::string>());
}

}  // namespace

TEST_CASE_METHOD(enforcement_fixture, "host requests are checked, audited and confined", "[runtime][enforcement][host]") {
  home.add_extension("host-client");
  auto perms = io::permissions_path(home.dhara_home().string());
  REQUIRE(io::update_permissions(perms, [](policy::permissions& p) {
    for (const char* cap : {"filesystem:read", "filesystem:write", "process:spawn"}) {
      auto r = policy::record(p, "host-client", cap, policy::permission_state::approved, "1.0.0", "", "2026-11-30T00:00:00Z", policy::security_level::standard, nullptr);
      if (!r) return policy::result<bool>(r.err());
    }
    return policy::result<bool>(true);
  }));
  std::ofstream(home.root / "outside.txt") << "outside\n";
  testing::fs::create_symlink(home.root / "outside.txt", home.project() / "escape.txt");  // planted
  auto loaded = broker::load_policy(where(), false);
  REQUIRE(loaded);
  broker::extension_host host(sys, *loaded);
  host.start();

  auto read = host_call(*this, host, "host/fs/read", {{"path", "src/a.txt"}});
  CHECK(read["result"]["content"] == "project text\n");
  CHECK(read["result"]["size"] == 13);

  for (const std::string& path : {std::string("~/.ssh/id_rsa"), (home.dhara_home() / "permissions.json").string(),
                                  (home.dhara_home() / "audit.jsonl").string(), std::string("escape.txt")}) {
    CAPTURE(path);
    auto denied = host_call(*this, host, "host/fs/read", {{"path", path}});
    CHECK(denied["error"]["code"] == -32002);
    CHECK(denied["error"]["data"]["capability"] == "filesystem:read");
    CHECK_FALSE(denied["error"]["data"]["reason"].get<std::string>().empty());
  }
  // An extension cannot approve itself or edit the audit trail.
  auto self_approve = host_call(*this, host, "host/fs/write", {{"path", perms}, {"content", "{}"}});
  CHECK(self_approve["error"]["code"] == -32002);
  auto wrote = host_call(*this, host, "host/fs/write", {{"path", "out.txt"}, {"content", "written"}});
  CHECK(wrote["result"]["bytesWritten"] == 7);
  CHECK(std::ifstream(home.project() / "out.txt").get() == 'w');
  // A path that names a folder is refused as open(2) would, never written to the name before it.
  for (const char* folder : {"new.txt/", "new.txt/.", "sub/new.txt/..", "."}) {
    auto refused = host_call(*this, host, "host/fs/write", {{"path", folder}, {"content", "x"}});
    CAPTURE(folder, refused.dump());
    CHECK(refused["error"]["code"] == -32602);
    CHECK_THAT(refused["error"]["message"].get<std::string>(), Catch::Contains("names a folder"));
  }
  CHECK_FALSE(std::filesystem::exists(home.project() / "new.txt"));
  CHECK_FALSE(std::filesystem::exists(home.project() / "sub"));

  auto check = host_call(*this, host, "host/check", {{"capability", "network:fetch"}, {"details", {{"url", "http://10.0.0.1/"}}}});
  CHECK(check["result"]["allowed"] == false);  // network:fetch is not approved
  CHECK(check["result"]["reason"].is_string());
  auto malformed = host_call(*this, host, "host/check", {{"capability", 7}});
  CHECK(malformed["error"]["code"] == -32602);
  // A subject of the wrong shape is malformed, not a question about the capability alone
  // (these were answered allowed); an argv is checked as the spawn checks it.
  for (const json& details : {json{{"path", 5}}, json{{"url", {"a"}}}, json{{"argv", json::array()}}, json{{"command", {1}}}}) {
    auto shaped = host_call(*this, host, "host/check", {{"capability", "process:spawn"}, {"details", details}});
    CAPTURE(details.dump(), shaped.dump());
    CHECK(shaped["error"]["code"] == -32602);
  }
  auto bash = host_call(*this, host, "host/check", {{"capability", "process:spawn"}, {"details", {{"argv", {"bash", "-c", "id"}}}}});
  CHECK(bash["result"]["allowed"] == false);  // bash is not in process.commands
  // Subjects no real path or URL reaches are refused before their check: each would be
  // written into its audit line whole.
  auto long_path = host_call(*this, host, "host/fs/read", {{"path", std::string(5000, 'a')}});
  CHECK(long_path["error"]["code"] == -32602);
  CHECK(long_path["error"]["message"].get<std::string>().find("over the 4096 a path may have") != std::string::npos);
  auto long_url = host_call(*this, host, "host/check", {{"capability", "network:fetch"}, {"details", {{"url", "http://x/" + std::string(9000, 'a')}}}});
  CHECK(long_url["error"]["code"] == -32602);
  auto empty_program = host_call(*this, host, "host/process/spawn", {{"argv", {""}}});
  CHECK(empty_program["error"]["code"] == -32602);
  auto numeric_cwd = host_call(*this, host, "host/process/spawn", {{"argv", {"echo", "hi"}}, {"cwd", 5}});
  CHECK(numeric_cwd["error"]["code"] == -32602);
  auto env = host_call(*this, host, "host/env/get", {{"name", "HOME"}});
  CHECK(env["error"]["code"] == -32002);  // secrets:env not declared
  auto unknown = host_call(*this, host, "host/nope", json::object());
  CHECK(unknown["error"]["code"] == -32601);

  auto echo = host_call(*this, host, "host/process/spawn", {{"argv", {"echo", "hi"}}});
  CHECK(echo["result"]["exitCode"] == 0);
  CHECK(echo["result"]["stdout"] == "hi\n");
  auto shell = host_call(*this, host, "host/process/spawn", {{"argv", {"sh", "-c", "id"}}});
  CHECK(shell["error"]["code"] == -32002);  // sh is not in process.commands
  auto string_cmd = host_call(*this, host, "host/process/spawn", {{"argv", "echo hi"}});
  CHECK(string_cmd["error"]["code"] == -32602);  // a shell string is not accepted
  // Wrongly typed fields are a clear error, not an exception inside the host API actor.
  for (const json& timeout : {json("soon"), json(-5), json(1.5)}) {
    auto typed = host_call(*this, host, "host/process/spawn", {{"argv", {"echo", "hi"}}, {"timeoutMs", timeout}});
    CAPTURE(timeout.dump(), typed.dump());
    CHECK(typed["error"]["code"] == -32602);
    CHECK(typed["error"]["message"].get<std::string>().find("timeoutMs") != std::string::npos);
  }
  CHECK(host_call(*this, host, "host/process/spawn", {{"argv", {"echo", "hi"}}, {"timeoutMs", 5000}})["result"]["exitCode"] == 0);
  // The audit says which variable was asked for, and an argv so that it can be taken apart
  // again (a review: env entries held no name, `echo a b` and `echo 'a b'` read alike).
  CHECK(host_call(*this, host, "host/process/spawn", {{"argv", {"echo", "a b", "", "it's"}}})["result"]["exitCode"] == 0);
  bool env_named = false, argv_quoted = false;
  for (const json& e : audit_lines()) {
    if (e["capability"] == "secrets:env") env_named = e["details"] == json{{"name", "HOME"}};
    if (e["capability"] == "process:spawn" && e["details"].value("command", "").starts_with("echo 'a b'"))
      argv_quoted = e["details"]["command"] == "echo 'a b' '' 'it'\\''s'";
  }
  CHECK(env_named);
  CHECK(argv_quoted);
  host.shutdown();

  // Every decision is in the audit trail, and the chain holds.
  auto audit = audit_lines();
  std::size_t host_entries = 0;
  for (const json& line : audit)
    if (line["extension"] == "host-client") ++host_entries;
  CHECK(host_entries >= 11);
  CHECK(verify_with_python().rfind("OK", 0) == 0);
}

// A request whose check is allowed can still be refused when its operation runs: here a denied
// folder moved into an allowed path after the rules were read (its path no longer names it; its
// identity does). The refusal is a denial: answered -32002 and audited as one, after the
// check's own `allowed` entry (it was answered -32001 and the trail said only `allowed`).
TEST_CASE_METHOD(enforcement_fixture, "an operation refused when it runs is answered and audited as a denial",
                 "[runtime][enforcement][host]") {
  home.add_extension("host-client");
  REQUIRE(io::update_permissions(io::permissions_path(home.dhara_home().string()), [](policy::permissions& p) {
    auto r = policy::record(p, "host-client", "filesystem:read", policy::permission_state::approved, "1.0.0", "", "2026-11-30T00:00:00Z", policy::security_level::standard, nullptr);
    if (!r) return policy::result<bool>(r.err());
    return policy::result<bool>(true);
  }));
  testing::fs::create_directories(home.project() / "a/private");
  std::ofstream(home.project() / "a/private/key") << "PRIVATE\n";
  std::ofstream(home.dhara_home() / "config.json")
      << json{{"security", {{"deniedPaths", {(home.project() / "a/private").string()}}}}}.dump();
  auto loaded = broker::load_policy(where(), false);
  REQUIRE(loaded);
  broker::extension_host host(sys, *loaded);
  host.start();
  testing::fs::rename(home.project() / "a", home.project() / "z");

  auto read = host_call(*this, host, "host/fs/read", {{"path", "z/private/key"}});
  CAPTURE(read.dump());
  CHECK(read["error"]["code"] == -32002);
  CHECK(read["error"]["data"]["capability"] == "filesystem:read");
  const std::string reason = read["error"]["data"]["reason"];
  CHECK_THAT(reason, Catch::Contains("lies in a folder the rules deny"));
  CHECK(read["error"]["message"] == reason);
  // A file that is simply missing is still a failed operation (-32001), not a denial.
  auto missing = host_call(*this, host, "host/fs/read", {{"path", "src/none.txt"}});
  CHECK(missing["error"]["code"] == -32001);
  host.shutdown();

  std::vector<std::string> actions;
  for (const json& line : audit_lines()) {
    if (line["extension"] != "host-client" || line["details"].value("path", "") != "z/private/key") continue;
    actions.push_back(line["action"]);
    CHECK(line["tool"] == "host/fs/read");
    CHECK(line["capability"] == "filesystem:read");
    CHECK(line["decidedBy"] == (line["action"] == "denied" ? "rule" : "user"));
    if (line["action"] == "denied") CHECK(line["reason"] == reason);
  }
  CHECK(actions == std::vector<std::string>{"allowed", "denied"});
  CHECK(verify_with_python().rfind("OK", 0) == 0);
}

TEST_CASE_METHOD(enforcement_fixture, "a project config asking for yolo is ignored with a warning", "[runtime][enforcement]") {
  approve_read();
  testing::fs::create_directories(home.project() / ".dhara");
  std::ofstream(home.project() / ".dhara/config.json") << R"({"security": {"level": "yolo", "deniedPaths": []}})";
  auto loaded = broker::load_policy(where(), false);
  REQUIRE(loaded);
  CHECK(loaded->settings.level == policy::security_level::standard);
  bool warned = false;
  for (const std::string& w : loaded->warnings) warned |= w.find("trustedProjects") != std::string::npos;
  CHECK(warned);
  broker::extension_host host(sys, *loaded);
  host.start();
  auto lines = run(host, R"({"tool": "read", "input": {"path": "~/.ssh/id_rsa"}})");
  CHECK(lines[0]["status"] == "denied");  // under yolo it would not have been
  host.shutdown();
}

TEST_CASE_METHOD(enforcement_fixture, "trusted level auto-approves a trusted author, audited as such", "[runtime][enforcement]") {
  std::ofstream(home.dhara_home() / "config.json") << R"({"security": {"level": "trusted", "trustedAuthors": ["dhara tests"]}})";
  auto loaded = broker::load_policy(where(), false);
  REQUIRE(loaded);
  broker::extension_host host(sys, *loaded);
  host.start();
  auto lines = run(host, R"({"tool": "read", "input": {"path": "src/a.txt"}})" "\n"
                         R"({"tool": "read", "input": {"path": "~/.ssh/id_rsa"}})");
  CHECK(lines[0]["status"] == "ok");      // no permissions recorded: the author is trusted
  CHECK(lines[1]["status"] == "denied");  // path rules still apply
  host.shutdown();
  auto audit = audit_lines();
  CHECK(audit[1]["decidedBy"] == "trusted-author");
}

TEST_CASE_METHOD(enforcement_fixture, "yolo grants everything but dhara's own state files", "[runtime][enforcement]") {
  home.add_extension("host-client");
  std::ofstream(home.dhara_home() / "config.json") << R"({"security": {"level": "yolo"}})";
  auto loaded = broker::load_policy(where(), false);
  REQUIRE(loaded);
  broker::extension_host host(sys, *loaded);
  host.start();
  json call = {{"tool", "read"}, {"input", {{"path", (home.home() / ".ssh/id_rsa").string()}}}};
  auto lines = run(host, call.dump());
  CHECK(lines[0]["status"] == "ok");
  CHECK(lines[0]["result"]["content"][0]["text"] == "PRIVATE KEY\n");
  auto state = host_call(*this, host, "host/fs/write",
                         {{"path", (home.dhara_home() / "permissions.json").string()}, {"content", "{}"}});
  CHECK(state["error"]["code"] == -32002);
  auto audit_file = host_call(*this, host, "host/fs/read", {{"path", (home.dhara_home() / "audit.jsonl").string()}});
  CHECK(audit_file["error"]["code"] == -32002);
  host.shutdown();
  CHECK(audit_lines()[1]["decidedBy"] == "yolo");
}
