// What every command that runs extensions sets up: locations, logging, the loaded policy,
// an actor system tuned for this machine, and the extension host.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "broker/extension_host.hpp"
#include "broker/policy_loader.hpp"
#include "cli/commands.hpp"

namespace dhara::cli {

/// A started session. Member order is destruction order in reverse: the host (which holds
/// actor handles and the event loop) goes before the actor system.
struct session {
  broker::loaded_policy policy;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<broker::extension_host> host;
  ~session();
};

/// How a command wants its session.
struct session_options {
  std::string cwd;                  ///< the session's working directory; empty: the process's
  std::optional<bool> interactive;  ///< who may be asked; default: a terminal is there and no --no-prompt
  bool prompt_at_load = true;       ///< ask about pending capabilities on the terminal at load
  std::string* error = nullptr;     ///< set: the failure sentence goes here instead of stderr
  std::string session_id;           ///< for the audit entries of host requests (see host_options)
  std::function<int()> interrupted;  ///< a signal that ends the wait for the extensions (host_options)
};

/// Loads the policy and starts every extension. On failure prints one sentence to stderr and
/// returns the exit code (2: configuration) in `exit_code`.
std::unique_ptr<session> open_session(const global_options& g, int& exit_code, const session_options& options = {});

}  // namespace dhara::cli
