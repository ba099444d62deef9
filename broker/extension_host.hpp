// The extensions of one session: starts a supervisor per loaded extension (all in
// parallel), waits for their handshakes, and keeps the tool registry that routes a tool
// name (bare when unique, `extension/tool` always) to its supervisor.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <nlohmann/json.hpp>

#include "actors/approval.hpp"
#include "actors/audit_writer.hpp"
#include "actors/checker.hpp"
#include "actors/extension_supervisor.hpp"
#include "actors/permissions_store.hpp"
#include "broker/policy_loader.hpp"
#include "io/sandbox_support.hpp"
#include "sandbox/launcher.hpp"

namespace dhara::broker {

/// A tool the registry knows. Every call carries a copy, so it holds only what a call needs:
/// the declaration itself (schema and all) stays in the extension's `extension_info::tools`.
struct registered_tool {
  std::string extension;
  std::string name;
  policy::capability_set required;  ///< what a call needs approved (DESIGN §9 tool-call gate)
};

/// Why a tool name did not resolve: -32601 with a sentence and, for a skipped or failed
/// extension, its reason.
struct resolve_error {
  std::string message;
  std::string reason;
};

/// Resolves interpreters once per session: `python3`/`python`/`node` past wrapper scripts
/// (pyenv shims) to the real executable, anything else through PATH.
class interpreter_cache {
 public:
  explicit interpreter_cache(std::string path_env) : path_env_(std::move(path_env)) {}
  /// The absolute path for argv[0], or an error sentence.
  policy::result<std::string> resolve(const std::string& argv0, const std::string& cwd);

 private:
  std::string path_env_;
  std::map<std::string, std::string> cache_;
};

/// The environment an extension gets (DESIGN §5): PATH, HOME, LANG, LC_*, TERM, TMPDIR from
/// `environ`, plus DHARA_EXTENSION=<name>; everything only with secrets:env approved.
std::vector<std::string> extension_environment(const std::string& name, bool full, char** environ_);

/// How a session treats the human.
struct host_options {
  /// Ask on the terminal for pending capabilities when the extensions load (an interactive
  /// CLI session). `serve` asks its client at the first call instead.
  bool prompt_at_load = true;
  /// Written into the audit entries of host requests; empty: `session-<pid>`. The batch and
  /// serve pass the id their tool calls carry, so one session reads as one in the audit.
  std::string session_id;
  /// The OS sandbox launcher (`dhara-launch`, DESIGN §4): every extension is started through
  /// it with its profile unless the level is yolo. Empty: extensions run without an OS
  /// sandbox — only for the library's own tests; every dhara command sets it.
  std::string sandbox_launcher;
  /// Looked at every 100 ms while the session waits for the extensions' handshakes: a signal
  /// number (Ctrl-C) ends the wait, and start() returns with interrupted() set. Empty: the
  /// wait is not interrupted.
  std::function<int()> interrupted;
};

struct kernel_follower_state;  // what the kernel follower keeps (extension_host.cpp)

class extension_host {
 public:
  extension_host(caf::actor_system& sys, const loaded_policy& policy, host_options options = {});
  ~extension_host();

  /// Starts every loaded extension in parallel; returns once each is ready or failed and, in
  /// an interactive session, once the user answered the capability prompts.
  void start();
  /// True when the user answered `q` to a prompt: the session ends with exit code 130.
  bool quit_requested() const { return quit_; }
  /// The signal that ended start()'s wait for the handshakes (host_options::interrupted), or 0.
  int interrupted() const { return interrupted_; }
  /// Every extension's state, in name order (after start()).
  const std::vector<actors::extension_info>& extensions() const { return infos_; }
  /// Extensions that were not loaded, with the reason.
  const std::vector<skipped_extension>& skipped() const { return policy_.skipped; }
  /// Resolves a tool name, optionally within one extension.
  std::variant<registered_tool, resolve_error> resolve(const std::string& tool,
                                                       const std::string& extension) const;
  /// The supervisor of a started extension (invalid handle when unknown).
  actors::supervisor_actor supervisor(const std::string& extension) const;
  /// The checker for an extension's calls and host requests: one checker per core, each
  /// holding its own snapshot; an extension always uses the same one.
  actors::checker_actor checker(const std::string& extension) const {
    return checkers_[std::hash<std::string>{}(extension) % checkers_.size()];
  }
  /// The permissions store (it pushes a new snapshot to the checker when the file changes).
  actors::permissions_store_actor permissions_store() const { return store_; }
  /// Who answers a pending capability at check time (verdict `ask`): the terminal approval
  /// actor or a serve client. Without one, a pending capability is denied.
  void set_approver(const actors::hitl_actor& approver);
  /// The audit writer's append interface (for decisions made outside the checker: the user
  /// rejecting a call or a result).
  actors::audit_sink_actor audit() const { return audit_; }
  /// Tools refused at load (they require more than their manifest declares), with the reason.
  const std::map<std::string, std::string>& refused_tools() const { return refused_; }
  /// Shuts every extension down (shutdown request, then the kill chain) and stops the loop.
  void shutdown();
  /// The actor that starts an extension again in a new OS sandbox profile when what it may
  /// do changes in the session (permissions.json changed; `(add_atom, extension, capability)`
  /// from serve's `always`, replying once the new profile is on its way). Invalid without
  /// a sandbox.
  caf::actor kernel_follower() const { return kernel_follower_; }

 private:
  void ask_for_pending_capabilities();
  /// Wraps `sc.argv` in the sandbox launcher with this extension's profile, and sets how the
  /// programs it has dhara spawn are confined (the same way) in `spawns`. Returns why the
  /// extension must not start (the kernel cannot enforce what is required), or "".
  std::string confine(actors::supervisor_config& sc, const policy::policy_snapshot& snap, const std::string& name,
                      const std::string& exe, actors::spawn_confinement& spawns);

 public:
  /// The loop, for tests that count live processes.
  const io::event_loop& loop() const { return *loop_; }

 private:
  caf::actor_system& sys_;
  const loaded_policy& policy_;
  std::shared_ptr<io::event_loop> loop_;
  std::map<std::string, actors::supervisor_actor> supervisors_;
  actors::audit_writer_actor audit_;
  std::vector<actors::checker_actor> checkers_;
  actors::permissions_store_actor store_;
  actors::host_api_actor host_api_;
  std::map<std::string, std::string> refused_;  // "ext/tool" → reason
  std::vector<actors::extension_info> infos_;
  std::map<std::string, std::vector<registered_tool>> by_bare_name_;
  std::map<std::string, registered_tool> by_qualified_name_;
  host_options options_;
  std::optional<io::sandbox_support> kernel_;  // probed at the first confinement
  std::vector<sandbox::private_dir> private_dirs_;  // extensions' temp dirs, removed at shutdown
  std::optional<std::vector<sandbox::guarded_link>> guarded_links_;  // found at the first confinement
  std::shared_ptr<kernel_follower_state> kernel_follow_;  // filled as extensions are confined
  caf::actor kernel_follower_;
  bool stopped_ = false;
  bool quit_ = false;
  int interrupted_ = 0;  // the signal that ended the wait for the handshakes
};

}  // namespace dhara::broker
