// The serve protocol's server actor (see serve.hpp and docs/serve-protocol.md).
#include "broker/serve.hpp"


#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "broker/call_flow.hpp"

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::io::rpc_message)

namespace dhara::broker {
namespace {

using json = nlohmann::json;
using rpc_atom = caf::atom_constant<caf::atom("rpc")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using drain_atom = caf::atom_constant<caf::atom("drain")>;
using pflush_atom = caf::atom_constant<caf::atom("pflush")>;

// Progress is advisory, and an extension can send it far faster than a client reads: each call
// may send a burst of notifications at once, then about `progress_rate` a second. What comes
// faster is coalesced, keeping only the latest update, which goes out at the next tick or just
// before the result. Without this a flood queued in the server's mailbox and left at the pace
// of the client's pipe: a million notes took dhara to 272 MiB (tests/cli/faults_extensions_test.py).
constexpr double progress_burst = 256;
constexpr double progress_rate = 100;  // per second, per call
constexpr auto progress_tick = std::chrono::milliseconds(50);

struct progress_gate {
  double tokens = progress_burst;
  std::chrono::steady_clock::time_point refilled = std::chrono::steady_clock::now();
  std::optional<json> held;  // the latest update not sent yet
  bool tick_scheduled = false;
};

// The capabilities the client allowed an extension for the rest of the session ("always").
using session_approvals = std::set<std::pair<std::string, policy::capability>>;

struct inflight_call {
  json rpc_id;
  std::string extension;
  std::shared_ptr<bool> cancelled;  // see call_spec::cancelled
  std::size_t bytes = 0;            // its request's, counted in serve_load until it is answered
};

struct open_question {
  caf::typed_response_promise<actors::hitl_answer> rp;
  actors::hitl_question question;
};

struct server_state {
  const extension_host* host = nullptr;
  io::line_output* out = nullptr;
  serve_config cfg;
  std::function<void(int)> end;
  std::map<std::string, inflight_call> calls;         // toolCallId → who asked
  std::size_t arriving_bytes = 0;  // the size of the message being handled, until a call takes it
  std::map<std::string, open_question> questions;     // approval/request id → the asker
  std::set<std::string> always_tools;                 // "ext/tool" the client approved for the session
  session_approvals always_capabilities;             // (ext, capability) the client allowed for the session
  std::map<std::string, progress_gate> progress;      // toolCallId → its progress rate limit
  std::uint64_t next_call = 0;
  std::uint64_t next_question = 0;
  bool quitting = false;
  bool draining = false;           // shutdown or EOF: no new calls, the session ends when the last one is answered
  std::optional<json> shutdown_id; // the shutdown request answered then
  actors::call_replies replies;            // the answers the calls wait for
  static inline const char* name = "serve";
};

using server_ptr = caf::stateful_actor<server_state>*;

// What a finished client message held is no longer held (serve_load).
void release_load(server_state& st, std::size_t bytes) {
  if (st.cfg.load && bytes) st.cfg.load->bytes.fetch_sub(bytes);
}

void reply(server_ptr self, const json& id, const json& result) {
  self->state.out->write_line(io::encode_result(id, result));
}

void reply_error(server_ptr self, const json& id, int code, const std::string& message, const json& data = nullptr) {
  self->state.out->write_line(io::encode_error(id, code, message, data));
}

}  // namespace

// tools_list over the given extension states (tools_list below, with the states as they are
// now), with what the client allowed for the session counted as approved.
json tools_list(const extension_host& host, const std::vector<actors::extension_info>& infos,
                const policy::policy_snapshot& snap, const session_approvals& for_session);

namespace {

void send_progress(server_ptr self, const std::string& id, const json& update) {
  self->state.out->write_line(io::encode_notification("tools/progress", {{"toolCallId", id}, {"update", update}}));
}

// One progress notification from an extension: sent, or held back as the latest (see
// progress_gate).
void on_progress(server_ptr self, const std::string& id, json update) {
  if (!self->state.calls.count(id)) return send_progress(self, id, update);  // in flight when its call ended
  auto& gate = self->state.progress[id];
  auto now = std::chrono::steady_clock::now();
  gate.tokens = std::min(progress_burst, gate.tokens + progress_rate * std::chrono::duration<double>(now - gate.refilled).count());
  gate.refilled = now;
  if (gate.tokens >= 1) {
    gate.tokens -= 1;
    gate.held.reset();  // this one is newer
    return send_progress(self, id, update);
  }
  gate.held = std::move(update);
  if (!gate.tick_scheduled) {
    gate.tick_scheduled = true;
    self->delayed_send(self, progress_tick, pflush_atom::value, id);
  }
}

// The held update of a call goes out (at a tick, or before the call's result).
void flush_progress(server_ptr self, const std::string& id, bool call_done) {
  auto it = self->state.progress.find(id);
  if (it == self->state.progress.end()) return;
  if (!call_done) it->second.tick_scheduled = false;
  if (it->second.held) {
    send_progress(self, id, *it->second.held);
    it->second.held.reset();
  }
  if (call_done) self->state.progress.erase(it);
}

// Cancels every call in flight and answers every open question with quit.
void cancel_everything(server_ptr self) {
  auto& st = self->state;
  for (const auto& [id, call] : st.calls) {
    *call.cancelled = true;
    if (auto sup = st.host->supervisor(call.extension)) self->send(sup, actors::cancel_atom::value, id);
  }
  for (auto& [id, q] : st.questions) q.rp.deliver(actors::hitl_answer{actors::hitl_decision::quit, {}});
  st.questions.clear();
}

// Ends a draining session once no call is in flight: the shutdown answer, then exit 0.
void end_if_drained(server_ptr self) {
  auto& st = self->state;
  if (!st.draining || !st.calls.empty() || st.quitting) return;
  if (st.shutdown_id) reply(self, *st.shutdown_id, {{"status", "ok"}});
  st.shutdown_id.reset();
  st.end(0);
}

// `shutdown` or EOF: calls in flight finish and are answered; new calls are refused. With
// the input closed nobody can answer a question any more, so open ones are answered lost.
void drain(server_ptr self, bool input_closed) {
  auto& st = self->state;
  st.draining = true;
  if (input_closed) {
    for (auto& [id, q] : st.questions)
      q.rp.deliver(actors::hitl_answer{actors::hitl_decision::lost, "the client closed its input"});
    st.questions.clear();
  }
  end_if_drained(self);
}

void quit(server_ptr self) {
  if (self->state.quitting) return;
  self->state.quitting = true;
  cancel_everything(self);
  self->state.end(130);
}

void start_call(server_ptr self, const json& rpc_id, const json& params) {
  auto& st = self->state;
  if (!params.is_object() || !params.contains("tool") || !params["tool"].is_string() ||
      (params.contains("input") && !params["input"].is_object()) ||
      (params.contains("toolCallId") && !is_call_id(params["toolCallId"])))
    return reply_error(self, rpc_id, io::rpc_error::invalid_params,
                       "tools/call takes {\"tool\": \"name\", \"input\": {...}, \"toolCallId\"?: \"id\"} (a non-empty id)");
  std::string id = params.contains("toolCallId") ? params["toolCallId"].get<std::string>()
                                                 : "serve-" + std::to_string(++st.next_call);
  if (st.calls.count(id))
    return reply_error(self, rpc_id, io::rpc_error::invalid_params, "toolCallId '" + id + "' is already in flight");
  auto resolved = st.host->resolve(params["tool"].get<std::string>(), "");
  if (auto* err = std::get_if<resolve_error>(&resolved))
    return reply_error(self, rpc_id, io::rpc_error::method_not_found, err->message,
                       err->reason.empty() ? json(nullptr) : json{{"reason", err->reason}});
  call_spec spec{std::move(std::get<registered_tool>(resolved)), {}};
  spec.call.tool_call_id = id;
  spec.call.tool = spec.tool.name;
  spec.call.input = params.value("input", json::object());
  spec.call.cwd = st.cfg.cwd;
  spec.call.session_id = st.cfg.session_id;
  spec.call.progress_to = caf::actor_cast<caf::actor>(self);
  st.calls[id] = {rpc_id, spec.tool.extension, spec.cancelled, std::exchange(st.arriving_bytes, 0)};
  run_tool_call(self, *st.host, std::move(spec), st.cfg.mode, caf::actor_cast<actors::hitl_actor>(self),
                [self, id, rpc_id](call_outcome o) {
                  auto& state = self->state;
                  std::size_t held = 0;
                  if (auto it = state.calls.find(id); it != state.calls.end()) {
                    held = it->second.bytes;
                    state.calls.erase(it);
                  }
                  flush_progress(self, id, true);
                  if (o.result.ok) reply(self, rpc_id, o.result.result);
                  else reply_error(self, rpc_id, o.result.code, o.result.message, o.result.data);
                  release_load(state, held);  // answered: the request is no longer in hand
                  if (o.quit) quit(self);
                  end_if_drained(self);
                });
}

// Cancels the call `params.toolCallId` names, or every call in flight when it names none. A
// toolCallId that is not a non-empty string cancels nothing (it was read as "none": a malformed
// cancel of one call cancelled them all); false then.
bool cancel_call(server_ptr self, const json& params) {
  auto& st = self->state;
  const bool names_one = params.is_object() && params.contains("toolCallId");
  if (names_one && !is_call_id(params["toolCallId"])) return false;
  std::string only = names_one ? params["toolCallId"].get<std::string>() : std::string();
  for (const auto& [id, call] : st.calls) {
    if (!only.empty() && id != only) continue;
    *call.cancelled = true;
    if (auto sup = st.host->supervisor(call.extension)) self->send(sup, actors::cancel_atom::value, id);
  }
  // A call still waiting for the client's decision is answered no, with the reason.
  for (auto it = st.questions.begin(); it != st.questions.end();) {
    if (only.empty() || it->second.question.tool_call_id == only) {
      it->second.rp.deliver(actors::hitl_answer{actors::hitl_decision::lost, "the call was cancelled"});
      it = st.questions.erase(it);
    } else {
      ++it;
    }
  }
  return true;
}

// The client's answer to an approval/request.
void answer_question(server_ptr self, const json& id, const json* result, const std::string& error) {
  auto& st = self->state;
  if (!id.is_string()) return;
  auto it = st.questions.find(id.get<std::string>());
  if (it == st.questions.end()) return;  // late, or not ours: nothing waits for it
  open_question q = std::move(it->second);
  st.questions.erase(it);
  using actors::hitl_decision;
  std::string decision = result && result->is_object() && result->contains("decision") && (*result)["decision"].is_string()
                             ? (*result)["decision"].get<std::string>()
                             : std::string();
  if (decision == "quit") {
    q.rp.deliver(actors::hitl_answer{hitl_decision::quit, {}});
    return quit(self);
  }
  if (decision == "allow") return void(q.rp.deliver(actors::hitl_answer{hitl_decision::allow, {}}));
  if (decision == "deny") return void(q.rp.deliver(actors::hitl_answer{hitl_decision::deny, {}}));
  if (decision == "always") {
    // For the rest of this session, never written to permissions.json: DESIGN §9 gives the
    // client allow, deny and quit, and a lasting approval comes from the user at dhara's own
    // prompt or `dhara config permissions approve`, not from a protocol message (which an
    // agent driven by a model could send). A review found "always" recorded for good.
    if (q.question.kind == actors::question_kind::tool)
      st.always_tools.insert(q.question.extension + "/" + q.question.tool);
    if (q.question.kind == actors::question_kind::capability)
      if (auto cap = policy::parse_capability(q.question.capability)) {
        st.always_capabilities.insert({q.question.extension, *cap});
        // The kernel allows it too for the session: the extension starts again in a profile
        // that has it, before this call runs (an `allow` of one call stays dhara's checks and
        // host requests only: the kernel cannot grant one call). The answer goes once the new
        // profile is on its way, so the call reaches the extension after it.
        if (caf::actor follower = st.host->kernel_follower()) {
          auto rp = q.rp;
          self->request(follower, caf::infinite, caf::add_atom::value, q.question.extension, q.question.capability)
              .then([rp](bool) mutable { rp.deliver(actors::hitl_answer{hitl_decision::always, {}}); },
                    [rp](caf::error&) mutable { rp.deliver(actors::hitl_answer{hitl_decision::always, {}}); });
          return;
        }
      }
    return void(q.rp.deliver(actors::hitl_answer{hitl_decision::always, {}}));
  }
  // An error response, or an answer we cannot read: no decision, so no (fail closed).
  q.rp.deliver(actors::hitl_answer{
      hitl_decision::lost, !error.empty() ? "the client answered with an error: " + error
                                          : "the client's answer is not {\"decision\": \"allow\"|\"deny\"|\"always\"|\"quit\"}"});
}

// tools/list with each extension's state as it is now: one that crashed in a loop since the
// session started is failed, with the reason. A supervisor that is restarting answers only
// once it is ready again, so it gets a moment and is otherwise listed as it was.
void list_tools(server_ptr self, const json& id, policy::snapshot_ptr snap) {
  const extension_host& host = *self->state.host;
  auto infos = std::make_shared<std::vector<actors::extension_info>>(host.extensions());
  auto left = std::make_shared<std::size_t>(infos->size() + 1);
  auto one_done = [self, id, snap, infos, left] {
    if (--*left == 0)
      reply(self, id, tools_list(*self->state.host, *infos, *snap, self->state.always_capabilities));
  };
  for (std::size_t i = 0; i < infos->size(); ++i) {
    auto sup = host.supervisor((*infos)[i].name);
    if (!sup || (*infos)[i].state != actors::extension_state::ready) {
      one_done();
      continue;
    }
    self->request(sup, std::chrono::milliseconds(250), actors::status_atom::value)
        .then(
            [infos, i, one_done](actors::extension_info& now) {
              if (now.state == actors::extension_state::failed) {
                (*infos)[i].state = now.state;
                (*infos)[i].reason = now.reason;
              }
              one_done();
            },
            [one_done](caf::error&) { one_done(); });
  }
  one_done();
}

void handle(server_ptr self, io::rpc_message& message) {
  auto& st = self->state;
  if (auto* req = std::get_if<io::rpc_request>(&message)) {
    if (st.quitting) return reply_error(self, req->id, io::rpc_error::cancelled, "the session is ending: the user quit");
    if (req->method == "tools/call") {
      if (st.draining)
        return reply_error(self, req->id, io::rpc_error::invalid_request, "the session is shutting down; no new calls");
      return start_call(self, req->id, req->params);
    }
    if (req->method == "tools/list") {
      self->request(st.host->permissions_store(), caf::infinite, actors::snapshot_atom::value)
          .then([self, id = req->id](policy::snapshot_ptr& snap) { list_tools(self, id, std::move(snap)); },
                [self, id = req->id](caf::error& e) {
                  reply_error(self, id, -32603, "the permissions store is gone: " + self->system().render(e));
                });
      return;
    }
    if (req->method == "tools/cancel") {
      if (!cancel_call(self, req->params))
        return reply_error(self, req->id, io::rpc_error::invalid_params,
                           "tools/cancel takes {\"toolCallId\"?: \"id\"}: a non-empty string, or none to cancel every call");
      return reply(self, req->id, json::object());
    }
    if (req->method == "shutdown") {
      if (!st.shutdown_id) st.shutdown_id = req->id;
      else reply(self, req->id, {{"status", "ok"}});
      return drain(self, false);
    }
    if (req->method == "initialize")
      return reply_error(self, req->id, io::rpc_error::invalid_request, "the session is already initialized");
    return reply_error(self, req->id, io::rpc_error::method_not_found,
                       "unknown method '" + req->method +
                           "'; the server knows initialize, tools/list, tools/call, tools/cancel and shutdown");
  }
  if (auto* note = std::get_if<io::rpc_notification>(&message)) {
    if (note->method == "tools/cancel") cancel_call(self, note->params);
    return;  // other notifications are ignored, as JSON-RPC says
  }
  if (auto* res = std::get_if<io::rpc_response>(&message)) return answer_question(self, res->id, &res->result, {});
  if (auto* err = std::get_if<io::rpc_error_response>(&message)) return answer_question(self, err->id, nullptr, err->message);
}

caf::behavior server(server_ptr self, const extension_host* host, io::line_output* out, serve_config cfg,
                     std::function<void(int)> end) {
  self->state.host = host;
  self->state.out = out;
  self->state.cfg = std::move(cfg);
  self->state.end = std::move(end);
  self->set_down_handler([self](caf::down_msg& m) { self->state.replies.down(m); });
  return {
      [self](rpc_atom, io::rpc_message& message, std::size_t bytes) {
        auto& st = self->state;
        st.arriving_bytes = bytes;
        handle(self, message);  // a call it starts takes the bytes until it is answered
        release_load(st, std::exchange(st.arriving_bytes, 0));
      },
      [self](actors::check_outcome& o) { self->state.replies.answered(o); },
      [self](actors::check_outcomes& os) { self->state.replies.answered(os); },
      [self](actors::call_result& r) { self->state.replies.answered(r); },
      [self](actors::call_results& rs) { self->state.replies.answered(rs); },
      // A human decision is needed: the client is asked, the asker waits for its answer.
      [self](actors::question_atom, actors::hitl_question& q) -> caf::typed_response_promise<actors::hitl_answer> {
        auto& st = self->state;
        auto rp = self->make_response_promise<actors::hitl_answer>();
        if (st.quitting) {
          rp.deliver(actors::hitl_answer{actors::hitl_decision::quit, {}});
          return rp;
        }
        if (q.kind == actors::question_kind::tool && st.always_tools.count(q.extension + "/" + q.tool)) {
          // Not asked: its audit entry says so (it read as the client's yes to this call: a review).
          rp.deliver(actors::hitl_answer{actors::hitl_decision::always, "not asked: the client answered 'always' for "
                                                                        "this tool earlier in the session"});
          return rp;
        }
        if (q.kind == actors::question_kind::capability) {
          auto cap = policy::parse_capability(q.capability);
          if (cap && st.always_capabilities.count({q.extension, *cap})) {
            rp.deliver(actors::hitl_answer{actors::hitl_decision::always, "not asked: the client answered 'always' for "
                                                                          "this capability earlier in the session"});
            return rp;
          }
        }
        if (q.kind == actors::question_kind::capability && !st.cfg.can_ask) {
          rp.deliver(actors::hitl_answer{actors::hitl_decision::lost, "the server runs with --no-prompt"});
          return rp;
        }
        std::string id = "approval-" + std::to_string(++st.next_question);
        json params = {{"kind", std::string(actors::to_string(q.kind))},
                       {"extension", q.extension},
                       {"tool", q.tool},
                       {"toolCallId", q.tool_call_id},
                       {"capability", q.capability.empty() ? json(nullptr) : json(q.capability)},
                       {"subject", q.subject}};
        if (q.kind == actors::question_kind::result) params["result"] = q.result;
        st.out->write_line(io::encode_request(id, "approval/request", params));
        st.questions[id] = {rp, std::move(q)};
        return rp;
      },
      [self](actors::progress_atom, std::string& id, json& update) { on_progress(self, id, std::move(update)); },
      [self](pflush_atom, const std::string& id) { flush_progress(self, id, false); },
      [self](stop_atom) { cancel_everything(self); },
      [self](drain_atom) { drain(self, true); },
  };
}

}  // namespace

bool is_call_id(const json& v) { return v.is_string() && !v.get_ref<const std::string&>().empty(); }

json initialize_result() {
  return {{"protocolVersion", "0.1.0"}, {"serverInfo", {{"name", "dhara"}, {"version", "0.1.0"}}}};
}

json tools_list(const extension_host& host, const policy::policy_snapshot& snap) {
  return tools_list(host, host.extensions(), snap, {});
}

json tools_list(const extension_host& host, const std::vector<actors::extension_info>& infos,
                const policy::policy_snapshot& snap, const session_approvals& for_session) {
  json tools = json::array();
  for (const actors::extension_info& info : infos) {
    auto ext = snap.extensions.find(info.name);
    for (const json& t : info.tools) {
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) continue;
      std::string name = t["name"].get<std::string>();
      std::string qualified = info.name + "/" + name;
      json entry = {{"name", name},
                    {"extension", info.name},
                    {"qualifiedName", qualified},
                    {"description", t.value("description", "")},
                    {"parameters", t.value("parameters", json::object())}};
      json missing = json::array();
      std::string status = info.state == actors::extension_state::ready ? "ready" : "failed";
      if (host.refused_tools().count(qualified)) {
        status = "failed";
        entry["reason"] = host.refused_tools().at(qualified);
        entry["capabilities"] = t.value("capabilities", json::array());
      } else {
        auto resolved = host.resolve(qualified, "");
        policy::capability_set required;
        if (auto* rt = std::get_if<registered_tool>(&resolved)) required = rt->required;
        json caps = json::array();
        required.for_each([&](policy::capability c) { caps.push_back(std::string(policy::to_string(c))); });
        entry["capabilities"] = caps;
        if (snap.level != policy::security_level::yolo && ext != snap.extensions.end()) {
          policy::capability_set lacking =
              required.minus(ext->second.approved_by_user).minus(ext->second.approved_by_author);
          for (const auto& [allowed_to, cap] : for_session)
            if (allowed_to == info.name && !ext->second.denied.contains(cap)) lacking.erase(cap);
          lacking.for_each([&](policy::capability c) { missing.push_back(std::string(policy::to_string(c))); });
        }
        if (status == "ready" && !missing.empty()) status = "blocked";
        if (info.state != actors::extension_state::ready) entry["reason"] = info.reason;
        if (status == "ready" && !snap.failure.empty()) {
          // No policy could be compiled (a spoiled permissions.json): every check is denied.
          status = "blocked";
          entry["reason"] = "every check is denied: " + snap.failure;
          missing = caps;
        }
      }
      entry["status"] = status;
      entry["missingCapabilities"] = missing;
      tools.push_back(std::move(entry));
    }
  }
  return {{"tools", tools}};
}

caf::actor spawn_server(caf::actor_system& sys, const extension_host& host, io::line_output& out, serve_config config,
                        std::function<void(int)> end) {
  return sys.spawn(server, &host, &out, std::move(config), std::move(end));
}

void send_to_server(const caf::actor& server, io::rpc_message message, std::size_t bytes, serve_load* load) {
  if (load) load->bytes.fetch_add(bytes);
  caf::anon_send(server, rpc_atom::value, std::move(message), bytes);
}

void stop_server(const caf::actor& server) { caf::anon_send(server, stop_atom::value); }

void end_server(const caf::actor& server) { caf::anon_send_exit(server, caf::exit_reason::user_shutdown); }

void input_closed(const caf::actor& server) { caf::anon_send(server, drain_atom::value); }

}  // namespace dhara::broker
