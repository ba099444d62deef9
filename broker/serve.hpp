// `dhara serve --stdio`: the JSON-RPC 2.0 server an agent core talks to (DESIGN §9 "Serve
// protocol", docs/serve-protocol.md). The CLI reads stdin and opens the session at
// `initialize`; from then on every client message goes to one server actor, which runs calls
// through the same path as the batch (gate, human, extension), forwards progress, and asks
// the client with `approval/request` whenever a human decision is needed.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include <caf/fwd.hpp>
#include <nlohmann/json.hpp>

#include "broker/extension_host.hpp"
#include "broker/hitl_mode.hpp"
#include "io/jsonrpc.hpp"
#include "io/line_output.hpp"

namespace dhara::broker {

/// What the client's requests hold in dhara, shared by the thread that reads them and the
/// server actor: the reader holds calls back while too much is held (cli/serve_cmd.cpp), so a
/// client that sends faster than dhara answers, or stops reading the answers, cannot make it
/// hold without bound.
struct serve_load {
  /// Bytes of the client lines handed to the server (send_to_server) and not finished: a
  /// `tools/call` counts until its answer is written, any other message until it is handled.
  std::atomic<std::size_t> bytes{0};
};

/// What the server knows of its session.
struct serve_config {
  hitl_mode mode = hitl_mode::automatic;
  std::string session_id;
  std::string cwd;
  bool can_ask = true;  ///< pending capabilities are asked of the client (not with --no-prompt)
  std::shared_ptr<serve_load> load;  ///< kept up to date when given
};

/// A toolCallId the client may give: a non-empty string (tools/call, tools/cancel).
bool is_call_id(const nlohmann::json& v);

/// The protocol version and server info `initialize` answers with.
nlohmann::json initialize_result();

/// `tools/list`: every tool of every started extension with its status against `snapshot`
/// (ready, or blocked with the capabilities that are not approved), and the tools of
/// extensions that failed or were refused, as failed.
nlohmann::json tools_list(const extension_host& host, const policy::policy_snapshot& snapshot);

/// Spawns the server actor for an initialized session. Decoded client messages go to it with
/// `send_to_server`. `end(code)` is called once, from an actor thread, when the session must
/// end: 0 after `shutdown` or EOF (once every call in flight is answered), 130 after a `quit`
/// decision. `host` and `out` must outlive it.
caf::actor spawn_server(caf::actor_system& sys, const extension_host& host, io::line_output& out, serve_config config,
                        std::function<void(int)> end);

/// Hands one decoded client message, `bytes` long as the client wrote it, to the server actor
/// (counted in `load` when given: the serve_config's).
void send_to_server(const caf::actor& server, io::rpc_message message, std::size_t bytes, serve_load* load);

/// Stops the server: every call still in flight is cancelled (the client gets -32004).
void stop_server(const caf::actor& server);

/// Ends the server actor once the session is over (after stop_server and the host's shutdown).
/// A call it awaits holds handles to the server itself (as approver and progress sink), so a
/// call left unanswered would keep it alive, and the actor system waits for every actor.
void end_server(const caf::actor& server);

/// EOF on the client's input: a shutdown. Calls in flight finish and are answered (questions
/// nobody can answer any more deny), then `end(0)`.
void input_closed(const caf::actor& server);

}  // namespace dhara::broker
