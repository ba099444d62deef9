// `dhara run --calls FILE|-`: the headless batch (auto mode).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "broker/batch.hpp"
#include "cli/commands.hpp"
#include "cli/interrupt.hpp"
#include "cli/session.hpp"
#include "io/files.hpp"
#include "io/terminal.hpp"

namespace dhara::cli {
namespace {

// The most calls one batch reads (a file, stdin or a pipe).
constexpr std::size_t max_calls_bytes = io::max_state_file_bytes * 16;

// Reads all the calls from `fd`: a file, stdin, a pipe or a FIFO (`--calls <(…)`). "" or why
// they could not be read.
std::string read_calls(int fd, std::string& out) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::strerror(errno);
    if (n == 0) return {};
    if (out.size() + static_cast<std::size_t>(n) > max_calls_bytes) {
      return "they are more than " + std::to_string(max_calls_bytes >> 20) + " MiB; split them into several batches";
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
}

// The calls of `--calls FILE`: a regular file, or what a FIFO or `<(…)` (/dev/fd/N) carries.
// "" or one sentence saying why not and what to give instead.
std::string read_calls_file(const std::string& path, std::string& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    return "cannot open " + path + ": " + std::strerror(err) +
           (err == ENOENT ? "; give a file of calls, one JSON object a line, or - for stdin" : "");
  }
  struct stat st;
  std::string why;
  if (::fstat(fd, &st) != 0) why = "cannot look at " + path + ": " + std::strerror(errno);
  else if (S_ISDIR(st.st_mode)) why = path + " is a folder; give a file of calls, one JSON object a line";
  else if (std::string e = read_calls(fd, out); !e.empty()) why = "cannot read the calls from " + path + ": " + e;
  ::close(fd);
  return why;
}

}  // namespace

namespace {

int run_calls(const global_options& g, const std::string& calls_file, std::size_t concurrency, const std::string& mode) {
  broker::hitl_mode hitl = broker::hitl_mode::automatic;
  if (!broker::parse_hitl_mode(mode, hitl)) {
    std::fprintf(stderr, "dhara: --mode '%s' is not a mode; use auto, approve or review\n", mode.c_str());
    return 2;
  }
  // Approve and review ask a human at every call: refused at start without one (DESIGN §6).
  bool can_ask = !g.no_prompt && io::terminal_available();
  if (hitl != broker::hitl_mode::automatic && !can_ask) {
    std::fprintf(stderr, "dhara: --mode %s asks you about every call, but %s; run it in a terminal, or use --mode auto\n",
                 mode.c_str(), g.no_prompt ? "--no-prompt forbids asking" : "there is no terminal to ask on");
    return 2;
  }
  std::string text;
  if (calls_file == "-") {
    if (std::string why = read_calls(0, text); !why.empty()) {
      std::fprintf(stderr, "dhara: cannot read the calls from stdin: %s\n", why.c_str());
      return 2;
    }
  } else if (std::string why = read_calls_file(calls_file, text); !why.empty()) {
    std::fprintf(stderr, "dhara: --calls: %s\n", why.c_str());
    return 2;
  }
  auto calls = broker::parse_batch(text);  // usage errors are found before any extension starts
  int rc = 0;
  session_options so;
  so.session_id = "batch-" + std::to_string(::getpid());
  interrupt_watch interrupts;  // before the actor system starts its threads
  so.interrupted = [&interrupts] { return interrupts.take(); };
  auto s = open_session(g, rc, so);
  if (!s) return rc;
  broker::batch_options opts;
  opts.concurrency = concurrency;
  opts.cwd = s->policy.where.cwd;
  opts.session_id = so.session_id;
  opts.mode = hitl;
  opts.progress = hitl == broker::hitl_mode::automatic && ::isatty(2) == 1;
  if (can_ask) {
    // One approval actor owns the terminal: approve/review questions and pending capabilities.
    auto approver = actors::spawn_approval(*s->sys);
    opts.approver = approver;
    s->host->set_approver(approver);
  }
  std::size_t total = calls.size();
  // Ctrl-C / SIGTERM / SIGHUP interrupt the batch like `q`: the watch's thread waits for them,
  // and goes on through the session's end, which stops the extensions (a second signal exits).
  // The signal seen is shared with that thread, which outlives this frame's other locals.
  auto seen = std::make_shared<std::atomic<int>>(0);
  opts.on_start = [&interrupts, seen](std::function<void()> interrupt) {
    interrupts.keep_watching([seen, interrupt](int sig) {
      *seen = sig;
      interrupt();
    });
  };
  broker::batch_summary sum = broker::run_batch(*s->sys, *s->host, std::move(calls), opts, stdout);
  interrupts.keep_watching();  // when the batch never started: for the session's end
  const int signal_seen = *seen;
  if (signal_seen != 0) sum.exit_code = interrupt_watch::exit_code(signal_seen);
  if (sum.output_error != 0)
    std::fprintf(stderr, "dhara: the results could not all be written to standard output (%s); the calls ran and "
                 "the audit log holds every decision: 'dhara doctor --audit-log'\n", std::strerror(sum.output_error));
  std::fprintf(stderr, "dhara: %zu %s in %.2f s: %zu ok, %zu error, %zu denied, %zu rejected, %zu cancelled%s\n", total,
               total == 1 ? "call" : "calls", sum.seconds, sum.ok, sum.error, sum.denied, sum.rejected, sum.cancelled,
               !sum.quit ? "" : signal_seen != 0 ? " (interrupted)" : " (you quit)");
  return sum.exit_code;
}

}  // namespace

void add_run_command(CLI::App& app, command_context& ctx) {
  struct options {
    std::string calls_file, mode = "auto";
    std::size_t concurrency = 1;
  };
  auto o = std::make_shared<options>();
  auto* run = app.add_subcommand("run", "Run a batch of tool calls headless, one JSON result per line on stdout");
  run->add_option("--calls", o->calls_file, "File of calls, one JSON object a line ('-' for stdin)")->required();
  run->add_option("-j,--concurrency", o->concurrency, "Calls in flight at once")->check(CLI::Range(1, 1024));
  run->add_option("--mode", o->mode, "auto: run every call; approve: ask before each call; review: show each "
                                     "result and ask to continue (approve and review need a terminal)")
      ->check(CLI::IsMember({"auto", "approve", "review"}));
  run->footer("Examples:\n  echo '{\"tool\": \"echo\", \"input\": {\"text\": \"hi\"}}' | dhara run --calls -\n"
              "  dhara run --calls calls.jsonl -j 8\n  dhara run --calls calls.jsonl --mode approve\n"
              "Exit codes: 0 ok, 2 usage, 3 a call was denied or rejected, 4 a tool failed or an extension crashed, "
              "130 you quit (or Ctrl-C), 143 SIGTERM, 129 SIGHUP");
  run->callback([&ctx, o] {
    ctx.action = [&ctx, o] { return run_calls(ctx.g, o->calls_file, o->concurrency, o->mode); };
  });
}

}  // namespace dhara::cli
