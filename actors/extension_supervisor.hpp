// The extension supervisor: one actor per extension that owns its process — start and
// initialize handshake, tool calls with request-id mapping, progress, cancel and timeouts
// through the grace / SIGTERM / SIGKILL chain, crash reports and restarts with backoff.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/host_api.hpp"
#include "actors/messages.hpp"

namespace dhara::actors {

/// The supervisor's typed interface.
using supervisor_actor = caf::typed_actor<
    /// session → supervisor: run a tool call; replies when the extension answers, or with an
    /// error result: -32003 crashed, -32004 cancelled or timed out, -32601 failed extension.
    /// Sent with `send` and a ticket, the answer comes back as an ordinary message with it, or
    /// in a call_results with the other results of the same read of the extension's output.
    caf::replies_to<execute_atom, tool_call>::with<call_result>,
    /// session → supervisor: cancel by toolCallId; the call answers -32004 at once.
    caf::reacts_to<cancel_atom, std::string>,
    /// anyone → supervisor: state and tools; while starting, the reply waits until the
    /// extension is ready or has failed.
    caf::replies_to<status_atom>::with<extension_info>,
    /// session → supervisor: `shutdown` request, then the kill chain; replies true once the
    /// process is gone, then the actor quits.
    caf::replies_to<shutdown_atom>::with<bool>,
    /// io thread → supervisor: stdout lines of process generation N.
    caf::reacts_to<lines_atom, std::uint64_t, std::vector<std::string>>,
    /// io thread → supervisor: process generation N ended.
    caf::reacts_to<exited_atom, std::uint64_t, io::process_exit>,
    /// io thread → supervisor: process generation N could not be started.
    caf::reacts_to<spawnfail_atom, std::uint64_t, std::string>,
    /// self: the handshake (id 0) of generation N timed out, or (id -1) the earliest call
    /// deadline is due.
    caf::reacts_to<timeout_atom, std::uint64_t, std::int64_t>,
    /// self: the restart backoff of generation N elapsed.
    caf::reacts_to<restart_atom, std::uint64_t>,
    /// self: step 1 (SIGTERM) or 2 (SIGKILL) of the kill chain of generation N, for call `id`
    /// (0 = shutdown).
    caf::reacts_to<killstep_atom, std::uint64_t, std::int64_t, int>,
    /// self: write the lines collected for the extension's stdin since the last flush in one
    /// go (queued behind the messages already in the mailbox, so they batch).
    caf::reacts_to<wflush_atom>,
    /// extension host → supervisor: the extension's OS sandbox changed (the user approved or
    /// revoked a capability): from now on it starts with `argv`. The process running is
    /// stopped once its calls in flight have ended (calls arriving meanwhile wait) and started
    /// again with it and `env`, not counted as a crash (a process still starting stops once
    /// it is ready). When the launcher refuses that start and the fallback argv is not empty
    /// (the new profile only adds), it starts with the fallback argv and environment, what it
    /// had, instead.
    caf::reacts_to<reconfine_atom, std::vector<std::string>, std::vector<std::string>, std::vector<std::string>,
                   std::vector<std::string>>>;

/// How to run one extension.
struct supervisor_config {
  std::string name;
  std::string version;
  std::string folder;                 ///< cwd of the process
  std::vector<std::string> argv;      ///< argv[0] absolute
  std::vector<std::string> env;       ///< the scrubbed environment, "KEY=value"
  std::string stderr_log;             ///< $DHARA_HOME/logs/<name>.log
  /// The DHARA_LAUNCH_TAG given to dhara-launch in `env` when argv starts it ("" when it does
  /// not): a start the launcher refused is known by its line `dhara-launch[TAG]: …` on stderr.
  std::string launcher_tag;
  nlohmann::json init_config = nlohmann::json::object();  ///< `config` of initialize
  std::uint64_t handshake_ms = 10000;
  std::uint64_t call_timeout_ms = 120000;
  std::uint64_t cancel_grace_ms = 5000;
  std::uint64_t kill_grace_ms = 2000;
  std::uint32_t max_restarts = 3;
  std::uint64_t restart_window_ms = 60000;
  std::uint64_t max_line_bytes = 8388608;
  host_api_actor host;                ///< where host requests go (none: refused with -32601)
};

/// Spawns a supervisor; it starts the process at once.
supervisor_actor spawn_supervisor(caf::actor_system& sys, std::shared_ptr<io::event_loop> loop,
                                  supervisor_config config);

}  // namespace dhara::actors
