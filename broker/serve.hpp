// `dhara serve --stdio`: the JSON-RPC 2.0 server an agent core talks to (DESIGN §9 "Serve
// protocol", docs/serve-protocol.md). The CLI reads stdin and opens the session at
// `initialize`; from then on every client message goes to one server actor, which runs calls
// through the same path as the batch (gate, human, extension), forwards progress, and asks
// the client with `approval/request` whenever a human decision is needed.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <caf/fwd.hpp>
#include <nlohmann/json.hpp>

#include "broker/extension_host.hpp"
#include "broker/hitl_mode.hpp"
#include "io/jsonrpc.hpp"

namespace dhara::broker {

/// Writes one JSON-RPC message a line to a file descriptor; safe from any thread. The lines
/// are written in order by a thread of its own, so a client that stops reading holds no actor
/// (nor the io thread, which may run actors: see actors::run_here_scope) until
/// `max_queued_bytes` wait unwritten; then write_line waits for room (nothing is dropped). A
/// client that went away (EPIPE) makes every later write a no-op. The destructor writes what
/// is queued, then ends the thread.
class serve_output {
 public:
  explicit serve_output(int fd, std::size_t max_queued_bytes = std::size_t{64} << 20);
  ~serve_output();
  serve_output(const serve_output&) = delete;
  serve_output& operator=(const serve_output&) = delete;
  void write_line(std::string line);

 private:
  void run();
  std::mutex mutex_;
  std::condition_variable work_;  ///< lines queued, or closing
  std::condition_variable room_;  ///< bytes written (or the client went away)
  std::deque<std::string> queue_;
  std::size_t queued_bytes_ = 0;  ///< queued and not yet written
  const std::size_t max_queued_bytes_;
  const int fd_;
  bool broken_ = false;
  bool closing_ = false;
  std::thread thread_;  ///< last: started once the rest is ready
};

/// What the server knows of its session.
struct serve_config {
  hitl_mode mode = hitl_mode::automatic;
  std::string session_id;
  std::string cwd;
  bool can_ask = true;  ///< pending capabilities are asked of the client (not with --no-prompt)
};

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
caf::actor spawn_server(caf::actor_system& sys, const extension_host& host, serve_output& out, serve_config config,
                        std::function<void(int)> end);

/// Hands one decoded client message to the server actor.
void send_to_server(const caf::actor& server, io::rpc_message message);

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
