// The headless batch runner: a driver actor keeps up to N calls in flight and prints each
// result line as it arrives.
#include "broker/batch.hpp"

#include <unistd.h>

#include <chrono>
#include <map>
#include <variant>

#include <caf/all.hpp>

#include "broker/call_flow.hpp"
#include "io/jsonrpc.hpp"
#include "io/line_output.hpp"
#include "policy/tool_gate.hpp"

namespace dhara::broker {
namespace {

using json = nlohmann::json;
using run_atom = caf::atom_constant<caf::atom("run")>;
using interrupt_atom = caf::atom_constant<caf::atom("interrupt")>;

// One printed line (DESIGN §9): id, tool, extension, status, then result or error.
json result_line(const batch_call& c, const std::string& extension, const actors::call_result& r, bool rejected = false) {
  json line = {{"id", c.id}, {"tool", c.tool}, {"extension", extension.empty() ? json(nullptr) : json(extension)}};
  if (r.ok) {
    bool is_error = r.result.is_object() && r.result.value("isError", false);
    line["status"] = rejected ? "rejected" : is_error ? "error" : "ok";
    line["result"] = r.result;
    return line;
  }
  switch (r.code) {
    case io::rpc_error::denied: line["status"] = "denied"; break;
    case io::rpc_error::cancelled: line["status"] = "cancelled"; break;
    default: line["status"] = "error"; break;
  }
  json err = {{"code", r.code}, {"message", r.message}};
  if (!r.data.is_null()) err["data"] = r.data;
  line["error"] = std::move(err);
  return line;
}

void count(batch_summary& s, const json& line) {
  const std::string& st = line["status"].get_ref<const std::string&>();
  if (st == "ok") ++s.ok;
  else if (st == "denied") ++s.denied;
  else if (st == "rejected") ++s.rejected;
  else if (st == "cancelled") ++s.cancelled;
  else ++s.error;
}

struct driver_state {
  std::vector<batch_call> calls;
  std::size_t next = 0;
  std::size_t inflight = 0;
  struct running_call {
    std::string extension;
    std::string tool_call_id;
    std::shared_ptr<bool> cancelled;
  };
  std::map<std::size_t, running_call> running;
  batch_summary summary;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_progress{};
  bool progress_shown = false;
  caf::typed_response_promise<batch_summary> done;
  actors::call_replies replies;  // the answers the calls wait for
  static inline const char* name = "batch_driver";
};

// The progress line for long batches on a terminal: shown after a second, at most ten times
// a second, erased at the end.
void show_progress(driver_state& st, bool final) {
  auto now = std::chrono::steady_clock::now();
  if (final) {
    if (st.progress_shown) std::fputs("\r\033[K", stderr);
    return;
  }
  if (now - st.started < std::chrono::seconds(1) || now - st.last_progress < std::chrono::milliseconds(100)) return;
  st.last_progress = now;
  st.progress_shown = true;
  const batch_summary& s = st.summary;
  std::size_t done = s.ok + s.error + s.denied + s.rejected + s.cancelled;
  std::fprintf(stderr, "\r\033[Kdhara: %zu/%zu calls, %zu in flight: %zu ok, %zu error, %zu denied", done, st.calls.size(),
               st.inflight, s.ok, s.error, s.denied);
  std::fflush(stderr);
}

}  // namespace
}  // namespace dhara::broker

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::broker::batch_summary)

namespace dhara::broker {

batch_summary run_batch(caf::actor_system& sys, const extension_host& host, std::vector<batch_call> calls,
                        const batch_options& options, std::FILE* out) {
  auto started = std::chrono::steady_clock::now();
  using driver_actor =
      caf::typed_actor<caf::replies_to<run_atom>::with<batch_summary>, caf::reacts_to<interrupt_atom>,
                       caf::reacts_to<actors::check_outcome>, caf::reacts_to<actors::check_outcomes>,
                       caf::reacts_to<actors::call_result>, caf::reacts_to<actors::call_results>>;
  // Each result is written as soon as its call finishes, by a thread of its own: a reader that
  // stops reading holds no actor (nor the io thread, which may run the driver). Declared
  // before the driver, so every line is written before run_batch returns.
  std::fflush(out);
  io::line_output lines(::fileno(out));
  auto print = [&lines](const json& line) { lines.write_line(line.dump(-1, ' ', false, json::error_handler_t::replace)); };
  auto driver = sys.spawn([&host, options, print](driver_actor::stateful_pointer<driver_state> self,
                                                   std::vector<batch_call> all) -> driver_actor::behavior_type {
    self->state.calls = std::move(all);
    auto finish_one = [self, print, options](const json& line) {
      count(self->state.summary, line);
      print(line);
      if (options.progress) show_progress(self->state, false);
    };
    // q: every call in flight is cancelled (its line still comes, as cancelled), and the calls
    // not started yet are reported as not run.
    // A line not run names the extension its tool would have run in, when it resolves (it was
    // null), and why: the user's q, or an interrupt (Ctrl-C or a signal: a SIGTERM read "the
    // user quit"; a review).
    auto quit = [self, &host, finish_one](const char* why) {
      auto& st = self->state;
      if (st.summary.quit) return;
      st.summary.quit = true;
      for (const auto& [index, call] : st.running) {
        *call.cancelled = true;  // not yet at the extension: it never gets there
        if (auto sup = host.supervisor(call.extension)) self->send(sup, actors::cancel_atom::value, call.tool_call_id);
      }
      for (; st.next < st.calls.size(); ++st.next) {
        const batch_call& c = st.calls[st.next];
        std::string ext = c.extension;
        if (c.error_code == 0) {
          auto resolved = host.resolve(c.tool, c.extension);
          if (auto* tool = std::get_if<registered_tool>(&resolved)) ext = tool->extension;
        }
        finish_one(result_line(c, ext, actors::call_error(io::rpc_error::cancelled, std::string("not run: ") + why)));
      }
    };
    auto dispatch = std::make_shared<std::function<void()>>();
    // Starts calls until `concurrency` are in flight; lines that fail before reaching an
    // extension are answered here and then. The function refers to itself weakly; pending
    // replies hold it strongly.
    *dispatch = [self, &host, options, finish_one, quit, weak = std::weak_ptr<std::function<void()>>(dispatch)] {
      auto& st = self->state;
      auto again = weak.lock();
      while (!st.summary.quit && st.inflight < std::max<std::size_t>(1, options.concurrency) && st.next < st.calls.size()) {
        std::size_t index = st.next++;
        const batch_call& c = st.calls[index];
        if (c.error_code != 0) {
          finish_one(result_line(c, c.extension, actors::call_error(c.error_code, c.error_message)));
          continue;
        }
        auto resolved = host.resolve(c.tool, c.extension);
        if (auto* err = std::get_if<resolve_error>(&resolved)) {
          json data = err->reason.empty() ? json(nullptr) : json{{"reason", err->reason}};
          finish_one(result_line(c, c.extension, actors::call_error(io::rpc_error::method_not_found, err->message, data)));
          continue;
        }
        call_spec spec{std::move(std::get<registered_tool>(resolved)), {}};
        spec.call.tool_call_id = "call-" + std::to_string(index + 1);
        spec.call.tool = spec.tool.name;
        spec.call.input = c.input;
        spec.call.cwd = options.cwd;
        spec.call.session_id = options.session_id;
        std::string ext = spec.tool.extension;
        st.running[index] = {ext, spec.call.tool_call_id, spec.cancelled};
        ++st.inflight;
        run_tool_call(self, host, std::move(spec), options.mode, options.approver,
                      [self, index, ext, finish_one, quit, again](call_outcome o) {
                        auto& s = self->state;
                        --s.inflight;
                        s.running.erase(index);
                        finish_one(result_line(s.calls[index], ext, o.result, o.rejected));
                        if (o.quit) quit("the user quit");
                        (*again)();
                      });
      }
      if (st.inflight == 0 && st.next == st.calls.size() && st.done.pending()) {
        if (options.progress) show_progress(st, true);
        st.done.deliver(st.summary);
        self->quit();
      }
    };
    self->set_down_handler([self](caf::down_msg& m) { self->state.replies.down(m); });
    return {
        [self, dispatch](run_atom) -> caf::typed_response_promise<batch_summary> {
          self->state.done = self->make_response_promise<batch_summary>();
          (*dispatch)();
          return self->state.done;
        },
        [quit, dispatch](interrupt_atom) {
          quit("the batch was interrupted (Ctrl-C or a signal)");
          (*dispatch)();
        },
        [self](actors::check_outcome& o) { self->state.replies.answered(o); },
        [self](actors::check_outcomes& os) { self->state.replies.answered(os); },
        [self](actors::call_result& r) { self->state.replies.answered(r); },
        [self](actors::call_results& rs) { self->state.replies.answered(rs); },
    };
  }, std::move(calls));

  if (options.on_start) options.on_start([driver] { caf::anon_send(driver, interrupt_atom::value); });
  batch_summary summary;
  caf::scoped_actor self{sys};
  self->request(driver, caf::infinite, run_atom::value)
      .receive([&](batch_summary& s) { summary = s; }, [&](caf::error&) { summary.exit_code = 1; });
  // Results that could not be written (stdout full, closed, its reader gone) are an error of
  // the run, not a silent exit 0 (a review).
  summary.output_error = lines.finish();
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (summary.quit) summary.exit_code = 130;
  else if (summary.output_error != 0) summary.exit_code = 1;
  else if (summary.error + summary.cancelled > 0) summary.exit_code = 4;
  else if (summary.denied + summary.rejected > 0) summary.exit_code = 3;
  return summary;
}

}  // namespace dhara::broker
