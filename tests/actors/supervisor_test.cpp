// The extension supervisor with real extension processes (python, node, native): handshake,
// calls, progress, cancel, timeouts through the kill chain, crashes, protocol violations,
// restarts and the environment.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <caf/all.hpp>

#include "actors/extension_supervisor.hpp"
#include "actors/scheduler.hpp"
#include "broker/extension_host.hpp"
#include "io/jsonrpc.hpp"
#include "io/path_resolver.hpp"
#include "support/extension_fixture.hpp"

using namespace dhara;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

namespace fs = std::filesystem;

// One actor system, one event loop and a temp home per test. Member order is destruction
// order reversed: the loop stops before the actor system ends.
struct runtime_fixture {
  caf::actor_system_config sys_cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  testing::temp_home home;
  std::shared_ptr<io::event_loop> loop = std::make_shared<io::event_loop>();
  broker::interpreter_cache interpreters{std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin"};

  static caf::actor_system_config& tune(caf::actor_system_config& c) {
    actors::use_dhara_scheduler(c, 2);  // as a session runs
    return c;
  }
  runtime_fixture() : sys{tune(sys_cfg)}, self{sys} {}
  ~runtime_fixture() { loop->stop(500); }

  actors::supervisor_config config_for(const std::string& source) {
    auto folder = home.add_extension(source);
    json m = json::parse(std::ifstream(folder / "manifest.json"));
    actors::supervisor_config c;
    c.name = m["name"];
    c.version = m["version"];
    c.folder = folder.string();
    std::string command = m["runtime"]["command"];
    std::istringstream words(command);
    for (std::string w; words >> w;) c.argv.push_back(w);
    auto exe = interpreters.resolve(c.argv.front(), c.folder);
    REQUIRE(exe);
    c.argv.front() = *exe;
    c.env = broker::extension_environment(c.name, false, environ);
    c.stderr_log = (home.root / (c.name + ".log")).string();
    c.handshake_ms = 5000;
    c.call_timeout_ms = 10000;
    c.cancel_grace_ms = 300;
    c.kill_grace_ms = 300;
    c.restart_window_ms = 60000;
    return c;
  }

  actors::extension_info status(const actors::supervisor_actor& s) {
    actors::extension_info out;
    self->request(s, 15s, actors::status_atom::value)
        .receive([&](actors::extension_info& i) { out = std::move(i); },
                 [&](caf::error& e) { FAIL("status failed: " << sys.render(e)); });
    return out;
  }

  // Asks until the extension has been restarted `restarts` times and is ready again, for at
  // most 10 s (a busy machine starts a process slowly); returns the last answer.
  actors::extension_info ready_after_restarts(const actors::supervisor_actor& s, std::uint32_t restarts) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    auto info = status(s);
    while ((info.restarts < restarts || info.state != actors::extension_state::ready) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
      info = status(s);
    }
    return info;
  }

  static actors::tool_call call_of(std::string id, std::string tool, json input) {
    actors::tool_call c;
    c.tool_call_id = std::move(id);
    c.tool = std::move(tool);
    c.input = std::move(input);
    return c;
  }

  actors::call_result call(const actors::supervisor_actor& s, std::string tool, json input = json::object(),
                           std::string id = "c1", std::chrono::milliseconds wait = 15s) {
    actors::tool_call c = call_of(std::move(id), std::move(tool), std::move(input));
    c.cwd = home.project().string();
    c.session_id = "test";
    actors::call_result out;
    self->request(s, wait, actors::execute_atom::value, std::move(c))
        .receive([&](actors::call_result& r) { out = std::move(r); },
                 [&](caf::error& e) { FAIL("call failed: " << sys.render(e)); });
    return out;
  }

  void stop(const actors::supervisor_actor& s) {
    self->request(s, 10s, actors::shutdown_atom::value).receive([](bool) {}, [&](caf::error& e) { FAIL(sys.render(e)); });
  }
};

std::string text_of(const actors::call_result& r) {
  if (!r.ok || !r.result.contains("content") || r.result["content"].empty()) return {};
  return r.result["content"][0].value("text", "");
}

}  // namespace

TEST_CASE_METHOD(runtime_fixture, "echo extensions in python, node and C++ answer calls", "[runtime][supervisor]") {
  for (std::string source : {"echo-py", "echo-node", "echo-native"}) {
    CAPTURE(source);
    auto sup = actors::spawn_supervisor(sys, loop, config_for(source));
    auto info = status(sup);
    REQUIRE(info.state == actors::extension_state::ready);
    CHECK(info.name == source);
    REQUIRE(info.tools.is_array());
    CHECK_FALSE(info.tools.empty());
    auto r = call(sup, "echo", {{"text", "héllo \"quoted\" \\ world"}});
    REQUIRE(r.ok);
    CHECK(text_of(r) == "héllo \"quoted\" \\ world");
    stop(sup);
  }
  CHECK(loop->live_processes() == 0);
}

TEST_CASE_METHOD(runtime_fixture, "a crash fails the call in flight and the next call runs after a restart", "[runtime][supervisor]") {
  auto sup = actors::spawn_supervisor(sys, loop, config_for("crash"));
  REQUIRE(status(sup).state == actors::extension_state::ready);
  auto r = call(sup, "crash");
  REQUIRE_FALSE(r.ok);
  CHECK(r.code == io::rpc_error::crashed);
  CHECK(r.data["exitCode"] == 3);
  CHECK(r.data["signal"].is_null());
  CHECK(r.data["stderrTail"].get<std::string>().find("exiting with code 3") != std::string::npos);
  auto again = call(sup, "ok", json::object(), "c2");
  REQUIRE(again.ok);
  CHECK(text_of(again) == "ok");
  CHECK(status(sup).restarts == 1);
  stop(sup);
}

TEST_CASE_METHOD(runtime_fixture, "crashing in a loop marks the extension failed after maxRestarts", "[runtime][supervisor]") {
  auto cfg = config_for("crash");
  cfg.max_restarts = 2;
  auto sup = actors::spawn_supervisor(sys, loop, cfg);
  for (int i = 0; i < 3; ++i) {
    auto r = call(sup, "crash", json::object(), "c" + std::to_string(i));
    CHECK(r.code == io::rpc_error::crashed);
  }
  auto info = status(sup);
  CHECK(info.state == actors::extension_state::failed);
  CHECK(info.reason.find("not restarting") != std::string::npos);
  auto refused = call(sup, "ok", json::object(), "c9");
  CHECK(refused.code == io::rpc_error::method_not_found);
  stop(sup);
  CHECK(loop->live_processes() == 0);
}

TEST_CASE_METHOD(runtime_fixture, "a hung call times out with -32004 and the kill chain leaves no process", "[runtime][supervisor]") {
  auto cfg = config_for("hang-term");
  cfg.call_timeout_ms = 200;
  auto folder = cfg.folder;
  auto sup = actors::spawn_supervisor(sys, loop, cfg);
  REQUIRE(status(sup).state == actors::extension_state::ready);
  auto before = std::chrono::steady_clock::now();
  auto r = call(sup, "hang");
  CHECK(r.code == io::rpc_error::cancelled);
  CHECK(std::chrono::steady_clock::now() - before < 5s);  // vs. hanging until the 15 s request timeout
  // grace (300 ms) then SIGTERM: the process is replaced by a fresh one, not counted as a crash.
  auto info = ready_after_restarts(sup, 1);
  CHECK(info.state == actors::extension_state::ready);
  CHECK(info.restarts == 1);
  CHECK(call(sup, "ok", json::object(), "c2").ok);
  stop(sup);
  CHECK(testing::processes_mentioning(folder).empty());
}

TEST_CASE_METHOD(runtime_fixture, "each call keeps its own deadline after earlier calls ended", "[runtime][supervisor]") {
  // A finished call's bookkeeping is reused by the next call: the next call's deadline and id
  // must be its own, not the finished call's.
  auto cfg = config_for("echo-py");
  cfg.call_timeout_ms = 1000;
  auto sup = actors::spawn_supervisor(sys, loop, cfg);
  REQUIRE(status(sup).state == actors::extension_state::ready);
  CHECK(text_of(call(sup, "echo", {{"text", "first"}}, "c1")) == "first");
  std::this_thread::sleep_for(1200ms);  // the first call's deadline has passed
  // Made now, it has a second left: its 300 ms sleep ends in time.
  auto r = call(sup, "sleep", {{"ms", 300}}, "c2");
  CHECK(r.ok);
  CHECK(text_of(r) == "slept 300 ms");
  // And a call that outlives its own deadline is still timed out.
  auto before = std::chrono::steady_clock::now();
  CHECK(call(sup, "sleep", {{"ms", 4000}}, "c3").code == io::rpc_error::cancelled);
  CHECK(std::chrono::steady_clock::now() - before < 3s);
  CHECK(text_of(call(sup, "echo", {{"text", "last"}}, "c4")) == "last");
  stop(sup);
}

TEST_CASE_METHOD(runtime_fixture, "an extension that ignores SIGTERM is killed after the grace", "[runtime][supervisor]") {
  auto cfg = config_for("hang-ignore-term");
  cfg.call_timeout_ms = 200;
  auto folder = cfg.folder;
  auto sup = actors::spawn_supervisor(sys, loop, cfg);
  REQUIRE(status(sup).state == actors::extension_state::ready);
  CHECK(call(sup, "hang").code == io::rpc_error::cancelled);
  // 200 ms timeout answered; +300 ms grace → SIGTERM (ignored); +300 ms → SIGKILL; restart.
  auto info = ready_after_restarts(sup, 1);
  CHECK(info.restarts == 1);
  CHECK(call(sup, "ok", json::object(), "c2").ok);
  stop(sup);
  CHECK(testing::processes_mentioning(folder).empty());
}

TEST_CASE_METHOD(runtime_fixture, "a call made while the kill chain stops the extension waits for the next process", "[runtime][supervisor]") {
  auto cfg = config_for("hang-ignore-term");
  cfg.call_timeout_ms = 200;
  cfg.kill_grace_ms = 4000;  // SIGTERM (ignored) 300 ms after the timeout, SIGKILL 4 s later
  auto sup = actors::spawn_supervisor(sys, loop, cfg);
  REQUIRE(status(sup).state == actors::extension_state::ready);
  CHECK(call(sup, "hang").code == io::rpc_error::cancelled);
  // Well inside the SIGTERM..SIGKILL window: the doomed process no longer reads stdin, so a
  // call written to it would die with it (-32003). It waits for the next process instead.
  std::this_thread::sleep_for(1500ms);
  auto r = call(sup, "ok", json::object(), "c2");
  CHECK(r.ok);
  CHECK(r.message.empty());
  CHECK(status(sup).restarts == 1);
  stop(sup);
}

TEST_CASE_METHOD(runtime_fixture, "a timed-out call answered after SIGTERM still ends in SIGKILL", "[runtime][supervisor]") {
  // A review: the late answer stopped the kill chain after its SIGTERM (ignored), so the
  // process ran on while the supervisor held every later call for the exit it was waiting
  // for: `dhara run` never ended, a serve request was never answered.
  auto cfg = config_for("hang-ignore-term");
  cfg.call_timeout_ms = 200;
  cfg.kill_grace_ms = 1500;  // SIGTERM ~300 ms after the timeout, the answer ~300 ms later, SIGKILL after
  auto sup = actors::spawn_supervisor(sys, loop, cfg);
  REQUIRE(status(sup).state == actors::extension_state::ready);
  CHECK(call(sup, "late", {{"ms", 800}}).code == io::rpc_error::cancelled);
  std::this_thread::sleep_for(1000ms);  // past the answer, inside the SIGTERM..SIGKILL window
  auto r = call(sup, "ok", json::object(), "c2");
  CHECK(r.ok);
  CHECK(status(sup).restarts == 1);
  stop(sup);
}

TEST_CASE_METHOD(runtime_fixture, "cancel answers -32004 at once and a cooperative extension keeps running", "[runtime][supervisor]") {
  auto sup = actors::spawn_supervisor(sys, loop, config_for("echo-py"));
  REQUIRE(status(sup).state == actors::extension_state::ready);
  auto pending = self->request(sup, 10s, actors::execute_atom::value, call_of("slow", "sleep", {{"ms", 5000}}));
  std::this_thread::sleep_for(100ms);
  self->send(sup, actors::cancel_atom::value, std::string("slow"));
  auto before = std::chrono::steady_clock::now();
  actors::call_result r;
  pending.receive([&](actors::call_result& x) { r = std::move(x); }, [&](caf::error& e) { FAIL(sys.render(e)); });
  CHECK(r.code == io::rpc_error::cancelled);
  CHECK(std::chrono::steady_clock::now() - before < 3s);  // vs. the 5 s sleep finishing
  std::this_thread::sleep_for(800ms);  // past grace + kill grace: it answered, so no kill
  CHECK(status(sup).restarts == 0);
  CHECK(call(sup, "echo", {{"text", "still here"}}, "c2").ok);
  stop(sup);
}

TEST_CASE_METHOD(runtime_fixture, "progress notifications reach the caller", "[runtime][supervisor]") {
  auto sup = actors::spawn_supervisor(sys, loop, config_for("echo-node"));
  REQUIRE(status(sup).state == actors::extension_state::ready);
  actors::tool_call c;
  c.tool_call_id = "p1";
  c.tool = "progress";
  c.input = {{"count", 3}};
  c.progress_to = caf::actor_cast<caf::actor>(self);
  self->send(sup, actors::execute_atom::value, c);  // the reply comes as an ordinary message
  int updates = 0;
  actors::call_result result;
  bool done = false;
  while (!done) {
    self->receive([&](actors::progress_atom, const std::string& id, const json& update) {
                    CHECK(id == "p1");
                    CHECK(update.is_object());
                    ++updates;
                  },
                  [&](actors::call_result& r) { result = std::move(r); done = true; },
                  caf::after(10s) >> [&] { FAIL("no progress or result"); });
  }
  CHECK(result.ok);
  CHECK(updates == 3);
  stop(sup);
}

TEST_CASE_METHOD(runtime_fixture, "garbage and over-long lines restart only that extension", "[runtime][supervisor]") {
  auto garbage_cfg = config_for("garbage");
  auto long_cfg = config_for("long-line");
  long_cfg.max_line_bytes = 1024 * 1024;
  auto garbage = actors::spawn_supervisor(sys, loop, garbage_cfg);
  auto longline = actors::spawn_supervisor(sys, loop, long_cfg);
  auto echo = actors::spawn_supervisor(sys, loop, config_for("echo-py"));
  auto g = call(garbage, "garbage");
  CHECK(g.code == io::rpc_error::crashed);
  CHECK(g.data.value("violation", "").find("not JSON") != std::string::npos);
  auto l = call(longline, "long", {{"bytes", 2 * 1024 * 1024}});
  CHECK(l.code == io::rpc_error::crashed);
  CHECK(l.data.value("violation", "").find("1048576") != std::string::npos);
  CHECK(call(echo, "echo", {{"text", "unaffected"}}).ok);
  CHECK(call(garbage, "ok", json::object(), "c2").ok);   // restarted
  CHECK(call(longline, "long", {{"bytes", 1000}}, "c2").ok);  // under the limit: fine
  for (auto* s : {&garbage, &longline, &echo}) stop(*s);
}

TEST_CASE_METHOD(runtime_fixture, "a silent initialize fails the handshake", "[runtime][supervisor]") {
  auto cfg = config_for("hang-init");
  cfg.handshake_ms = 200;
  cfg.max_restarts = 1;
  auto folder = cfg.folder;
  auto sup = actors::spawn_supervisor(sys, loop, cfg);
  auto info = status(sup);
  // Two handshakes (one restart) time out, then the extension is failed with the reason.
  while (info.state == actors::extension_state::starting) info = status(sup);
  CHECK(info.state == actors::extension_state::failed);
  CHECK(info.reason.find("initialize") != std::string::npos);
  stop(sup);
  CHECK(testing::processes_mentioning(folder).empty());
}

TEST_CASE_METHOD(runtime_fixture, "the extension sees a scrubbed environment", "[runtime][supervisor]") {
  ::setenv("DHARA_TEST_SECRET", "do-not-leak", 1);
  auto sup = actors::spawn_supervisor(sys, loop, config_for("echo-py"));
  auto secret = call(sup, "env", {{"name", "DHARA_TEST_SECRET"}});
  REQUIRE(secret.ok);
  CHECK(secret.result["metadata"]["value"].is_null());
  auto name = call(sup, "env", {{"name", "DHARA_EXTENSION"}}, "c2");
  CHECK(name.result["metadata"]["value"] == "echo-py");
  auto path = call(sup, "env", {{"name", "PATH"}}, "c3");
  CHECK(path.result["metadata"]["value"].is_string());
  ::unsetenv("DHARA_TEST_SECRET");
  stop(sup);
}

TEST_CASE_METHOD(runtime_fixture, "the extension's stdin and stdout are pipes", "[runtime][supervisor]") {
  // Pipes, not socketpairs: cheaper per message (docs/performance.md).
  auto cfg = config_for("echo-py");
  auto sup = actors::spawn_supervisor(sys, loop, cfg);
  REQUIRE(call(sup, "echo", {{"text", "hi"}}).ok);
  auto pids = testing::processes_mentioning(cfg.folder);
  REQUIRE(pids.size() == 1);
  auto fd = [&](int n) {
    std::error_code ec;
    return fs::read_symlink("/proc/" + std::to_string(pids[0]) + "/fd/" + std::to_string(n), ec).string();
  };
  CHECK(fd(0).rfind("pipe:", 0) == 0);
  CHECK(fd(1).rfind("pipe:", 0) == 0);
  stop(sup);
}

TEST_CASE_METHOD(runtime_fixture, "a missing interpreter fails at once with the reason", "[runtime][supervisor]") {
  auto cfg = config_for("echo-py");
  cfg.argv.front() = "/nonexistent/python3";
  auto sup = actors::spawn_supervisor(sys, loop, cfg);
  auto info = status(sup);
  CHECK(info.state == actors::extension_state::failed);
  CHECK(info.reason.find("/nonexistent/python3") != std::string::npos);
  stop(sup);
}

TEST_CASE_METHOD(runtime_fixture, "a start the sandbox launcher refused is named with its reason", "[runtime][supervisor]") {
  // dhara-launch prints one line with the start's tag and exits 126 before the extension runs.
  // An extension that prints such a line itself, without the tag, has crashed.
  auto wait_failed = [&](const actors::supervisor_actor& s) {
    auto info = status(s);
    for (auto deadline = std::chrono::steady_clock::now() + 10s;
         info.state != actors::extension_state::failed && std::chrono::steady_clock::now() < deadline;
         info = status(s))
      std::this_thread::sleep_for(20ms);
    return info;
  };
  auto cfg = config_for("echo-py");
  cfg.max_restarts = 1;
  cfg.launcher_tag = "0a1b";
  cfg.argv = {"/bin/sh", "-c",
              "echo 'dhara-launch[0a1b]: landlock: Too many levels of symbolic links (cannot grant /x: a link)' >&2; "
              "exit 126"};
  auto sup = actors::spawn_supervisor(sys, loop, cfg);
  auto info = wait_failed(sup);
  CHECK(info.state == actors::extension_state::failed);
  CHECK(info.reason == "extension 'echo-py' could not start in its sandbox (it ended 2 times within 60 s; not "
                       "restarting): landlock: Too many levels of symbolic links (cannot grant /x: a link)");
  stop(sup);

  for (const char* line : {"dhara-launch: made up", "dhara-launch[0a1c]: made up", "dhara-launch[0a1b]: made up"}) {
    CAPTURE(line);
    auto crash = config_for("crash");
    crash.max_restarts = 0;
    crash.launcher_tag = std::string(line).find("[0a1b]") != std::string::npos ? "" : "0a1b";  // no launcher: no tag
    crash.argv = {"/bin/sh", "-c", std::string("echo '") + line + "' >&2; exit 126"};
    auto other = actors::spawn_supervisor(sys, loop, crash);
    info = wait_failed(other);
    CHECK(info.reason == "extension 'crash' crashed 1 time within 60 s; not restarting");
    stop(other);
    std::filesystem::remove_all(home.extensions() / "crash");
  }
}

TEST_CASE_METHOD(runtime_fixture, "wrong and duplicate response ids are ignored", "[runtime][supervisor]") {
  auto sup = actors::spawn_supervisor(sys, loop, config_for("unknown-id"));
  for (int i = 0; i < 3; ++i) CHECK(call(sup, "echo", {{"text", "ok"}}, "c" + std::to_string(i)).ok);
  CHECK(status(sup).restarts == 0);
  stop(sup);
}

TEST_CASE_METHOD(runtime_fixture, "a progress flood does not stall other extensions", "[runtime][supervisor]") {
  auto flood_cfg = config_for("progress-flood");
  flood_cfg.call_timeout_ms = 120000;  // not a timeout test: sanitized builds read 300 000 lines slowly
  auto echo_cfg = config_for("echo-native");  // every file in place before the first spawn
  auto flood = actors::spawn_supervisor(sys, loop, flood_cfg);
  auto echo = actors::spawn_supervisor(sys, loop, echo_cfg);
  REQUIRE(status(flood).state == actors::extension_state::ready);
  REQUIRE(status(echo).state == actors::extension_state::ready);
  actors::tool_call c;
  c.tool_call_id = "flood";
  c.tool = "flood";
  c.input = {{"count", 300000}};
  self->send(flood, actors::execute_atom::value, c);  // its result arrives as an ordinary message
  std::this_thread::sleep_for(50ms);
  // While the notifications pour in, another extension still answers: its reply comes before
  // the flood's result (an ordering, not a timing — slower builds only widen the gap).
  CHECK(call(echo, "echo", {{"text", "responsive"}}, "e1").ok);
  bool flood_done_first = false;
  self->receive([&](actors::call_result&) { flood_done_first = true; }, caf::after(std::chrono::seconds(0)) >> [] {});
  CHECK_FALSE(flood_done_first);
  actors::call_result r;
  self->receive([&](actors::call_result& x) { r = std::move(x); }, caf::after(120s) >> [] { FAIL("the flood never finished"); });
  CHECK(r.ok);
  stop(flood);
  stop(echo);
}

TEST_CASE_METHOD(runtime_fixture, "a stderr flood is capped in the extension's log", "[runtime][supervisor]") {
  auto cfg = config_for("stderr-flood");
  auto log = cfg.stderr_log;
  auto sup = actors::spawn_supervisor(sys, loop, cfg);
  auto r = call(sup, "flood", {{"mb", 25}});
  CHECK(r.ok);
  stop(sup);
  CHECK(testing::fs::file_size(log) <= 10u * 1024 * 1024);
  CHECK(testing::fs::exists(log + ".1"));
  CHECK(testing::fs::file_size(log + ".1") <= 10u * 1024 * 1024);
}

TEST_CASE_METHOD(runtime_fixture, "an exit is reported even when a grandchild holds stdout, and the grandchild dies", "[runtime][supervisor]") {
  auto cfg = config_for("fork-child");
  auto folder = cfg.folder;
  auto sup = actors::spawn_supervisor(sys, loop, cfg);
  REQUIRE(status(sup).state == actors::extension_state::ready);
  auto before = std::chrono::steady_clock::now();
  auto r = call(sup, "orphan");
  CHECK(r.code == io::rpc_error::crashed);
  CHECK(r.data["exitCode"] == 5);
  CHECK(std::chrono::steady_clock::now() - before < 10s);  // vs. waiting for the 30 s grandchild
  CHECK(call(sup, "ok", json::object(), "c2").ok);  // restarted
  stop(sup);
  // The orphaned `sleep 30` (cwd: the extension folder) was killed with its process group.
  auto deadline = std::chrono::steady_clock::now() + 2s;
  while (!testing::processes_mentioning(folder).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  CHECK(testing::processes_mentioning(folder).empty());
}

namespace {

// What a directory watch reported, collected on the loop thread.
struct seen_names {
  std::mutex m;
  std::vector<std::string> names;
  bool has(const std::string& n) {
    std::lock_guard<std::mutex> g{m};
    return std::find(names.begin(), names.end(), n) != names.end();
  }
  void clear() {
    std::lock_guard<std::mutex> g{m};
    names.clear();
  }
};

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::trunc);
  out << text;
}

}  // namespace

TEST_CASE_METHOD(runtime_fixture, "a directory watch reports renames and finished writes, not every append", "[runtime][watch]") {
  fs::path dir = home.root / "watched";
  fs::create_directories(dir);
  int log = ::open((dir / "audit.jsonl").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  REQUIRE(log >= 0);
  auto seen = std::make_shared<seen_names>();
  loop->watch_directory(dir.string(), [seen](std::string name) {
    std::lock_guard<std::mutex> g{seen->m};
    seen->names.push_back(std::move(name));
  });
  auto wait_for = [&](const std::string& name) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!seen->has(name) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
    return seen->has(name);
  };
  // The watch starts on the loop thread: a file created until it is seen.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!seen->has("ready") && std::chrono::steady_clock::now() < deadline) {
    fs::remove(dir / "ready");
    write_file(dir / "ready", "x");
    std::this_thread::sleep_for(20ms);
  }
  REQUIRE(seen->has("ready"));

  // Appends to an open file: no event. The rename that follows is reported after anything
  // they would have caused (the kernel's queue keeps the order).
  seen->clear();
  for (int i = 0; i < 50; ++i) REQUIRE(::write(log, "line\n", 5) == 5);
  write_file(dir / "permissions.json.tmp", "{}");
  fs::rename(dir / "permissions.json.tmp", dir / "permissions.json");
  REQUIRE(wait_for("permissions.json"));
  CHECK_FALSE(seen->has("audit.jsonl"));

  // A file rewritten in place is reported when its writer closes it.
  seen->clear();
  write_file(dir / "permissions.json", "{\"version\": 1}");
  CHECK(wait_for("permissions.json"));
  // So is a deletion.
  seen->clear();
  fs::remove(dir / "permissions.json");
  CHECK(wait_for("permissions.json"));
  // The folder moved away: "" (anything may have changed).
  seen->clear();
  fs::rename(dir, home.root / "moved");
  CHECK(wait_for(""));
  ::close(log);
}

TEST_CASE_METHOD(runtime_fixture, "a call sent with a ticket is answered with it even when cancelled", "[runtime][supervisor]") {
  auto sup = actors::spawn_supervisor(sys, loop, config_for("echo-py"));
  REQUIRE(status(sup).state == actors::extension_state::ready);
  actors::tool_call slow = call_of("slow", "sleep", {{"ms", 5000}});
  slow.ticket = 8;
  actors::tool_call quick = call_of("quick", "echo", {{"text", "hi"}});
  quick.ticket = 7;
  self->send(sup, actors::execute_atom::value, slow);  // answers come as ordinary messages
  self->send(sup, actors::execute_atom::value, quick);
  actors::call_result first;
  self->receive([&](actors::call_result& r) { first = std::move(r); }, caf::after(10s) >> [] { FAIL("no answer"); });
  CHECK(first.ok);
  CHECK(first.ticket == 7);
  CHECK(text_of(first) == "hi");
  self->send(sup, actors::cancel_atom::value, std::string("slow"));
  actors::call_result second;
  self->receive([&](actors::call_result& r) { second = std::move(r); }, caf::after(10s) >> [] { FAIL("no answer"); });
  CHECK(second.code == io::rpc_error::cancelled);
  CHECK(second.ticket == 8);
  stop(sup);
}

TEST_CASE_METHOD(runtime_fixture, "the results of one read reach their asker together, each once", "[runtime][supervisor]") {
  auto sup = actors::spawn_supervisor(sys, loop, config_for("echo-native"));
  REQUIRE(status(sup).state == actors::extension_state::ready);
  // Sent at once, the calls are written together and the echo's replies pile up in the pipe:
  // a read brings several, whose results come in one call_results.
  constexpr std::size_t n = 256;
  for (std::size_t t = 1; t <= n; ++t) {
    actors::tool_call c = call_of("c-" + std::to_string(t), "echo", {{"text", "t" + std::to_string(t)}});
    c.ticket = t;
    self->send(sup, actors::execute_atom::value, c);
  }
  std::vector<int> answers(n, 0);
  std::size_t wrong = 0;
  std::size_t got = 0;
  std::size_t messages = 0;
  auto take = [&](actors::call_result& r) {
    REQUIRE(r.ticket >= 1);
    REQUIRE(r.ticket <= n);
    ++answers[r.ticket - 1];
    wrong += !r.ok || text_of(r) != "t" + std::to_string(r.ticket);
    ++got;
  };
  while (got < n) {
    self->receive(
        [&](actors::call_result& r) {
          ++messages;
          take(r);
        },
        [&](actors::call_results& rs) {
          ++messages;
          for (auto& r : rs.results) take(r);
        },
        caf::after(15s) >> [&] { FAIL("only " << got << " of " << n << " calls were answered"); });
  }
  CHECK(std::count(answers.begin(), answers.end(), 1) == static_cast<long>(n));
  CHECK(wrong == 0);
  CHECK(messages < n);
  bool more = false;
  self->receive([&](actors::call_result&) { more = true; }, [&](actors::call_results&) { more = true; },
                caf::after(50ms) >> [] {});
  CHECK_FALSE(more);
  stop(sup);
}

TEST_CASE_METHOD(runtime_fixture, "a supervisor that is killed stops its extension and answers its calls", "[runtime][supervisor]") {
  auto cfg = config_for("echo-py");
  const std::string folder = cfg.folder;
  auto sup = actors::spawn_supervisor(sys, loop, cfg);
  REQUIRE(status(sup).state == actors::extension_state::ready);
  REQUIRE(loop->live_processes() == 1);
  // One call asked with `request`, one with a ticket, both in the extension when its
  // supervisor goes.
  auto asked = self->request(sup, 10s, actors::execute_atom::value, call_of("slow", "sleep", {{"ms", 5000}}));
  actors::tool_call ticketed = call_of("slow-2", "sleep", {{"ms", 5000}});
  ticketed.ticket = 7;
  self->send(sup, actors::execute_atom::value, ticketed);
  // Both calls were handled, and are written to the extension before the kill is read.
  REQUIRE(status(sup).state == actors::extension_state::ready);
  const auto before = std::chrono::steady_clock::now();
  caf::anon_send_exit(sup, caf::exit_reason::kill);
  actors::call_result r;
  asked.receive([&](actors::call_result& x) { r = std::move(x); }, [&](caf::error& e) { FAIL(sys.render(e)); });
  CHECK(r.code == io::rpc_error::crashed);
  CHECK(r.message.find("lost its supervisor") != std::string::npos);
  actors::call_result second;
  self->receive([&](actors::call_result& x) { second = std::move(x); }, caf::after(10s) >> [] { FAIL("no answer"); });
  CHECK(second.ticket == 7);
  CHECK(second.code == io::rpc_error::crashed);
  CHECK(std::chrono::steady_clock::now() - before < 3s);  // vs. the 5 s sleeps, or never
  // Nobody reads the extension any more: it is killed, not left running until the session ends.
  for (int i = 0; i < 100 && loop->live_processes() > 0; ++i) std::this_thread::sleep_for(20ms);
  CHECK(loop->live_processes() == 0);
  CHECK(testing::processes_mentioning(folder).empty());
}
