// `dhara sandbox exec --extension NAME -- CMD…`: runs a command under an extension's OS sandbox
// profile (what its process would be allowed), for debugging a profile or an extension.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "broker/extension_host.hpp"
#include "broker/policy_loader.hpp"
#include "cli/commands.hpp"
#include "io/files.hpp"
#include "policy/sandbox_profile.hpp"
#include "policy/text.hpp"
#include "sandbox/launcher.hpp"

extern char** environ;

namespace dhara::cli {
namespace {

struct sandbox_exec_options {
  std::string extension;
  std::vector<std::string> command;
};

// Runs argv with env, waits, and returns its exit status (128+N after signal N).
int run_and_wait(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  // The terminal's Ctrl-C reaches the command (same process group); dhara waits for it.
  struct sigaction ignore{}, old_int{}, old_quit{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, &old_int);
  ::sigaction(SIGQUIT, &ignore, &old_quit);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGQUIT, &old_quit, nullptr);
    ::execve(args[0], args.data(), envp.data());
    // Only async-signal-safe calls after the fork: write(2), not stdio.
    const char* what = "dhara: cannot run ";
    (void)!::write(2, what, std::strlen(what));
    (void)!::write(2, args[0], std::strlen(args[0]));
    (void)!::write(2, "\n", 1);
    ::_exit(126);
  }
  int status = 0;
  if (pid > 0)
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGQUIT, &old_quit, nullptr);
  if (pid < 0) {
    std::perror("dhara: fork");
    return 126;
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

int sandbox_exec(const sandbox_exec_options& o) {
  auto where = io::discover_locations();
  if (!where) {
    std::fprintf(stderr, "dhara: %s\n", where.err().message.c_str());
    return 2;
  }
  auto loaded = broker::load_policy(*where, false);
  if (!loaded) {
    std::fprintf(stderr, "dhara: %s\n", loaded.err().message.c_str());
    return 2;
  }
  const policy::policy_snapshot& snap = *loaded->snapshot;
  auto it = snap.extensions.find(o.extension);
  if (it == snap.extensions.end()) {
    std::vector<std::string_view> names;
    for (const auto& [name, e] : snap.extensions) names.push_back(name);
    std::fprintf(stderr, "dhara: no extension named '%s' is installed%s; 'dhara extensions list' shows them\n",
                 policy::terminal_safe(o.extension).c_str(), policy::terminal_safe(policy::did_you_mean(o.extension, names)).c_str());
    return 2;
  }
  const policy::extension_policy& ext = it->second;
  const char* path_env = std::getenv("PATH");
  broker::interpreter_cache interpreters(path_env ? path_env : "/usr/local/bin:/usr/bin:/bin");
  auto exe = interpreters.resolve(o.command.front(), where->cwd);
  if (!exe) {
    std::fprintf(stderr, "dhara: %s: command not found (%s)\n", o.command.front().c_str(), exe.err().message.c_str());
    return 127;
  }
  std::vector<std::string> argv = o.command;
  argv.front() = *exe;
  const bool full_env = snap.level == policy::security_level::yolo ||
                        policy::sandbox_granted(ext).contains(policy::capability::secrets_env);
  std::vector<std::string> env = broker::extension_environment(ext.name, full_env, environ);
  if (snap.level == policy::security_level::yolo) {
    std::fprintf(stderr, "dhara: the security level is yolo: extensions run without an OS sandbox, "
                         "and so does this command\n");
    return run_and_wait(argv, env);
  }

  // <private>/profile.json is the launcher's input; <private>/tmp is the extension's temp
  // dir, the only part of the folder the profile grants.
  auto dir = sandbox::make_private_dir("dhara-sandbox-");
  if (!dir) {
    std::fprintf(stderr, "dhara: %s\n", dir.err().message.c_str());
    return 126;
  }
  const sandbox::private_dir held = std::move(*dir);  // removed on return
  std::string tmp = held.path() + "/tmp";
  if (::mkdir(tmp.c_str(), 0700) != 0) {
    std::perror("dhara: cannot create the private temp dir");
    return 126;
  }
  policy::sandbox_profile profile = policy::compute_sandbox_profile(sandbox::sandbox_inputs_here(snap, ext, *exe, tmp));
  for (const std::string& u : profile.unenforced) std::fprintf(stderr, "dhara: note: %s\n", u.c_str());
  if (std::string link = sandbox::replaceable_link(profile, sandbox::links_to_guard(snap)); !link.empty()) {
    std::fprintf(stderr, "dhara: the sandbox cannot be applied: %s\n", link.c_str());
    return 126;
  }
  auto file = sandbox::write_profile_file(profile, held.path());
  if (!file) {
    std::fprintf(stderr, "dhara: %s\n", file.err().message.c_str());
    return 126;
  }
  std::string launcher = sandbox::launcher_path();
  if (launcher.empty() || ::access(launcher.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "dhara: the sandbox launcher %s is missing (it is built and installed next to dhara)\n",
                 launcher.empty() ? "dhara-launch" : launcher.c_str());
    return 126;
  }
  std::erase_if(env, [](const std::string& kv) { return kv.starts_with("TMPDIR="); });
  env.push_back("TMPDIR=" + tmp);
  return run_and_wait(policy::launcher_argv(launcher, *file, argv), env);
}

}  // namespace

void add_sandbox_command(CLI::App& app, command_context& ctx) {
  auto* sandbox = app.add_subcommand("sandbox", "The OS sandbox extensions run in");
  sandbox->require_subcommand(1);
  auto o = std::make_shared<sandbox_exec_options>();
  auto* exec = sandbox->add_subcommand("exec", "Run a command under an extension's OS sandbox profile");
  exec->add_option("--extension", o->extension, "The extension whose approved capabilities apply")->required();
  exec->add_option("command", o->command, "The command and its arguments (after --)")->required();
  exec->footer("Exit codes: the command's own; 126 the sandbox cannot be applied; 127 command not found;\n"
               "2 usage error or unknown extension.\n"
               "Examples:\n  dhara sandbox exec --extension web-tools -- python3 -c 'import socket'\n"
               "  dhara sandbox exec --extension std -- /bin/cat /etc/shadow");
  exec->callback([&ctx, o] { ctx.action = [o] { return sandbox_exec(*o); }; });
}

}  // namespace dhara::cli
