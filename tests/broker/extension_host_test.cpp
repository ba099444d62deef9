// The extension host and the batch runner with real processes, and `dhara run` end to end.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>

#include <caf/all.hpp>

#include "actors/scheduler.hpp"
#include "broker/batch.hpp"
#include "broker/extension_host.hpp"
#include "io/jsonrpc.hpp"
#include "sandbox/launcher.hpp"
#include "support/extension_fixture.hpp"

using namespace dhara;
using namespace std::chrono_literals;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

io::locations locations_of(const testing::temp_home& h) {
  return {h.home().string(), h.dhara_home().string(), h.project().string(), h.project().string()};
}

// Runs a shell-free command line with env and stdin, returning exit code, stdout, stderr.
struct run_result {
  int code = -1;
  std::string out, err;
};

run_result run_dhara(const testing::temp_home& h, std::vector<std::string> args, const std::string& stdin_text) {
  std::string in_path = (h.root / "stdin.txt").string(), out_path = (h.root / "stdout.txt").string(),
              err_path = (h.root / "stderr.txt").string();
  std::ofstream(in_path) << stdin_text;
  // Everything the child needs is made before the fork: this process has other threads, so
  // between fork and exec only async-signal-safe calls (no malloc, no stdio, no setenv).
  std::vector<char*> argv{const_cast<char*>(DHARA_BINARY)};
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> vars{"HOME=" + h.home().string(), "DHARA_HOME=" + h.dhara_home().string()};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "HOME=", 5) != 0 && std::strncmp(*e, "DHARA_HOME=", 11) != 0) vars.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  const std::string project = h.project().string();
  int in = ::open(in_path.c_str(), O_RDONLY | O_CLOEXEC);
  int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();  // no controlling terminal: the session is headless whoever runs the tests
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (::chdir(project.c_str()) != 0) ::_exit(126);
    ::execve(DHARA_BINARY, argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(in);
  ::close(out);
  ::close(err);
  int status = 0;
  ::waitpid(pid, &status, 0);
  run_result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream o(out_path), e(err_path);
  r.out.assign(std::istreambuf_iterator<char>(o), {});
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

std::vector<json> json_lines(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

struct host_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{(actors::use_dhara_scheduler(cfg, 2), cfg)};
  testing::temp_home home;
};

}  // namespace

TEST_CASE_METHOD(host_fixture, "50 extensions start in parallel and all answer", "[runtime][host]") {
  for (int i = 0; i < 50; ++i) home.add_extension(i % 2 ? "echo-native" : "echo-py", "echo-" + std::to_string(i));
  auto loaded = broker::load_policy(locations_of(home), false);
  REQUIRE(loaded);
  REQUIRE(loaded->extensions.size() == 50);
  {
    // libuv opens a process-wide signal pipe on its first spawn and keeps it: a warm-up
    // session first, so the count below shows what one session leaves behind.
    testing::temp_home warm;
    warm.add_extension("echo-native");
    auto warm_policy = broker::load_policy(locations_of(warm), false);
    REQUIRE(warm_policy);
    broker::extension_host warm_host(sys, *warm_policy);
    warm_host.start();
  }
  const std::map<int, std::string> fds_before = testing::open_fds();
  {
    broker::extension_host host(sys, *loaded);
    auto started = std::chrono::steady_clock::now();
    host.start();
    auto took = std::chrono::steady_clock::now() - started;
    WARN("50 extensions (25 python, 25 native) ready in "
         << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
    REQUIRE(host.extensions().size() == 50);
    for (const auto& info : host.extensions()) CHECK(info.state == actors::extension_state::ready);
    std::vector<broker::batch_call> calls;
    for (int i = 0; i < 50; ++i) {
      broker::batch_call c;
      c.id = i;
      c.tool = "echo-" + std::to_string(i) + "/echo";
      c.input = {{"text", "n" + std::to_string(i)}};
      calls.push_back(c);
    }
    std::FILE* out = std::tmpfile();
    auto sum = broker::run_batch(sys, host, calls, {.concurrency = 8, .session_id = "s", .cwd = home.project().string()}, out);
    CHECK(sum.ok == 50);
    CHECK(sum.exit_code == 0);
    std::fclose(out);
    host.shutdown();
    CHECK(host.loop().live_processes() == 0);
  }
  CHECK(testing::child_processes().empty());
  CHECK(testing::new_fds(fds_before) == std::vector<std::string>{});  // no descriptor leaked
}

TEST_CASE("only an interpreter found on PATH is run to ask where it lives, never an extension's own",
          "[host][sandbox]") {
  // The question runs the program outside any sandbox. A `python3` that an extension ships
  // in its folder is the extension's code: asked, it ran with all of dhara's rights (it read
  // ~/.ssh and /etc/shadow as root) before the session had started.
  testing::temp_home h;
  const fs::path folder = h.extensions() / "evil", user_bin = h.home() / "bin", marker = h.root / "ran-unsandboxed";
  fs::create_directories(folder);
  fs::create_directories(user_bin);
  const std::string script = "#!/bin/sh\necho \"$@\" >> '" + marker.string() + "'\nexec /usr/bin/python3 \"$@\"\n";
  for (const fs::path& p : {folder / "python3", user_bin / "python3"}) {
    std::ofstream(p) << script;
    fs::permissions(p, fs::perms::owner_all);
  }
  broker::interpreter_cache from_extension("/usr/bin:/bin");
  auto own = from_extension.resolve("./python3", folder.string());
  REQUIRE(own);
  CHECK(*own == fs::canonical(folder / "python3").string());  // itself, run only in its sandbox
  CHECK_FALSE(fs::exists(marker));
  // On PATH, outside the extension's folder (a pyenv shim): asked, and its answer taken.
  broker::interpreter_cache from_path(user_bin.string() + ":/usr/bin:/bin");
  auto shim = from_path.resolve("python3", folder.string());
  REQUIRE(shim);
  CHECK(fs::exists(marker));
  CHECK(shim->starts_with("/usr/"));
  // The same name on PATH, but inside the extension's folder: not asked.
  fs::remove(marker);
  broker::interpreter_cache path_into_folder(folder.string() + ":/usr/bin:/bin");
  auto inside = path_into_folder.resolve("python3", folder.string());
  REQUIRE(inside);
  CHECK(*inside == fs::canonical(folder / "python3").string());
  CHECK_FALSE(fs::exists(marker));
}

TEST_CASE("an interpreter on PATH that is an ELF program is not run to ask where it lives", "[host][sandbox]") {
  // It is what runs; and it may lie where an extension could have rewritten it (nvm's node in
  // a writable home), so running it outside any sandbox when a session starts would run that.
  // A copy of the system python3 in a venv-like tree, whose startup (a .pth file, read by
  // `site`) leaves a marker when it runs.
  const fs::path system_python = "/usr/bin/python3";
  if (!fs::exists(system_python)) {
    WARN("no /usr/bin/python3 to copy: skipped");
    return;
  }
  testing::temp_home h;
  const fs::path venv = h.root / "venv", marker = h.root / "ran-unsandboxed";
  fs::create_directories(venv / "bin");
  fs::copy_file(fs::canonical(system_python), venv / "bin" / "python3");
  std::ofstream(venv / "pyvenv.cfg") << "home = /usr/bin\n";
  const std::string version = [&] {  // python3.11: where `site` looks for .pth files
    std::string name = fs::canonical(system_python).filename().string();
    return name.starts_with("python3.") ? name : std::string("python3");
  }();
  fs::create_directories(venv / "lib" / version / "site-packages");
  std::ofstream(venv / "lib" / version / "site-packages" / "marker.pth")
      << "import os; open('" << marker.string() << "', 'a').close()\n";
  // The tree works as meant: run directly, the copy leaves the marker.
  REQUIRE(std::system(((venv / "bin" / "python3").string() + " -c pass").c_str()) == 0);
  REQUIRE(fs::exists(marker));
  fs::remove(marker);
  broker::interpreter_cache cache((venv / "bin").string() + ":/usr/bin:/bin");
  auto exe = cache.resolve("python3", h.project().string());
  REQUIRE(exe);
  CHECK(*exe == (venv / "bin" / "python3").string());
  CHECK_FALSE(fs::exists(marker));
}

TEST_CASE("a relative or non-file ELF loader is granted nothing", "[host][sandbox]") {
  // The kernel finds a relative PT_INTERP from the folder the program starts in (its
  // extension's folder); dhara resolved it from its own and granted whatever that named.
  testing::temp_home h;
  const std::string real = sandbox::elf_interpreter("/bin/true");
  REQUIRE_FALSE(real.empty());
  CHECK(real.ends_with("ld-linux-x86-64.so.2"));
  std::ifstream in("/bin/true", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string abs_loader = "/lib64/ld-linux-x86-64.so.2";
  const auto at = bytes.find(abs_loader);
  REQUIRE(at != std::string::npos);
  auto patched = [&](const std::string& loader) {
    std::string b = bytes;
    REQUIRE(loader.size() <= abs_loader.size());
    b.replace(at, abs_loader.size(), loader + std::string(abs_loader.size() - loader.size(), '\0'));
    const fs::path p = h.root / ("true-" + std::to_string(loader.size()));
    std::ofstream(p, std::ios::binary) << b;
    return p.string();
  };
  fs::create_directories(h.project() / "src");
  fs::create_directories(h.project() / "lib64");  // a file the relative loader below names from here
  std::ofstream(h.project() / "lib64/ld-linux-x86-64.so.2") << "not a loader\n";
  struct back_to {  // the tests after this one run where they started, even when a check fails
    fs::path was = fs::current_path();
    ~back_to() { fs::current_path(was); }
  } restore;
  fs::current_path(h.project());  // where dhara resolved the relative loader from
  CHECK(sandbox::elf_interpreter(patched("src")).empty());
  CHECK(sandbox::elf_interpreter(patched("lib64/ld-linux-x86-64.so.2")).empty());
  CHECK(sandbox::elf_interpreter(patched("/tmp")).empty());  // a folder
  CHECK(sandbox::elf_interpreter(patched(abs_loader)) == real);
}

TEST_CASE("a batch line that is not a call says what keeps it from being one", "[host][batch]") {
  const auto calls = broker::parse_batch(
      "[1]\n"
      "{\"input\": {}}\n"
      "{\"tool\": 5}\n"
      "{\"tool\": \"echo\", \"input\": \"text\", \"id\": \"mine\"}\n"
      "{\"tool\": \"echo\", \"extension\": [\"x\"]}\n"
      "{\"tool\": \"echo\", \"input\": {}, \"extension\": \"echo-py\", \"more\": 1}\n");
  REQUIRE(calls.size() == 6);
  const std::string shape = R"( (a call is {"tool": "name", "input": {...}} with optional "extension" and "id"))";
  const std::vector<std::string> why = {
      "batch line 1 is not a call: it is a JSON array, not an object",
      "batch line 2 is not a call: it names no \"tool\"",
      "batch line 3 is not a call: \"tool\" must be a string, got number",
      "batch line 4 is not a call: \"input\" must be an object, got string",
      "batch line 5 is not a call: \"extension\" must be a string, got array",
  };
  for (std::size_t i = 0; i < why.size(); ++i) {
    CAPTURE(i);
    CHECK(calls[i].error_code == io::rpc_error::invalid_request);
    CHECK(calls[i].error_message == why[i] + shape);
  }
  CHECK(calls[3].id == "mine");  // the line's own id, even on a line that is not a call
  // What it could read is kept for its result line: a string tool, a string extension.
  CHECK((calls[0].tool.empty() && calls[1].tool.empty() && calls[2].tool.empty()));
  CHECK((calls[3].tool == "echo" && calls[3].extension.empty()));
  CHECK((calls[4].tool == "echo" && calls[4].extension.empty()));
  CHECK(calls[3].input == nlohmann::json::object());  // never the bad input
  CHECK(calls[5].error_code == 0);  // members it does not know are left alone
  CHECK(calls[5].tool == "echo");
  CHECK(calls[5].extension == "echo-py");
}

TEST_CASE_METHOD(host_fixture, "a crash fails only its own call in a concurrent batch", "[runtime][host]") {
  home.add_extension("crash");
  home.add_extension("echo-py");
  home.add_extension("echo-node");
  auto loaded = broker::load_policy(locations_of(home), false);
  REQUIRE(loaded);
  broker::extension_host host(sys, *loaded);
  host.start();
  auto calls = broker::parse_batch(
      "{\"tool\": \"sleep\", \"extension\": \"echo-py\", \"input\": {\"ms\": 300}}\n"
      "{\"tool\": \"crash\"}\n"
      "\n"
      "{\"tool\": \"echo-node/echo\", \"input\": {\"text\": \"fine\"}, \"id\": \"n\"}\n"
      "not json\n"
      "{\"input\": {}}\n"
      "{\"tool\": \"nope\"}\n"
      "{\"tool\": \"echo\", \"extension\": \"echo-py\", \"input\": \"text\"}\n");
  REQUIRE(calls.size() == 7);
  std::FILE* out = std::tmpfile();
  auto sum = broker::run_batch(sys, host, calls, {.concurrency = 4, .session_id = "s", .cwd = home.project().string()}, out);
  std::rewind(out);
  std::string text;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, out)) text.append(buf, n);
  std::fclose(out);
  std::map<std::string, json> by_id;
  for (const json& line : json_lines(text)) by_id[line["id"].dump()] = line;
  REQUIRE(by_id.size() == 7);
  CHECK(by_id["1"]["status"] == "ok");                       // echo-py sleep, concurrent with the crash
  CHECK(by_id["2"]["status"] == "error");
  CHECK(by_id["2"]["error"]["code"] == -32003);
  CHECK(by_id["2"]["error"]["data"]["exitCode"] == 3);
  CHECK(by_id["\"n\""]["result"]["content"][0]["text"] == "fine");
  CHECK(by_id["5"]["error"]["code"] == -32700);              // blank line 3 still counted
  CHECK(by_id["6"]["error"]["code"] == -32600);
  CHECK((by_id["6"]["tool"] == "" && by_id["6"]["extension"].is_null()));  // nothing to name
  CHECK(by_id["7"]["error"]["code"] == -32601);
  // A line that is not a call names the tool and extension it could read; it is not run.
  CHECK(by_id["8"]["status"] == "error");
  CHECK(by_id["8"]["error"]["code"] == -32600);
  CHECK(by_id["8"]["tool"] == "echo");
  CHECK(by_id["8"]["extension"] == "echo-py");
  CHECK(sum.exit_code == 4);
  // The next call to the crashed extension runs on its restarted process.
  std::FILE* again = std::tmpfile();
  auto next = broker::run_batch(sys, host, broker::parse_batch("{\"tool\": \"ok\"}\n"), {.concurrency = 1, .session_id = "s", .cwd = home.project().string()}, again);
  std::fclose(again);
  CHECK(next.ok == 1);
  CHECK(next.exit_code == 0);
  host.shutdown();
}

// The lines a batch wrote to `out`, by their id.
std::map<std::string, json> lines_by_id(std::FILE* out) {
  std::rewind(out);
  std::string text;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, out)) text.append(buf, n);
  std::map<std::string, json> by_id;
  for (const json& line : json_lines(text)) by_id[line["id"].dump()] = line;
  return by_id;
}

TEST_CASE_METHOD(host_fixture, "a batch whose checker or supervisor goes down ends and each call says why", "[runtime][host]") {
  home.add_extension("echo-py");
  auto loaded = broker::load_policy(locations_of(home), false);
  REQUIRE(loaded);
  broker::extension_host host(sys, *loaded);
  host.start();
  const broker::batch_options options{.concurrency = 2, .session_id = "s", .cwd = home.project().string()};
  {
    // Killed while its calls sleep (or before they reach it): the batch must not wait for the
    // extension. The supervisor answers the calls it holds as it ends; a call sent after that
    // fails on its down message.
    auto sup = host.supervisor("echo-py");
    std::thread killer;
    broker::batch_options o = options;
    o.on_start = [&](std::function<void()>) {
      killer = std::thread([sup] {
        std::this_thread::sleep_for(300ms);
        caf::anon_send_exit(sup, caf::exit_reason::kill);
      });
    };
    std::FILE* out = std::tmpfile();
    auto sum = broker::run_batch(sys, host,
                                 broker::parse_batch("{\"tool\": \"sleep\", \"input\": {\"ms\": 5000}}\n"
                                                     "{\"tool\": \"sleep\", \"input\": {\"ms\": 5000}}\n"),
                                 o, out);
    killer.join();
    auto by_id = lines_by_id(out);
    std::fclose(out);
    REQUIRE(by_id.size() == 2);
    for (const auto& [id, line] : by_id) {
      CAPTURE(line.dump());
      CHECK(line["error"]["code"] == io::rpc_error::crashed);
      const std::string message = line["error"]["message"];
      CHECK((message == "extension 'echo-py' lost its supervisor; the call did not finish" ||
             message.starts_with("the extension's supervisor is gone: ")));
    }
    CHECK(sum.error == 2);
    CHECK(sum.exit_code == 4);
  }
  {
    // The checker gone: the call is denied at the gate, with the reason.
    auto checker = host.checker("echo-py");
    caf::anon_send_exit(checker, caf::exit_reason::kill);
    caf::scoped_actor self{sys};
    self->wait_for(checker);
    std::FILE* out = std::tmpfile();
    auto sum = broker::run_batch(sys, host, broker::parse_batch("{\"tool\": \"echo\", \"input\": {\"text\": \"x\"}}\n"),
                                 options, out);
    auto by_id = lines_by_id(out);
    std::fclose(out);
    REQUIRE(by_id.size() == 1);
    const json& line = by_id.begin()->second;
    CAPTURE(line.dump());
    CHECK(line["status"] == "denied");
    CHECK(line["error"]["message"].get<std::string>().rfind("the capability checker failed: ", 0) == 0);
    CHECK(sum.denied == 1);
    CHECK(sum.exit_code == 3);
  }
  host.shutdown();
}

TEST_CASE_METHOD(host_fixture, "dhara run prints one result per call and exits by precedence", "[runtime][cli]") {
  home.add_extension("echo-py");
  home.add_extension("crash");
  auto ok = run_dhara(home, {"run", "--calls", "-"}, "{\"tool\": \"echo\", \"input\": {\"text\": \"hi\"}}\n");
  CHECK(ok.code == 0);
  auto lines = json_lines(ok.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["status"] == "ok");
  CHECK(lines[0]["extension"] == "echo-py");
  CHECK(lines[0]["result"]["content"][0]["text"] == "hi");
  CHECK(ok.err.find("dhara: 1 call in ") != std::string::npos);  // one call, in words

  auto failed = run_dhara(home, {"run", "--calls", "-"}, "{\"tool\": \"crash\"}\n{\"tool\": \"echo\", \"input\": {\"text\": \"x\"}}\n");
  CHECK(failed.code == 4);
  CHECK(json_lines(failed.out).size() == 2);

  auto usage = run_dhara(home, {"run", "--calls", "/nonexistent/calls.jsonl"}, "");
  CHECK(usage.code == 2);
  CHECK(usage.err.find("/nonexistent/calls.jsonl") != std::string::npos);

  home.add_extension("fs-tool");
  auto list = run_dhara(home, {"extensions", "list", "--json"}, "");
  CHECK(list.code == 0);
  auto listed = json::parse(list.out);
  REQUIRE(listed.size() == 3);
  CHECK(listed[0]["name"] == "crash");
  CHECK(listed[1]["state"] == "ready");
  CHECK(listed[2]["state"] == "blocked");  // fs-tool: filesystem:read not approved
  CHECK(listed[2]["reason"].get<std::string>().find("approve fs-tool") != std::string::npos);
  CHECK(listed[2]["tools"] == json::array({"read"}));
  CHECK(listed[2]["refusedTools"].contains("overreach"));
}

TEST_CASE("links on the way to a path are named where they really are", "[host][sandbox]") {
  testing::temp_home h;
  const fs::path r = fs::canonical(h.root);
  fs::create_directories(r / "data" / "u" / "dotfiles" / "dhara");
  fs::create_directories(r / "links");
  fs::create_symlink(r / "data" / "u", r / "links" / "u");                      // absolute
  fs::create_symlink("dotfiles/dhara", r / "data" / "u" / ".dhara");            // relative
  fs::create_symlink("../u/./.dhara/../dotfiles", r / "data" / "u" / "dots");  // relative, with ..
  using v = std::vector<std::string>;
  CHECK(sandbox::links_on_the_way((r / "links/u/.dhara/config.json").string()) ==
        v{(r / "links/u").string(), (r / "data/u/.dhara").string()});
  CHECK(sandbox::links_on_the_way((r / "links/u/dots/dhara").string()) ==
        v{(r / "links/u").string(), (r / "data/u/dots").string(), (r / "data/u/.dhara").string()});
  CHECK(sandbox::links_on_the_way((r / "data/u/dotfiles/dhara/x").string()).empty());
  CHECK(sandbox::links_on_the_way((r / "nowhere/links/u").string()).empty());  // stops where nothing is
  fs::create_symlink("loop", r / "loop");
  CHECK(sandbox::links_on_the_way((r / "loop/x").string()).size() == 40);  // a loop ends at the kernel's limit
}
