// `dhara serve --stdio [--mode auto|approve|review]`: the JSON-RPC 2.0 server for an agent
// core (DESIGN §9 "Serve protocol", docs/serve-protocol.md). This thread reads stdin: until
// `initialize` it answers by itself; `initialize` opens the session (in the client's cwd);
// then every message goes to the server actor. The session ends on `shutdown` or EOF (exit 0)
// or on a `quit` decision (exit 130).
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <caf/actor.hpp>
#include <spdlog/spdlog.h>

#include "broker/serve.hpp"
#include "cli/commands.hpp"
#include "cli/interrupt.hpp"
#include "cli/session.hpp"

namespace dhara::cli {
namespace {

using json = nlohmann::json;

// Longest client line accepted; a longer one is answered -32700 and skipped.
constexpr std::size_t max_client_line = 8u << 20;
// Flow control (docs/serve-protocol.md, "Flow control"). The client's input is always read, so
// its answers to approval requests, its cancels and its shutdown are seen at once. What its
// calls hold is bounded instead: a `tools/call` goes to the server while less than
// max_requests_in_hand of requests are in hand (a call's until it is answered) and less than
// max_answers_unread of answers wait for the client to read them; otherwise it waits here, in
// order, up to max_parked bytes, and a call beyond those is answered busy. A client that sent
// 2 000 calls of 1 MB and read nothing took dhara to 1.85 GB, and a python extension was
// killed for the 64 MiB of input queued to it. (Stopping to read instead left a client that
// answers an approval request behind a full pipe waiting for ever: a review.)
constexpr std::size_t max_requests_in_hand = 4 * max_client_line;
constexpr std::size_t max_answers_unread = 32u << 20;
constexpr std::size_t max_parked = 64u << 20;
// How often waiting calls are looked at while they wait.
constexpr int parked_poll_ms = 10;

// Ends the session from any thread: the first code wins, and the read loop wakes up.
class session_end {
 public:
  session_end() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~session_end() {
    if (fd_ >= 0) ::close(fd_);
  }
  void signal(int code) {
    int expected = -1;
    if (!code_.compare_exchange_strong(expected, code)) return;
    std::uint64_t one = 1;
    if (::write(fd_, &one, sizeof one) < 0) { /* the loop also polls code() */ }
  }
  int fd() const { return fd_; }
  int code() const { return code_.load(); }

 private:
  int fd_;
  std::atomic<int> code_{-1};
};

struct parked_message {
  io::rpc_message msg;
  std::size_t bytes = 0;  // as the client wrote it
};

struct server_session {
  std::unique_ptr<session> s;
  caf::actor server;
  std::shared_ptr<broker::serve_load> load = std::make_shared<broker::serve_load>();  // what the client's requests hold
  std::deque<parked_message> parked;  // calls waiting for room (and a shutdown sent after them), in order
  std::size_t parked_bytes = 0;
  bool eof_parked = false;  // the input ended after messages that still wait
  interrupt_watch* interrupts = nullptr;  // Ctrl-C / SIGTERM, also while initialize starts the extensions
};

bool over_limit(io::line_output& out, const server_session& open) {
  return out.queued_bytes() >= max_answers_unread || open.load->bytes.load() >= max_requests_in_hand;
}

// Hands the waiting messages to the server in order while there is room; the input's end last.
void release_parked(io::line_output& out, server_session& open) {
  while (!open.parked.empty() && !over_limit(out, open)) {
    parked_message p = std::move(open.parked.front());
    open.parked.pop_front();
    open.parked_bytes -= p.bytes;
    broker::send_to_server(open.server, std::move(p.msg), p.bytes, open.load.get());
  }
  if (open.parked.empty() && open.eof_parked) {
    open.eof_parked = false;
    broker::input_closed(open.server);
  }
}

// The toolCallId a call names ("" when none: the server would give it one).
std::string call_id_of(const io::rpc_request& req) {
  const json& p = req.params;
  return p.is_object() && p.contains("toolCallId") && p["toolCallId"].is_string() ? p["toolCallId"].get<std::string>()
                                                                                 : std::string();
}

// A cancel reaches the calls still waiting here too: each is answered cancelled, as the
// server answers its own (which the cancel then goes on to).
void cancel_parked(io::line_output& out, server_session& open, const json& params) {
  const bool names_one = params.is_object() && params.contains("toolCallId");
  if (names_one && !broker::is_call_id(params["toolCallId"])) return;  // cancels nothing (the server answers the bad params)
  const std::string only = names_one ? params["toolCallId"].get<std::string>() : std::string();
  for (auto it = open.parked.begin(); it != open.parked.end();) {
    auto* req = std::get_if<io::rpc_request>(&it->msg);
    if (req && req->method == "tools/call" && (only.empty() || call_id_of(*req) == only)) {
      out.write_line(io::encode_error(req->id, io::rpc_error::cancelled, "cancelled"));
      open.parked_bytes -= it->bytes;
      it = open.parked.erase(it);
    } else {
      ++it;
    }
  }
}

// One client message once the session is open.
void to_server(std::string_view line, io::rpc_message msg, io::line_output& out, server_session& open) {
  const std::size_t bytes = line.size() + 1;
  auto* req = std::get_if<io::rpc_request>(&msg);
  const bool call = req && req->method == "tools/call";
  // A call waits behind the calls waiting already, or for room; a shutdown behind them too.
  if ((call && (!open.parked.empty() || over_limit(out, open))) || (req && req->method == "shutdown" && !open.parked.empty())) {
    if (call && open.parked_bytes + bytes > max_parked)
      return out.write_line(io::encode_error(
          req->id, -32000,
          "dhara is busy: it holds " + std::to_string((open.load->bytes.load() + open.parked_bytes) >> 20) +
              " MiB of this client's calls (its answers are not read, or calls come faster than they finish); send "
              "this call again once answers arrive",
          {{"reason", "busy"}}));
    open.parked_bytes += bytes;
    open.parked.push_back({std::move(msg), bytes});
    return;
  }
  const json* cancel = nullptr;
  if (req && req->method == "tools/cancel") cancel = &req->params;
  auto* note = std::get_if<io::rpc_notification>(&msg);
  if (note && note->method == "tools/cancel") cancel = &note->params;
  if (cancel && !open.parked.empty()) cancel_parked(out, open, *cancel);
  broker::send_to_server(open.server, std::move(msg), bytes, open.load.get());
}

// `initialize`: validates the params, opens the session and starts the server actor.
void initialize(const global_options& g, const io::rpc_request& req, const std::string& cli_mode,
                io::line_output& out, session_end& end, server_session& open) {
  const json& p = req.params;
  if (!p.is_null() && !p.is_object())
    return out.write_line(io::encode_error(req.id, io::rpc_error::invalid_params, "initialize params must be an object"));
  auto text = [&](const char* key) -> std::optional<std::string> {
    if (!p.is_object() || !p.contains(key) || p[key].is_null()) return std::string();
    if (!p[key].is_string()) return std::nullopt;
    return p[key].get<std::string>();
  };
  auto cwd = text("cwd"), session_id = text("sessionId"), mode = text("mode");
  if (!cwd || !session_id || !mode)
    return out.write_line(io::encode_error(req.id, io::rpc_error::invalid_params,
                                           "initialize takes strings: {\"cwd\"?, \"sessionId\"?, \"mode\"?}"));
  broker::serve_config cfg;
  if (!broker::parse_hitl_mode(mode->empty() ? cli_mode : *mode, cfg.mode))
    return out.write_line(io::encode_error(req.id, io::rpc_error::invalid_params,
                                           "mode '" + *mode + "' is not a mode; use auto, approve or review"));
  // The user's `--mode approve` or `review` stands: a client (an agent, perhaps driven by a
  // model) cannot turn the human's questions off by asking for another mode.
  std::string mode_warning;
  if (cli_mode != "auto" && !mode->empty() && *mode != cli_mode) {
    mode_warning = "mode '" + *mode + "' ignored: dhara serve was started with --mode " + cli_mode + ", which stands";
    broker::parse_hitl_mode(cli_mode, cfg.mode);
  }
  std::error_code ec;
  if (!cwd->empty() && (cwd->front() != '/' || !std::filesystem::is_directory(*cwd, ec)))
    return out.write_line(io::encode_error(req.id, io::rpc_error::invalid_params,
                                           "cwd '" + *cwd + "' is not an absolute path to a directory"));
  cfg.can_ask = !g.no_prompt;
  std::string error;
  int rc = 0;
  session_options so;
  so.cwd = *cwd;
  so.interactive = cfg.can_ask;  // the client answers where a terminal would
  so.prompt_at_load = false;     // asked at the first call that needs it, through the client
  so.error = &error;
  so.session_id = session_id->empty() ? "serve-" + std::to_string(::getpid()) : *session_id;
  if (open.interrupts) so.interrupted = [w = open.interrupts] { return w->take(); };
  auto s = open_session(g, rc, so);
  if (!s && (rc == 130 || rc == 143 || rc == 129)) {  // a signal while the extensions started: the server ends
    out.write_line(io::encode_error(req.id, -32000, "dhara was interrupted while the extensions started",
                                    {{"reason", "interrupted"}}));
    return end.signal(rc);
  }
  if (!s)
    return out.write_line(io::encode_error(req.id, -32000, "the session could not be opened: " + error,
                                           {{"reason", error}}));
  cfg.cwd = s->policy.where.cwd;
  cfg.session_id = so.session_id;
  cfg.load = open.load;
  open.server = broker::spawn_server(*s->sys, *s->host, out, cfg, [&end](int code) { end.signal(code); });
  if (cfg.can_ask) s->host->set_approver(caf::actor_cast<actors::hitl_actor>(open.server));
  json result = broker::initialize_result();
  result["warnings"] = s->policy.warnings;
  if (!mode_warning.empty()) result["warnings"].push_back(mode_warning);
  open.s = std::move(s);
  out.write_line(io::encode_result(req.id, result));
}

// One client line.
void on_line(const global_options& g, std::string_view line, const std::string& cli_mode, io::line_output& out,
             session_end& end, server_session& open) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
  auto msg = io::parse_rpc(line);
  if (!msg)
    return out.write_line(
        io::encode_error(io::refused_request_id(line), io::rpc_error_code(msg.err()), msg.err().message));
  if (open.s) return to_server(line, std::move(*msg), out, open);
  auto* req = std::get_if<io::rpc_request>(&*msg);
  if (!req) return;  // notifications and stray responses before initialize mean nothing
  if (req->method == "initialize") return initialize(g, *req, cli_mode, out, end, open);
  if (req->method == "shutdown") {
    out.write_line(io::encode_result(req->id, {{"status", "ok"}}));
    return end.signal(0);
  }
  out.write_line(io::encode_error(req->id, io::rpc_error::invalid_request,
                                  "the server is not initialized; send initialize first"));
}

int serve(const global_options& g, const std::string& mode) {
  broker::hitl_mode parsed;
  if (!broker::parse_hitl_mode(mode, parsed)) {
    std::fprintf(stderr, "dhara: --mode '%s' is not a mode; use auto, approve or review\n", mode.c_str());
    return 2;
  }
  interrupt_watch interrupts;  // before any thread starts
  io::line_output out(1);
  session_end end;
  server_session open;
  open.interrupts = &interrupts;
  std::string buffer;
  bool skipping = false;  // inside a line that was too long
  bool input_open = true;
  char chunk[65536];
  while (end.code() < 0) {
    if (open.s) release_parked(out, open);
    const bool waiting = !open.parked.empty() || open.eof_parked;
    // After EOF stdin is no longer watched (fd -1): the session ends when the server says so.
    pollfd fds[3] = {{input_open ? 0 : -1, POLLIN, 0}, {end.fd(), POLLIN, 0}, {interrupts.fd(), POLLIN, 0}};
    if (::poll(fds, 3, waiting ? parked_poll_ms : -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents) break;
    if (fds[2].revents) {
      // Ctrl-C or SIGTERM: like a quit — calls in flight are cancelled, extensions stopped.
      if (int sig = interrupts.take()) end.signal(interrupt_watch::exit_code(sig));
      continue;
    }
    if (!fds[0].revents) continue;
    ssize_t n = ::read(0, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      // EOF is a shutdown: the calls in flight are answered first.
      input_open = false;
      if (open.s && !open.parked.empty()) open.eof_parked = true;  // after the calls still waiting
      else if (open.s) broker::input_closed(open.server);
      else end.signal(0);
      continue;
    }
    buffer.append(chunk, static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t nl; (nl = buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (skipping) {
        skipping = false;
        continue;
      }
      on_line(g, std::string_view(buffer).substr(start, nl - start), mode, out, end, open);
      if (end.code() >= 0) break;
    }
    buffer.erase(0, start);
    if (buffer.size() > max_client_line) {
      out.write_line(io::encode_error(nullptr, io::rpc_error::parse,
                                      "a line longer than " + std::to_string(max_client_line) + " bytes was skipped"));
      buffer.clear();
      skipping = true;
    }
  }
  int code = end.code() < 0 ? 0 : end.code();
  // Calls that never left: answered as the server answers those it cancels at the end.
  for (const parked_message& p : open.parked)
    if (auto* req = std::get_if<io::rpc_request>(&p.msg); req && req->method == "tools/call")
      out.write_line(io::encode_error(req->id, io::rpc_error::cancelled, "cancelled: the session ended before the call started"));
  interrupts.keep_watching();  // stopping the extensions may take their grace: a second signal exits
  if (open.s) {
    broker::stop_server(open.server);
    open.s->host->shutdown();  // every extension stopped before the exit code is returned
    broker::end_server(open.server);
  }
  return code;
}

}  // namespace

void add_serve_command(CLI::App& app, command_context& ctx) {
  struct options {
    bool stdio = false;
    std::string mode = "auto";
  };
  auto o = std::make_shared<options>();
  auto* serve_cmd = app.add_subcommand("serve", "Serve an agent core: JSON-RPC 2.0 over stdin/stdout");
  serve_cmd->add_flag("--stdio", o->stdio, "Speak on stdin/stdout (the only transport)")->required();
  serve_cmd->add_option("--mode", o->mode, "auto, approve (ask the client before each call) or review (ask after); "
                                           "initialize's mode applies only when this is auto")
      ->check(CLI::IsMember({"auto", "approve", "review"}));
  serve_cmd->footer(
      "Example:\n"
      "  printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}' \\\n"
      "                '{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}' | dhara serve --stdio\n"
      "The protocol, with a complete exchange: docs/serve-protocol.md\n"
      "Exit codes: 0 after shutdown or EOF, 2 usage, 130 the client answered quit (or Ctrl-C), 143 SIGTERM, "
      "129 SIGHUP");
  serve_cmd->callback([&ctx, o] { ctx.action = [&ctx, o] { return serve(ctx.g, o->mode); }; });
}

}  // namespace dhara::cli
