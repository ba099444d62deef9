// The extension supervisor actor (see extension_supervisor.hpp).
#include "actors/extension_supervisor.hpp"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/scheduler.hpp"
#include "actors/ticketed_promise.hpp"
#include "io/jsonrpc.hpp"

namespace dhara::actors {

std::string_view to_string(extension_state s) {
  switch (s) {
    case extension_state::starting: return "starting";
    case extension_state::ready: return "ready";
    case extension_state::failed: return "failed";
    case extension_state::stopped: return "stopped";
  }
  return "failed";
}

namespace {

using json = nlohmann::json;
using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::int64_t now_ms() {
  return std::chrono::duration_cast<milliseconds>(clock::now().time_since_epoch()).count();
}

json signal_name(int sig) {
  if (sig == 0) return nullptr;
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? json(std::string("SIG") + abbrev) : json(sig);
}

// What the sandbox launcher said when it refused to start the extension: it prints one line
// `dhara-launch[TAG]: PHASE: ERROR (WHY)` and exits 126 or 127 before the extension runs
// (docs/sandbox.md). The tag is this start's secret: an extension that prints such a line
// itself does not know it. "" for any other exit.
std::string launcher_refusal(const io::process_exit& e, const std::string& launcher_tag) {
  if (launcher_tag.empty() || e.term_signal != 0 || (e.exit_status != 126 && e.exit_status != 127)) return {};
  const std::string tag = "dhara-launch[" + launcher_tag + "]: ";
  std::size_t at = e.stderr_tail.rfind(tag);
  if (at == std::string::npos || (at != 0 && e.stderr_tail[at - 1] != '\n')) return {};
  std::string line = e.stderr_tail.substr(at + tag.size());
  line.erase(std::min(line.find('\n'), line.size()));
  return line;
}

// Call deadlines, earliest first: deadline (ms) → rpc id.
using deadline_map = std::multimap<std::int64_t, std::int64_t>;

struct inflight {
  ticketed_promise<call_result> rp;
  std::string tool_call_id;
  caf::actor progress_to;
  deadline_map::iterator deadline;
  bool host_denied = false;  // a host request was denied while it was in flight (on_answer)
};

// The timeout message that is not about one call: time out every call whose deadline passed.
constexpr std::int64_t sweep_id = -1;

struct queued_call {
  tool_call call;
  ticketed_promise<call_result> rp;
};

struct supervisor_state {
  supervisor_config cfg;
  std::shared_ptr<io::event_loop> loop;
  extension_info info;
  std::uint64_t gen = 0;          // process generation: events of older ones are ignored
  std::uint64_t proc_id = 0;      // the event loop's id of the current process
  std::shared_ptr<io::read_credit> credit;  // pauses reading while this mailbox is backlogged
  bool alive = false;             // the current process runs
  bool stopping = false;          // shutdown requested
  bool expected_exit = false;     // dhara killed it (cancel, timeout): restart without counting
                                  // and, from the SIGTERM on, new calls wait for the next process
  bool reconfining = false;       // a new argv waits for the calls in flight to end (reconfine)
  std::vector<std::string> fallback_argv;  // the argv before a reconfine that only adds, until it starts
  std::vector<std::string> fallback_env;   // and its environment
  std::int64_t next_id = 0;
  std::int64_t init_id = 0;
  std::int64_t started_at = 0;
  std::map<std::int64_t, inflight> calls;
  // One timer per supervisor, not one per call: each delayed message is a wake-up of CAF's
  // clock thread, which cost more than the rest of a call's bookkeeping (issue 7).
  deadline_map deadlines;
  // The two nodes of each finished call, kept for the next calls (emptied, at most
  // max_spare_nodes): a call in the steady state allocates none for its bookkeeping.
  std::vector<std::map<std::int64_t, inflight>::node_type> spare_calls;
  std::vector<deadline_map::node_type> spare_deadlines;
  std::int64_t armed = 0;  // the deadline the pending sweep was scheduled for; 0 = none
  std::map<std::int64_t, std::uint64_t> cancelled;  // rpc id → generation, awaiting any reply
  std::deque<queued_call> waiting;                  // calls that arrived before ready
  std::vector<caf::typed_response_promise<extension_info>> status_waiters;
  std::vector<caf::typed_response_promise<bool>> shutdown_waiters;
  std::deque<std::int64_t> restart_times;
  // Lines for the extension's stdin, written together when the mailbox run that made them
  // ends (wflush) or before any spawn, kill or signal, so their order against those holds.
  std::string outbox;
  std::uint64_t outbox_proc = 0;  // the process they are for
  bool outbox_scheduled = false;  // a wflush is in the mailbox
  // Host answers waiting for the extension to take what its input holds (write_host_answer),
  // oldest first, for the current process.
  std::deque<std::string> held_answers;
  std::size_t held_bytes = 0;
  std::int64_t held_retry_at = 0;  // when a delayed wflush tries them again (0: none is on its way)
  std::size_t host_in_flight = 0;  // the current process's host requests not yet answered
  bool host_full_logged = false;   // the refusal of one past max_host_in_flight was logged
  std::int64_t held_moved_at = 0;  // when a held answer last went out, or the first began to wait
  // While the replies of one read are handled: their results, sent to each asker together
  // when the read's lines are done (null otherwise: a result goes at once).
  answers_together<call_result, call_results>* together = nullptr;
  static inline const char* name = "extension_supervisor";

  supervisor_state() = default;
  supervisor_state(const supervisor_state&) = delete;
  supervisor_state& operator=(const supervisor_state&) = delete;
  // CAF destroys the state when the actor ends, however it ends. After a shutdown nothing is
  // left here. An actor that ended otherwise (killed, or a handler that threw) would leave its
  // process running with nobody reading it, and its askers waiting: a `request` is not
  // answered by CAF 0.17 for a promise dropped unanswered. So the process is killed, and every
  // call and question still open is answered here.
  ~supervisor_state();
};

supervisor_state::~supervisor_state() {
  // Nothing may leave a destructor: a failure to allocate here (the very failure an actor may
  // have ended for) would end the whole broker. Each step is tried on its own, the kill first.
  try {
    if (alive && loop) {
      spdlog::warn("extension '{}' lost its supervisor; its process is stopped", cfg.name);
      loop->kill_for_violation(proc_id, "its supervisor ended");
    }
  } catch (...) {  // the process then runs until the session stops the event loop
  }
  try {
    const std::string why = "extension '" + cfg.name + "' lost its supervisor";
    const call_result failed = call_error(io::rpc_error::crashed, why + "; the call did not finish");
    for (auto& [id, c] : calls) c.rp.deliver(failed);
    for (auto& q : waiting) q.rp.deliver(failed);
    info.state = extension_state::failed;
    info.reason = why;
    for (auto& rp : status_waiters) rp.deliver(info);
    for (auto& rp : shutdown_waiters) rp.deliver(true);
  } catch (...) {  // the askers that were not answered see the actor's down message
  }
}

using self_ptr = supervisor_actor::stateful_pointer<supervisor_state>;

// Writes the collected lines to the process they were made for.
void flush_outbox(self_ptr self) {
  auto& st = self->state;
  if (st.outbox.empty()) return;
  st.loop->write(st.outbox_proc, std::move(st.outbox));
  st.outbox.clear();
}

// One line for the extension's stdin. With nothing else in the mailbox it is written at once;
// otherwise it is collected and written with the others of this mailbox run (a burst of calls
// is one write(2) and one wake-up of the extension, not one each).
void write_line(self_ptr self, std::string line) {
  auto& st = self->state;
  if (!st.outbox.empty() && st.outbox_proc != st.proc_id) flush_outbox(self);
  if (st.outbox.empty() && self->mailbox().empty()) {
    line.push_back('\n');
    st.loop->write(st.proc_id, std::move(line));
    return;
  }
  st.outbox += line;
  st.outbox.push_back('\n');
  st.outbox_proc = st.proc_id;
  if (!st.outbox_scheduled) {
    st.outbox_scheduled = true;
    self->send(self, wflush_atom::value);
  }
}

void answer_status(self_ptr self) {
  for (auto& rp : self->state.status_waiters) rp.deliver(self->state.info);
  self->state.status_waiters.clear();
}

void start_process(self_ptr self) {
  auto& st = self->state;
  ++st.gen;
  st.held_answers.clear();  // the answers of a process that is gone
  st.held_bytes = 0;
  st.host_in_flight = 0;  // answers to a process that is gone are dropped uncounted
  st.info.state = extension_state::starting;
  st.alive = true;
  st.expected_exit = false;
  st.reconfining = false;
  st.started_at = now_ms();
  io::spawn_request req;
  req.argv = st.cfg.argv;
  req.cwd = st.cfg.folder;
  req.env = st.cfg.env;
  req.max_line_bytes = st.cfg.max_line_bytes;
  req.stderr_log = st.cfg.stderr_log;
  // The loop thread reaches the actor only through its mailbox.
  auto me = caf::actor_cast<caf::actor>(self);
  std::uint64_t gen = st.gen;
  io::process_callbacks cb;
  st.credit = std::make_shared<io::read_credit>();
  cb.credit = st.credit;
  // The io thread handles the lines itself when every worker sleeps (see run_here_scope).
  cb.on_lines = [me, gen, sys = &self->system(), loop = st.loop.get()](std::vector<std::string>&& lines) {
    run_here_scope here(
        *sys, [](const void* l) { return static_cast<const io::event_loop*>(l)->events_waiting(); }, loop);
    caf::anon_send(me, lines_atom::value, gen, std::move(lines));
  };
  cb.on_spawn_error = [me, gen](std::string why) { caf::anon_send(me, spawnfail_atom::value, gen, std::move(why)); };
  cb.on_exit = [me, gen](io::process_exit e) { caf::anon_send(me, exited_atom::value, gen, std::move(e)); };
  flush_outbox(self);  // what was written for the last process goes to it, not the next
  st.proc_id = st.loop->spawn(std::move(req), std::move(cb));
  st.init_id = ++st.next_id;
  json params = {{"protocolVersion", "0.1.0"}, {"capabilities", {{"tools", true}}}, {"config", st.cfg.init_config}};
  write_line(self, io::encode_request(st.init_id, "initialize", params));
  self->delayed_send(self, milliseconds(st.cfg.handshake_ms), timeout_atom::value, gen, std::int64_t{0});
}

// Schedules the sweep for the earliest deadline unless one is already due by then.
void arm_sweep(self_ptr self) {
  auto& st = self->state;
  if (st.deadlines.empty()) return;
  std::int64_t earliest = st.deadlines.begin()->first;
  if (st.armed != 0 && st.armed <= earliest) return;
  st.armed = earliest;
  // +1: the clock may fire within the millisecond before the deadline the check compares to.
  self->delayed_send(self, milliseconds(std::max<std::int64_t>(0, earliest - now_ms()) + 1), timeout_atom::value,
                     st.gen, sweep_id);
}

void send_call(self_ptr self, tool_call call, ticketed_promise<call_result> rp) {
  auto& st = self->state;
  std::int64_t id = ++st.next_id;
  write_line(self, io::encode_execute_request(id, call.tool_call_id, call.tool, call.input, call.cwd, call.session_id));
  std::uint64_t timeout = call.timeout_ms ? call.timeout_ms : st.cfg.call_timeout_ms;
  const std::int64_t due = now_ms() + static_cast<std::int64_t>(timeout);
  inflight c{std::move(rp), std::move(call.tool_call_id), std::move(call.progress_to), {}};
  if (st.spare_calls.empty() || st.spare_deadlines.empty()) {
    c.deadline = st.deadlines.emplace(due, id);
    st.calls.emplace(id, std::move(c));
  } else {
    auto d = std::move(st.spare_deadlines.back());
    st.spare_deadlines.pop_back();
    d.key() = due;
    d.mapped() = id;
    c.deadline = st.deadlines.insert(std::move(d));
    auto n = std::move(st.spare_calls.back());
    st.spare_calls.pop_back();
    n.key() = id;
    n.mapped() = std::move(c);
    st.calls.insert(std::move(n));
  }
  arm_sweep(self);
}

// Calls whose nodes are kept for reuse, at most (a burst leaves this many behind).
constexpr std::size_t max_spare_nodes = 256;

// Forgets call `id`'s bookkeeping (its answer has been delivered or will not be). Its nodes are
// kept, emptied, for the next call.
void forget_call(self_ptr self, std::map<std::int64_t, inflight>::iterator it) {
  auto& st = self->state;
  auto d = st.deadlines.extract(it->second.deadline);
  auto n = st.calls.extract(it);
  if (st.spare_calls.size() >= max_spare_nodes) return;
  n.mapped() = {};  // holds nothing of the call: no promise, no actor handle
  st.spare_calls.push_back(std::move(n));
  st.spare_deadlines.push_back(std::move(d));
}

// A new argv waits (reconfine): once no call is in flight, the process is asked to shut down
// (then the kill chain), and the next one starts with it at once, not counted as a crash.
void stop_for_reconfine(self_ptr self) {
  auto& st = self->state;
  if (!st.reconfining || !st.calls.empty() || !st.alive || st.stopping || st.expected_exit) return;
  st.expected_exit = true;
  write_line(self, io::encode_request(++st.next_id, "shutdown", json::object()));
  self->delayed_send(self, milliseconds(st.cfg.cancel_grace_ms), killstep_atom::value, st.gen, std::int64_t{0}, 1);
}

// Starts the cancel chain for call `id`: notify, wait the grace, SIGTERM, wait, SIGKILL.
void begin_kill_chain(self_ptr self, std::int64_t id, std::uint64_t grace_ms) {
  auto& st = self->state;
  st.cancelled[id] = st.gen;
  self->delayed_send(self, milliseconds(grace_ms), killstep_atom::value, st.gen, id, 1);
}

// Times out every call whose deadline has passed: -32004 to the caller, tools/cancel to the
// extension, then the kill chain if it does not answer within the grace.
void time_out_due(self_ptr self) {
  auto& st = self->state;
  std::int64_t now = now_ms();
  while (!st.deadlines.empty() && st.deadlines.begin()->first <= now) {
    std::int64_t id = st.deadlines.begin()->second;
    auto it = st.calls.find(id);
    if (it == st.calls.end()) {  // cannot happen: a call's deadline leaves with it
      st.deadlines.erase(st.deadlines.begin());
      continue;
    }
    it->second.rp.deliver(call_error(io::rpc_error::cancelled, "the call timed out", json{{"timeout", true}}));
    std::string tcid = it->second.tool_call_id;
    forget_call(self, it);
    write_line(self, io::encode_notification("tools/cancel", json{{"toolCallId", tcid}}));
    begin_kill_chain(self, id, st.cfg.cancel_grace_ms);
  }
  if (st.reconfining) stop_for_reconfine(self);  // the last call in flight may have gone
}

void fail_all(self_ptr self, const call_result& why) {
  auto& st = self->state;
  for (auto& [id, c] : st.calls) c.rp.deliver(why);
  st.calls.clear();
  st.deadlines.clear();
  st.cancelled.clear();
}

void mark_failed(self_ptr self, std::string reason) {
  auto& st = self->state;
  st.info.state = extension_state::failed;
  st.info.reason = std::move(reason);
  spdlog::error("extension {} failed: {}", st.cfg.name, st.info.reason);
  for (auto& q : st.waiting)
    q.rp.deliver(call_error(io::rpc_error::method_not_found,
                              "extension '" + st.cfg.name + "' failed: " + st.info.reason, json{{"reason", st.info.reason}}));
  st.waiting.clear();
  answer_status(self);
}

void on_ready(self_ptr self, const json& result) {
  auto& st = self->state;
  if (!result.is_object() || !result.contains("tools") || !result["tools"].is_array()) {
    flush_outbox(self);
    st.loop->kill_for_violation(st.proc_id, "its initialize reply has no tools array");
    return;
  }
  st.info.tools = result["tools"];
  st.info.state = extension_state::ready;
  st.fallback_argv.clear();  // the new profile holds
  st.fallback_env.clear();
  st.info.reason.clear();
  st.info.start_ms = now_ms() - st.started_at;
  spdlog::info("extension {} v{} ready in {} ms with {} tools", st.cfg.name, st.cfg.version, st.info.start_ms,
               st.info.tools.size());
  answer_status(self);
  // A new profile came while this process started in the one before: it stops again at once,
  // and the calls waiting go to the next (a review: it ran on in the old profile).
  if (st.reconfining) return stop_for_reconfine(self);
  while (!st.waiting.empty()) {
    auto q = std::move(st.waiting.front());
    st.waiting.pop_front();
    send_call(self, std::move(q.call), std::move(q.rp));
  }
}

// A response or error response to one of dhara's requests.
void on_answer(self_ptr self, const nlohmann::json& raw_id, call_result&& outcome) {
  auto& st = self->state;
  if (!raw_id.is_number_integer()) return;  // not an id dhara issued: ignore
  std::int64_t id = raw_id.get<std::int64_t>();
  if (id == st.init_id && st.info.state == extension_state::starting) {
    if (!outcome.ok) {
      flush_outbox(self);
      st.loop->kill_for_violation(st.proc_id, "initialize failed: " + outcome.message);
      return;
    }
    on_ready(self, outcome.result);
    return;
  }
  st.cancelled.erase(id);  // a late answer to a cancelled call stops its kill chain
  auto it = st.calls.find(id);
  if (it == st.calls.end()) {  // unknown or duplicate id: nothing waits for it
    if (st.reconfining) stop_for_reconfine(self);
    return;
  }
  // -32002 and -32003 are dhara's words: a denial it checked and audited, a crash it saw. An
  // extension answering with either is its tool failing (-32001), its own code kept in `data`:
  // `dhara run` counted it as a denial (exit 3) that no check made and the audit never held (a
  // review). But an extension may pass on a denial dhara made during the call (the std tools
  // answer a denied host/check with -32002): a call that saw one keeps its -32002.
  if (!outcome.ok && ((outcome.code == io::rpc_error::denied && !it->second.host_denied) ||
                      outcome.code == io::rpc_error::crashed)) {
    nlohmann::json data = outcome.data.is_object() ? std::move(outcome.data) : nlohmann::json::object();
    if (!outcome.data.is_null() && !outcome.data.is_object()) data["data"] = std::move(outcome.data);
    data["extensionCode"] = outcome.code;
    outcome.code = io::rpc_error::tool_error;
    outcome.data = std::move(data);
  }
  // The result moves on: no copy of its document.
  if (st.together != nullptr) st.together->add(it->second.rp, std::move(outcome));
  else it->second.rp.deliver(std::move(outcome));
  forget_call(self, it);
  if (st.reconfining) stop_for_reconfine(self);
}

void on_progress(self_ptr self, const json& params) {
  auto& st = self->state;
  if (!params.is_object()) return;
  auto tc = params.find("toolCallId");
  if (tc == params.end() || !tc->is_string()) return;
  for (auto& [id, c] : st.calls) {
    if (c.tool_call_id == tc->get_ref<const std::string&>() && c.progress_to) {
      caf::anon_send(c.progress_to, progress_atom::value, c.tool_call_id, params.value("update", json(nullptr)));
      break;
    }
  }
}

// A host answer larger than this once encoded is refused instead: the extension's input
// holds 64 MiB unread before it is stopped for not reading (io::spawn_request), and one text
// read of a 16 MiB file can grow to 96 MiB in JSON (a control character is six bytes), which
// stopped the extension that asked for it. The base64 of the largest file the host API reads
// (16 MiB: 22.4 MB) fits, and two such answers fit in the input together.
constexpr std::size_t max_host_answer_bytes = std::size_t{24} << 20;

std::string oversized_answer(const json& id, std::size_t bytes) {
  return io::encode_error(id, io::rpc_error::tool_error,
                          "the answer is " + std::to_string(bytes) + " bytes in JSON, more than the " +
                              std::to_string(max_host_answer_bytes) +
                              " a host answer may be; read the file with encoding \"base64\" (4/3 of its size)",
                          json{{"answerBytes", bytes}, {"maxAnswerBytes", max_host_answer_bytes}});
}

// Host answers go to the extension's input while it holds at most host_answer_room unread
// (the answer included): an extension that asks for several large files at once takes them
// one after the other, rather than being stopped for not reading when their sum passes the
// 64 MiB its input may hold (room is left for calls). Beyond that they wait here, looked at
// again every 25 ms; an answer that would make more than max_held_answer_bytes wait is
// refused instead, for the extension to ask again (memory stays bounded).
constexpr std::size_t host_answer_room = std::size_t{48} << 20;
constexpr std::size_t max_held_answer_bytes = std::size_t{64} << 20;
constexpr std::chrono::milliseconds held_answer_look{25};
// Answers that wait this long without one of them going out: the extension does not read
// what it asked for, and is stopped for it (as a full input stopped it before answers waited).
constexpr std::int64_t held_answer_patience_ms = 30000;

bool room_for(supervisor_state& st, std::size_t bytes) {
  return st.loop->queued_bytes(st.proc_id) + st.outbox.size() + bytes <= host_answer_room;
}

// Writes the host answers that wait, oldest first, as far as there is room; looks again later
// for the rest.
void write_held_answers(self_ptr self) {
  auto& st = self->state;
  const std::int64_t now = now_ms();
  while (!st.held_answers.empty() && room_for(st, st.held_answers.front().size())) {
    st.held_bytes -= st.held_answers.front().size();
    write_line(self, std::move(st.held_answers.front()));
    st.held_answers.pop_front();
    st.held_moved_at = now;
  }
  if (!st.held_answers.empty() && now - st.held_moved_at > held_answer_patience_ms) {
    st.held_answers.clear();
    st.held_bytes = 0;
    flush_outbox(self);
    st.loop->kill_for_violation(st.proc_id, "it does not read its input (host answers it asked for waited " +
                                                std::to_string(held_answer_patience_ms / 1000) + " s to be taken)");
    return;
  }
  if (!st.held_answers.empty() && st.held_retry_at == 0) {
    st.held_retry_at = now + held_answer_look.count();
    self->delayed_send(self, held_answer_look, wflush_atom::value);
  }
}

void write_host_answer(self_ptr self, const json& id, std::string line) {
  auto& st = self->state;
  if (st.held_answers.empty() && room_for(st, line.size())) return write_line(self, std::move(line));
  if (st.held_bytes + line.size() > max_held_answer_bytes) {
    return write_line(self, io::encode_error(id, io::rpc_error::tool_error,
                                             "the extension has not yet read " + std::to_string(st.held_bytes) +
                                                 " bytes of earlier host answers, and this answer of " +
                                                 std::to_string(line.size()) + " would pass the " +
                                                 std::to_string(max_held_answer_bytes) +
                                                 " that may wait; ask again once it has read them",
                                             json{{"answerBytes", line.size()}, {"waitingBytes", st.held_bytes}}));
  }
  if (st.held_answers.empty()) st.held_moved_at = now_ms();  // waiting starts now
  st.held_bytes += line.size();
  st.held_answers.push_back(std::move(line));
  write_held_answers(self);
}

// Host requests of one process in flight at once, queries (host/check) included; more are
// refused before any check (not audited: no decision was made), as the host API refuses a
// 17th operation: queries in flight were not bounded at all.
constexpr std::size_t max_host_in_flight = 64;

void on_message(self_ptr self, io::rpc_message& m) {
  if (auto* r = std::get_if<io::rpc_response>(&m)) {
    on_answer(self, r->id, call_result{true, std::move(r->result), 0, {}, nullptr});
  } else if (auto* e = std::get_if<io::rpc_error_response>(&m)) {
    on_answer(self, e->id, call_error(e->code, e->message, e->data));
  } else if (auto* n = std::get_if<io::rpc_notification>(&m)) {
    if (n->method == "tools/progress") on_progress(self, n->params);
  } else if (auto* q = std::get_if<io::rpc_request>(&m)) {
    // The host API (DESIGN §5): checked and audited by the host API actor; the answer goes
    // back to the process that asked, unless it has been replaced meanwhile.
    auto& st = self->state;
    if (!st.cfg.host) {
      write_line(self, io::encode_error(q->id, io::rpc_error::method_not_found, "this session has no host API",
                                        json{{"method", q->method}}));
      return;
    }
    if (st.host_in_flight >= max_host_in_flight) {
      if (!st.host_full_logged) {  // once until one is answered: the extension decides how often
        spdlog::warn("extension {}: {} host requests are in flight; more are refused unchecked until one is answered",
                     st.cfg.name, max_host_in_flight);
        st.host_full_logged = true;
      }
      write_line(self, io::encode_error(q->id, io::rpc_error::tool_error,
                                        q->method + ": " + std::to_string(max_host_in_flight) +
                                            " host requests of this extension are in flight already; send the next "
                                            "when one is answered"));
      return;
    }
    ++st.host_in_flight;
    std::string call_id;
    // The call it belongs to when only one can have made it: none given up on may still run in
    // the extension (a timed-out call's late host request was credited to the one call left in
    // flight, which read nothing: a review).
    if (st.calls.size() == 1 && st.cancelled.empty()) call_id = st.calls.begin()->second.tool_call_id;
    json id = q->id;
    std::uint64_t gen = st.gen;
    self->request(st.cfg.host, caf::infinite, host_atom::value, host_request{st.cfg.name, q->method, q->params, call_id})
        .then([self, id, gen](call_result& answer) {
          auto& s = self->state;
          if (gen != s.gen || !s.alive) return;
          --s.host_in_flight;
          s.host_full_logged = false;
          // A denial (an error -32002, or host/check's {allowed: false}) is credited to every
          // call in flight: which of them asked is the extension's to say.
          if ((!answer.ok && answer.code == io::rpc_error::denied) ||
              (answer.ok && answer.result.is_object() && answer.result.contains("allowed") &&
               answer.result["allowed"] == false))
            for (auto& [rpc_id, c] : s.calls) c.host_denied = true;
          std::string line = answer.ok ? io::encode_result(id, answer.result)
                                       : io::encode_error(id, answer.code, answer.message, answer.data);
          if (line.size() > max_host_answer_bytes) line = oversized_answer(id, line.size());
          write_host_answer(self, id, std::move(line));
        });
  }
}

void on_exit(self_ptr self, io::process_exit e) {
  auto& st = self->state;
  st.alive = false;
  if (st.stopping) {
    st.info.state = extension_state::stopped;
    fail_all(self, call_error(io::rpc_error::cancelled, "dhara is shutting down"));
    for (auto& q : st.waiting) q.rp.deliver(call_error(io::rpc_error::cancelled, "dhara is shutting down"));
    st.waiting.clear();
    for (auto& rp : st.shutdown_waiters) rp.deliver(true);
    st.shutdown_waiters.clear();
    answer_status(self);
    self->quit();
    return;
  }
  json data = {{"exitCode", e.term_signal ? json(nullptr) : json(e.exit_status)},
               {"signal", signal_name(e.term_signal)},
               {"stderrTail", e.stderr_tail.size() > 2048 ? e.stderr_tail.substr(e.stderr_tail.size() - 2048) : e.stderr_tail}};
  const std::string refusal = e.violation.empty() ? launcher_refusal(e, st.cfg.launcher_tag) : std::string();
  if (!refusal.empty()) {  // the tag stays dhara's: the line reads as the launcher wrote it untagged
    std::string tail = data["stderrTail"].get<std::string>();
    const std::string tagged = "dhara-launch[" + st.cfg.launcher_tag + "]: ";
    for (std::size_t at; (at = tail.find(tagged)) != std::string::npos;) tail.replace(at, tagged.size(), "dhara-launch: ");
    data["stderrTail"] = std::move(tail);
  }
  std::string what = !e.violation.empty() ? "extension '" + st.cfg.name + "' broke the protocol: " + e.violation
                     : st.expected_exit  ? "extension '" + st.cfg.name + "' was stopped: a cancelled or timed-out call did not end"
                     : !refusal.empty()  ? "extension '" + st.cfg.name + "' could not start in its sandbox"
                                         : "extension '" + st.cfg.name + "' crashed";
  // The launcher's reason goes last, where it reads as the cause of what came before.
  const std::string why = refusal.empty() ? std::string() : ": " + refusal;
  if (!e.violation.empty()) data["violation"] = e.violation;
  fail_all(self, call_error(io::rpc_error::crashed, what + why, data));
  bool counts = !st.expected_exit;
  // The launcher refused a profile that only added capabilities: the extension goes on in the
  // one it had (what was added stays dhara's checks and host requests only).
  if (!refusal.empty() && !st.fallback_argv.empty()) {
    spdlog::warn("extension {} could not start in its new sandbox profile ({}); it starts again in the one it had",
                 st.cfg.name, refusal);
    st.cfg.argv = std::exchange(st.fallback_argv, {});
    st.cfg.env = std::exchange(st.fallback_env, {});
    counts = false;
  }
  std::int64_t now = now_ms();
  if (counts) {
    st.restart_times.push_back(now);
    while (!st.restart_times.empty() && now - st.restart_times.front() > static_cast<std::int64_t>(st.cfg.restart_window_ms))
      st.restart_times.pop_front();
    if (st.restart_times.size() > st.cfg.max_restarts) {
      const std::size_t n = st.restart_times.size();
      const std::string times = std::to_string(n) + (n == 1 ? " time within " : " times within ") +
                                std::to_string(st.cfg.restart_window_ms / 1000) + " s; not restarting";
      mark_failed(self, refusal.empty() ? what + " " + times : what + " (it ended " + times + ")" + why);
      return;
    }
  }
  ++st.info.restarts;
  if (counts && !refusal.empty())
    spdlog::warn("{}{}; restarting", what, why);
  else if (counts)
    spdlog::warn("{} (exit code {}, signal {}); restarting", what, e.exit_status, e.term_signal);
  else if (st.reconfining)
    spdlog::info("extension {} stopped to start again in its new sandbox profile", st.cfg.name);
  else
    spdlog::info("extension {} stopped after a cancel or timeout; restarting", st.cfg.name);
  // Backoff: 50 ms, 100 ms, 200 ms … up to 2 s, by the number of recent crashes.
  std::uint64_t backoff = counts ? std::min<std::uint64_t>(2000, 50ull << (st.restart_times.size() - 1)) : 0;
  st.info.state = extension_state::starting;
  self->delayed_send(self, milliseconds(backoff), restart_atom::value, st.gen);
}

}  // namespace

supervisor_actor spawn_supervisor(caf::actor_system& sys, std::shared_ptr<io::event_loop> loop,
                                  supervisor_config config) {
  return sys.spawn([](self_ptr self, std::shared_ptr<io::event_loop> lp,
                      supervisor_config cfg) -> supervisor_actor::behavior_type {
    auto& st = self->state;
    st.loop = std::move(lp);
    st.info.name = cfg.name;
    st.info.version = cfg.version;
    st.cfg = std::move(cfg);
    start_process(self);
    return {
        [=](execute_atom, tool_call& call) -> caf::typed_response_promise<call_result> {
          auto& s = self->state;
          ticketed_promise<call_result> rp{self, call.ticket};
          auto handle = rp.handle();
          if (s.stopping) {
            rp.deliver(call_error(io::rpc_error::cancelled, "cancelled: extension '" + s.cfg.name + "' is shutting down"));
          } else if (s.info.state == extension_state::failed) {
            rp.deliver(call_error(io::rpc_error::method_not_found,
                                    "extension '" + s.cfg.name + "' is not running: " + s.info.reason,
                                    json{{"reason", s.info.reason}}));
          } else if (s.info.state == extension_state::ready && !s.expected_exit && !s.reconfining) {
            send_call(self, std::move(call), std::move(rp));
          } else {
            // Starting, or being stopped by the kill chain: sent once the next process is ready.
            s.waiting.push_back({std::move(call), std::move(rp)});
          }
          return handle;
        },
        [=](cancel_atom, const std::string& tool_call_id) {
          auto& s = self->state;
          for (auto it = s.waiting.begin(); it != s.waiting.end(); ++it) {
            if (it->call.tool_call_id != tool_call_id) continue;
            it->rp.deliver(call_error(io::rpc_error::cancelled, "cancelled"));
            s.waiting.erase(it);
            return;
          }
          for (auto it = s.calls.begin(); it != s.calls.end(); ++it) {
            if (it->second.tool_call_id != tool_call_id) continue;
            it->second.rp.deliver(call_error(io::rpc_error::cancelled, "cancelled"));
            std::int64_t id = it->first;
            forget_call(self, it);
            write_line(self, io::encode_notification("tools/cancel", json{{"toolCallId", tool_call_id}}));
            begin_kill_chain(self, id, s.cfg.cancel_grace_ms);
            if (s.reconfining) stop_for_reconfine(self);  // a review: a cancel left it waiting for ever
            return;
          }
        },
        [=](status_atom) -> caf::typed_response_promise<extension_info> {
          auto rp = self->make_response_promise<extension_info>();
          if (self->state.info.state == extension_state::starting)
            self->state.status_waiters.push_back(rp);
          else
            rp.deliver(self->state.info);
          return rp;
        },
        [=](shutdown_atom) -> caf::typed_response_promise<bool> {
          auto& s = self->state;
          auto rp = self->make_response_promise<bool>();
          s.shutdown_waiters.push_back(rp);
          if (s.stopping) return rp;
          s.stopping = true;
          if (!s.alive) {
            on_exit(self, {});
            return rp;
          }
          // A process still in its handshake has answered nothing: it gets SIGTERM at once, not a
          // shutdown request and the grace (an interrupted start waited 5 s on a hung one).
          if (s.info.state == extension_state::starting) {
            self->send(self, killstep_atom::value, s.gen, std::int64_t{0}, 1);
            return rp;
          }
          write_line(self, io::encode_request(++s.next_id, "shutdown", json::object()));
          self->delayed_send(self, milliseconds(s.cfg.cancel_grace_ms), killstep_atom::value, s.gen, std::int64_t{0}, 1);
          return rp;
        },
        [=](wflush_atom) {
          self->state.outbox_scheduled = false;
          flush_outbox(self);
          // Host answers that wait (rare): looked at again, and the retry this was, if it was one.
          auto& s = self->state;
          if (s.held_retry_at != 0 && now_ms() >= s.held_retry_at) s.held_retry_at = 0;
          if (!s.held_answers.empty()) write_held_answers(self);
        },
        [=](reconfine_atom, std::vector<std::string>& argv, std::vector<std::string>& env,
            std::vector<std::string>& fallback_argv, std::vector<std::string>& fallback_env) {
          auto& s = self->state;
          if (s.stopping || s.info.state == extension_state::failed || argv.empty()) return;
          s.fallback_argv = std::move(fallback_argv);
          s.fallback_env = std::move(fallback_env);
          s.cfg.argv = std::move(argv);  // every start from now on, a crash's restart too
          s.cfg.env = std::move(env);
          // Between a stop and its restart, or waiting for the restart's backoff: the next
          // start takes it. A process starting in the profile before stops once it is ready
          // (on_ready); a running one once its calls in flight have ended.
          if (!s.alive || s.expected_exit) return;
          s.reconfining = true;
          if (s.info.state == extension_state::ready) stop_for_reconfine(self);
        },
        [=](lines_atom, std::uint64_t gen, std::vector<std::string>& lines) {
          auto& s = self->state;
          if (gen != s.gen) return;
          if (s.credit->consumed()) s.loop->resume_reading(s.proc_id);
          // The results of these lines go to each asker in one message, once all are read
          // (however the loop ends: `answers` sends what it holds when it goes). Room for up to
          // 64 results (a read of progress lines holds none).
          answers_together<call_result, call_results> answers(std::min<std::size_t>(lines.size(), 64));
          s.together = &answers;
          struct unset {
            supervisor_state& st;
            ~unset() { st.together = nullptr; }
          } unset_together{s};
          for (const std::string& line : lines) {
            auto msg = io::parse_rpc(line);
            if (!msg) {
              flush_outbox(self);
              s.loop->kill_for_violation(s.proc_id, "it wrote a line that is not JSON-RPC: " + msg.err().message);
              return;
            }
            on_message(self, *msg);
          }
        },
        [=](exited_atom, std::uint64_t gen, io::process_exit& e) {
          if (gen == self->state.gen) on_exit(self, std::move(e));
        },
        [=](spawnfail_atom, std::uint64_t gen, const std::string& why) {
          auto& s = self->state;
          if (gen != s.gen) return;
          s.alive = false;
          fail_all(self, call_error(io::rpc_error::crashed, "extension '" + s.cfg.name + "' could not start: " + why));
          // A missing interpreter or file does not fix itself: no restart loop.
          mark_failed(self, "cannot start '" + s.cfg.argv.front() + "': " + why);
          if (s.stopping) on_exit(self, {});
        },
        [=](timeout_atom, std::uint64_t gen, std::int64_t id) {
          auto& s = self->state;
          if (id == sweep_id) {
            // Whatever generation scheduled it: the deadlines are those of the calls now.
            s.armed = 0;
            time_out_due(self);
            arm_sweep(self);
            return;
          }
          // Otherwise the handshake's own timer (id 0).
          if (gen != s.gen || !s.alive || s.info.state != extension_state::starting) return;
          flush_outbox(self);
          s.loop->kill_for_violation(s.proc_id, "it did not answer initialize within " +
                                                    std::to_string(s.cfg.handshake_ms) + " ms");
        },
        [=](restart_atom, std::uint64_t gen) {
          auto& s = self->state;
          if (gen == s.gen && !s.alive && !s.stopping && s.info.state != extension_state::failed) start_process(self);
        },
        [=](killstep_atom, std::uint64_t gen, std::int64_t id, int step) {
          auto& s = self->state;
          if (gen != s.gen || !s.alive) return;
          // A call answered before its SIGTERM needs no kill. Once SIGTERM went, SIGKILL follows
          // whatever comes: a late answer in between stopped the chain, and the process, which
          // ignored SIGTERM, ran on while every later call waited for its exit (a review).
          if (step == 1 && id != 0 && !s.cancelled.count(id)) return;
          s.expected_exit = true;
          if (step == 1) {
            flush_outbox(self);
            s.loop->signal(s.proc_id, SIGTERM);
            self->delayed_send(self, milliseconds(s.cfg.kill_grace_ms), killstep_atom::value, gen, id, 2);
          } else {
            flush_outbox(self);
            s.loop->signal(s.proc_id, SIGKILL);
          }
        },
    };
  }, std::move(loop), std::move(config));
}

}  // namespace dhara::actors
