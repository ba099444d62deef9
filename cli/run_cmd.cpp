// `dhara run --calls FILE|-`: the headless batch (auto mode).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "broker/batch.hpp"
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

}  // namespace dhara::cli
