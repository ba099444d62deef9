// `dhara run --calls FILE|-`: the headless batch (auto mode).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <cstring>
#include <string>

#include "broker/batch.hpp"
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "cli/session.hpp"
#include "io/files.hpp"

namespace dhara::cli {
namespace {

// Reads all of stdin (the batch) with a size limit.
bool read_stdin(std::string& out) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > io::max_state_file_bytes * 16) return false;
  }
}

}  // namespace

namespace {

int run_calls(const global_options& g, const std::string& calls_file, std::size_t concurrency, const std::string& mode) {
  if (mode != "auto") {
    std::fprintf(stderr, "dhara: --mode %s needs a terminal and arrives with the CLI issue; use --mode auto\n", mode.c_str());
    return 2;
  }
  std::string text;
  if (calls_file == "-") {
    if (!read_stdin(text)) {
      std::fprintf(stderr, "dhara: cannot read the calls from stdin: %s\n", std::strerror(errno));
      return 2;
    }
  } else {
    auto t = io::read_text_file(calls_file, io::max_state_file_bytes * 16);
    if (!t) {
      std::fprintf(stderr, "dhara: --calls: %s\n", t.err().message.c_str());
      return 2;
    }
    text = std::move(*t);
  }
  auto calls = broker::parse_batch(text);  // usage errors are found before any extension starts
  int rc = 0;
  auto s = open_session(g, rc);
  if (!s) return rc;
  broker::batch_options opts;
  opts.concurrency = concurrency;
  opts.cwd = s->policy.where.cwd;
  opts.session_id = "batch-" + std::to_string(::getpid());
  std::size_t total = calls.size();
  broker::batch_summary sum = broker::run_batch(*s->sys, *s->host, std::move(calls), opts, stdout);
  std::fprintf(stderr, "dhara: %zu calls in %.2f s: %zu ok, %zu error, %zu denied, %zu cancelled\n", total, sum.seconds,
               sum.ok, sum.error, sum.denied, sum.cancelled);
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
              "130 you quit");
  run->callback([&ctx, o] {
    ctx.action = [&ctx, o] { return run_calls(ctx.g, o->calls_file, o->concurrency, o->mode); };
  });
}

}  // namespace dhara::cli
