// Session set-up shared by the commands that run extensions.
#include "cli/session.hpp"

#include <cstdio>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "io/log.hpp"

namespace dhara::cli {

session::~session() {
  if (host) host->shutdown();  // every process gone and the loop joined before the actors end
  host.reset();
  sys.reset();
}

std::unique_ptr<session> open_session(const global_options& g, int& exit_code) {
  auto where = io::discover_locations();
  if (!where) {
    std::fprintf(stderr, "dhara: %s\n", where.err().message.c_str());
    exit_code = 2;
    return nullptr;
  }
  io::init_logging(where->dhara_home, g.verbose);
  auto loaded = broker::load_policy(*where, /*interactive=*/false);
  if (!loaded) {
    std::fprintf(stderr, "dhara: %s\n", loaded.err().message.c_str());
    exit_code = 2;
    return nullptr;
  }
  for (const std::string& w : loaded->warnings) spdlog::warn("{}", w);
  auto s = std::make_unique<session>();
  s->policy = std::move(*loaded);
  // Two cores: two workers, and "sharing" so idle workers do not burn CPU polling.
  s->cfg.set("scheduler.max-threads", 2);
  s->cfg.set("scheduler.policy", caf::atom("sharing"));
  s->sys = std::make_unique<caf::actor_system>(s->cfg);
  s->host = std::make_unique<broker::extension_host>(*s->sys, s->policy);
  s->host->start();
  for (const auto& info : s->host->extensions())
    if (info.state == actors::extension_state::failed)
      spdlog::warn("extension '{}' failed to start: {}", info.name, info.reason);
  exit_code = 0;
  return s;
}

}  // namespace dhara::cli
