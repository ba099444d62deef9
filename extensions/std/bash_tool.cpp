// bash: runs one program without a shell. The program is located exactly as the gate's
// command rules located it (io::path_executable_locator with the same PATH and cwd) and that
// absolute path is exec'd, so what runs is what was approved. The child gets its own session
// (one process group to kill on timeout, cancel, or once it exits).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "extensions/std/tools.hpp"
#include "io/path_resolver.hpp"
#include "policy/command_rules.hpp"

extern char** environ;

namespace dhara::stdext {
namespace {

using clock = std::chrono::steady_clock;

constexpr std::int64_t default_timeout_ms = 60'000;
constexpr std::int64_t max_timeout_ms = 3'600'000;
constexpr std::size_t keep_bytes = 32 * 1024;  // of each stream: the first and the last this many
constexpr auto drain_after_exit = std::chrono::milliseconds(200);  // a detached grandchild may hold the pipe

// One output stream: its start and its end are kept, the middle is dropped.
struct capture {
  std::string head, tail;
  std::size_t total = 0;

  void add(const char* p, std::size_t n) {
    total += n;
    std::size_t h = std::min(n, keep_bytes - head.size());
    head.append(p, h);
    tail.append(p + h, n - h);
    if (tail.size() > 2 * keep_bytes) tail.erase(0, tail.size() - keep_bytes);
  }
  bool truncated() const { return total > head.size() + std::min(tail.size(), keep_bytes); }
  std::string text() const {
    std::string_view t = tail;
    if (t.size() > keep_bytes) t.remove_prefix(t.size() - keep_bytes);
    if (!truncated()) return head + std::string(t);
    return head + "\n[… " + std::to_string(total - head.size() - t.size()) + " bytes omitted …]\n" + std::string(t);
  }
};

// The argv from `command` (split on spaces and tabs) or `argv`; invalid_params or a refusal.
std::vector<std::string> argv_of(const json& input, std::string& refusal) {
  auto command = input.find("command"), argv = input.find("argv");
  if (command != input.end() && argv != input.end()) throw invalid_params("give either 'command' or 'argv', not both");
  if (command == input.end() && argv == input.end())
    throw invalid_params("'command' (a string) or 'argv' (an array of strings) is required");
  std::vector<std::string> out;
  if (command != input.end() && command->is_string()) {
    const std::string& s = command->get_ref<const std::string&>();
    // The gate refused these already; refusing again keeps a bypass of the gate harmless.
    if (policy::has_shell_metachar(s))
      refusal = "the command holds shell metacharacters (; & | $ ` < > ( ) { } or a newline); there is no shell: pass an argv array";
    else if (s.find_first_of("'\"\\") != std::string::npos)
      refusal = "the command holds quotes or backslashes; there is no shell to interpret them: pass an argv array";
    else if (std::any_of(s.begin(), s.end(), [](char c) { return (c >= 0 && c < 0x20 && c != '\t') || c == 0x7f; }))
      refusal = "the command holds control characters; pass an argv array";
    if (!refusal.empty()) return {};
    for (std::size_t i = 0; i < s.size();) {
      std::size_t start = s.find_first_not_of(" \t", i);
      if (start == std::string::npos) break;
      std::size_t end = s.find_first_of(" \t", start);
      out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
      i = end == std::string::npos ? s.size() : end;
    }
    if (out.empty()) refusal = "the command is empty";
    return out;
  }
  const json& list = command != input.end() ? *command : *argv;
  const char* key = command != input.end() ? "command" : "argv";
  bool ok = list.is_array() && !list.empty();
  for (const json& a : list.is_array() ? list : json::array()) {
    ok = ok && a.is_string() && !a.get_ref<const std::string&>().empty() &&
         a.get_ref<const std::string&>().find('\0') == std::string::npos;
    if (ok) out.push_back(a.get<std::string>());
  }
  if (!ok) throw invalid_params(std::string("'") + key + "' must be a non-empty array of non-empty strings");
  return out;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGPIPE: return "SIGPIPE";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGHUP: return "SIGHUP";
    default: return "another signal";
  }
}

// What the child reports on its status pipe before it dies: which step failed, and errno.
struct spawn_failure {
  char step;  // 'c': chdir, 'e': exec
  int err;
};

[[noreturn]] void child_fail(int status_fd, char step) {
  spawn_failure f{step, errno};
  (void)!::write(status_fd, &f, sizeof f);
  ::_exit(127);
}

// Between fork and exec only async-signal-safe calls: everything else was prepared before.
[[noreturn]] void child(const char* exe, char* const* argv, const char* cwd, int out_fd, int err_fd, int status_fd,
                        pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // if this extension is killed, the command dies too
  if (::getppid() != parent) ::_exit(127);
  ::setsid();
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &dfl, nullptr);  // the extension ignores it; the command must not
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd >= 0) ::dup2(null_fd, 0);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  if (::chdir(cwd) != 0) child_fail(status_fd, 'c');
  ::execve(exe, argv, environ);
  child_fail(status_fd, 'e');
}

// Reads what is there, at most 1 MiB a round so a flooding program cannot starve the timeout.
void read_ready(int& fd, capture& into) {
  char buf[65536];
  for (int round = 0; round < 16; ++round) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      into.add(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    ::close(fd);  // EOF or error: this stream is done
    fd = -1;
    return;
  }
}

}  // namespace

tool_result run_bash(const json& input, const call_context& ctx) {
  std::string refusal;
  std::vector<std::string> args = argv_of(input, refusal);
  std::int64_t timeout_ms = integer_input(input, "timeoutMs", 1, max_timeout_ms).value_or(default_timeout_ms);
  std::optional<std::string> cwd_input = string_input(input, "cwd");
  if (!refusal.empty()) return tool_failure(refusal);

  std::string cwd = ctx.cwd;
  if (cwd_input) {
    auto p = resolve_input_path(*cwd_input, ctx.cwd);
    if (!p) return tool_failure(p.err().message);
    cwd = p->real;
  }
  struct stat st;
  if (cwd.empty() || cwd.front() != '/') return tool_failure("the call has no absolute context.cwd to run in; pass cwd");
  if (::stat(cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return tool_failure("cannot run in '" + cwd_input.value_or(cwd) + "': it is not an existing folder");

  const char* path_env = std::getenv("PATH");  // the PATH dhara's checker searched too
  auto exe = io::path_executable_locator(path_env ? path_env : "/usr/bin:/bin", ctx.cwd).locate(args.front());
  if (!exe) return tool_failure(exe.err().message);

  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2], err[2], status[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return tool_failure(std::string("cannot create a pipe: ") + std::strerror(errno));
  if (::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(status, O_CLOEXEC) != 0) {
    for (int fd : {out[0], out[1]}) ::close(fd);
    return tool_failure(std::string("cannot create a pipe: ") + std::strerror(errno));
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) child(exe->c_str(), argv.data(), cwd.c_str(), out[1], err[1], status[1], parent);
  for (int fd : {out[1], err[1], status[1]}) ::close(fd);
  if (pid < 0) {
    for (int fd : {out[0], err[0], status[0]}) ::close(fd);
    return tool_failure(std::string("cannot start a process: ") + std::strerror(errno));
  }

  // The status pipe closes on a successful exec: from then on the child leads its own group.
  spawn_failure failed{};
  ssize_t got;
  do got = ::read(status[0], &failed, sizeof failed);
  while (got < 0 && errno == EINTR);
  ::close(status[0]);
  if (got == static_cast<ssize_t>(sizeof failed)) {
    ::waitpid(pid, nullptr, 0);
    for (int fd : {out[0], err[0]}) ::close(fd);
    return tool_failure(failed.step == 'c' ? "cannot enter '" + cwd + "': " + std::strerror(failed.err)
                                           : "cannot run '" + *exe + "': " + std::strerror(failed.err));
  }
  set_child_group(ctx.call, pid);
  if (ctx.call->cancelled) ::kill(-pid, SIGKILL);  // a cancel that came before the group was recorded

  for (int fd : {out[0], err[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));  // wakes the poll at exit; optional
  capture out_cap, err_cap;
  int streams[2] = {out[0], err[0]};
  auto deadline = clock::now() + std::chrono::milliseconds(timeout_ms);
  clock::time_point drain_until{};
  bool exited = false, timed_out = false;
  while (!(exited && streams[0] < 0 && streams[1] < 0)) {
    auto now = clock::now();
    if (exited && now >= drain_until) break;
    if (!exited && !timed_out && now >= deadline) {
      timed_out = true;
      ::kill(-pid, SIGKILL);
    }
    auto until = exited ? drain_until : timed_out ? now + std::chrono::milliseconds(50) : deadline;
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1;
    if (pidfd < 0) wait = std::min<long long>(wait, 50);  // no pidfd: look at the child now and then
    pollfd fds[3];
    nfds_t n = 0;
    for (int fd : streams)
      if (fd >= 0) fds[n++] = {fd, POLLIN, 0};
    if (pidfd >= 0 && !exited) fds[n++] = {pidfd, POLLIN, 0};
    ::poll(fds, n, static_cast<int>(std::min<long long>(wait, 60'000)));
    if (streams[0] >= 0) read_ready(streams[0], out_cap);
    if (streams[1] >= 0) read_ready(streams[1], err_cap);
    siginfo_t info{};
    if (!exited && ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) {
      exited = true;
      ::kill(-pid, SIGKILL);  // nothing the command started outlives it
      drain_until = clock::now() + drain_after_exit;
    }
  }
  set_child_group(ctx.call, 0);  // before reaping: from now on the pid may be reused
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  for (int fd : streams)
    if (fd >= 0) ::close(fd);
  if (pidfd >= 0) ::close(pidfd);
  if (ctx.call->cancelled) return cancelled();

  json exit_code = WIFEXITED(wstatus) ? json(WEXITSTATUS(wstatus)) : json(nullptr);
  json signal = WIFSIGNALED(wstatus) ? json(signal_name(WTERMSIG(wstatus))) : json(nullptr);
  std::string out_text = out_cap.text(), err_text = err_cap.text();
  std::string text = out_text;
  if (!err_text.empty()) {
    if (!text.empty() && text.back() != '\n') text.push_back('\n');
    text += "[stderr]\n" + err_text;
  }
  if (!text.empty() && text.back() != '\n') text.push_back('\n');
  if (timed_out) text += "[timed out after " + std::to_string(timeout_ms) + " ms; its process group was killed]";
  else if (!signal.is_null()) text += "[killed by " + signal.get<std::string>() + "]";
  else text += "[exit code " + std::to_string(exit_code.get<int>()) + "]";
  bool truncated = out_cap.truncated() || err_cap.truncated();
  json meta = {{"exitCode", exit_code}, {"signal", signal},   {"timedOut", timed_out},
               {"stdout", out_text},    {"stderr", err_text}, {"truncated", truncated}};
  bool failed_run = timed_out || exit_code.is_null() || exit_code.get<int>() != 0;
  return {std::move(text), failed_run, std::move(meta), 0, nullptr};
}

}  // namespace dhara::stdext
