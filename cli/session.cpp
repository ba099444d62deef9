// Session set-up shared by the commands that run extensions.
#include "cli/session.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/scheduler.hpp"
#include "cli/interrupt.hpp"
#include "io/log.hpp"
#include "sandbox/launcher.hpp"

namespace dhara::cli {

session::~session() {
  if (host) host->shutdown();  // every process gone and the loop joined before the actors end
  host.reset();
  sys.reset();
}

std::unique_ptr<session> open_session(const global_options& g, int& exit_code, const session_options& options) {
  auto fail = [&](const std::string& message) -> std::unique_ptr<session> {
    if (options.error) *options.error = message;
    else std::fprintf(stderr, "dhara: %s\n", message.c_str());
    exit_code = 2;
    return nullptr;
  };
  auto where = options.cwd.empty() ? io::discover_locations() : [&] {
    const char* home = std::getenv("HOME");
    const char* dhara_home = std::getenv("DHARA_HOME");
    return io::discover_locations(home ? home : "", dhara_home ? dhara_home : "", options.cwd);
  }();
  if (!where) return fail(where.err().message);
  io::init_logging(where->dhara_home, g.verbose);
  // A session may prompt when it has a terminal: stdin is one, or /dev/tty opens (stdin
  // carries the batch) — and --no-prompt is absent (DESIGN §9).
  bool interactive = false;
  if (options.interactive) {
    interactive = *options.interactive;
  } else if (!g.no_prompt) {
    interactive = ::isatty(0) == 1;
    if (!interactive) {
      int tty = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
      interactive = tty >= 0;
      if (tty >= 0) ::close(tty);
    }
  }
  auto loaded = broker::load_policy(*where, interactive);
  if (!loaded) return fail(loaded.err().message);
  for (const std::string& w : loaded->warnings) spdlog::warn("{}", w);
  auto s = std::make_unique<session>();
  s->policy = std::move(*loaded);
  // Two cores: two workers that never poll, and a message keeps to its sender's worker
  // (actors/scheduler.cpp).
  actors::use_dhara_scheduler(s->cfg, 2);
  s->sys = std::make_unique<caf::actor_system>(s->cfg);
  s->host = std::make_unique<broker::extension_host>(
      *s->sys, s->policy,
      broker::host_options{options.prompt_at_load, options.session_id, sandbox::launcher_path(), options.interrupted});
  s->host->start();
  if (s->host->quit_requested()) {
    exit_code = 130;  // the user quit at a prompt
    return nullptr;
  }
  if (int sig = s->host->interrupted()) {
    std::fprintf(stderr, "dhara: %s while the extensions started; no call ran\n",
                 sig == SIGTERM ? "stopped (SIGTERM)" : sig == SIGHUP ? "stopped (SIGHUP: the terminal closed)" : "interrupted");
    exit_code = interrupt_watch::exit_code(sig);
    return nullptr;
  }
  for (const auto& info : s->host->extensions())
    if (info.state == actors::extension_state::failed)
      spdlog::warn("extension '{}' failed to start: {}", info.name, info.reason);
  exit_code = 0;
  return s;
}

}  // namespace dhara::cli
