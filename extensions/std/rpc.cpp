// The std extension's protocol plumbing: the stdout writer, the calls in flight, host/check.
#include "extensions/std/rpc.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <vector>

#include "io/jsonrpc.hpp"

namespace dhara::stdext {
namespace {

std::mutex out_mu;  // one line at a time on stdout

// The reader thread cancels what the workers run: `calls` and the child group table change
// under calls_mu. The table is also read, without the lock, by the SIGTERM handler.
std::mutex calls_mu;
std::vector<call_ptr> calls;
std::array<bool, max_calls_in_flight> slot_used{};
std::array<std::atomic<pid_t>, max_calls_in_flight> child_groups{};

std::mutex host_mu;
std::map<std::string, std::shared_ptr<std::promise<json>>, std::less<>> host_waiting;
std::uint64_t host_next_id = 0;

}  // namespace

void send_line(const std::string& line) {
  std::string out = line;
  out.push_back('\n');
  std::lock_guard lock(out_mu);
  for (std::size_t off = 0; off < out.size();) {
    ssize_t n = ::write(STDOUT_FILENO, out.data() + off, out.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // dhara is gone: nobody is left to answer, and nothing may outlive us
      kill_all_children();
      ::_exit(0);
    }
    off += static_cast<std::size_t>(n);
  }
}

call_ptr begin_call(std::string tool_call_id) {
  std::lock_guard lock(calls_mu);
  auto free_slot = std::find(slot_used.begin(), slot_used.end(), false);
  if (free_slot == slot_used.end()) return nullptr;
  *free_slot = true;
  auto call = std::make_shared<call_state>();
  call->tool_call_id = std::move(tool_call_id);
  call->slot = static_cast<std::size_t>(free_slot - slot_used.begin());
  calls.push_back(call);
  return call;
}

void end_call(const call_ptr& call) {
  std::lock_guard lock(calls_mu);
  child_groups[call->slot] = 0;
  slot_used[call->slot] = false;
  std::erase(calls, call);
}

void cancel_calls(std::string_view tool_call_id) {
  std::lock_guard lock(calls_mu);
  for (const call_ptr& call : calls) {
    if (!tool_call_id.empty() && call->tool_call_id != tool_call_id) continue;
    call->cancelled = true;
    // The worker clears the group before it reaps the child, so this pid is still ours.
    if (pid_t group = child_groups[call->slot]; group > 0) ::kill(-group, SIGKILL);
  }
}

void set_child_group(const call_ptr& call, pid_t group) {
  std::lock_guard lock(calls_mu);
  child_groups[call->slot] = group;
}

void kill_all_children() {
  for (const auto& group : child_groups)
    if (pid_t g = group.load(); g > 0) ::kill(-g, SIGKILL);
}

host_verdict host_check(const call_state& call, std::string_view capability, const std::string& path,
                        std::string& reason) {
  auto waiter = std::make_shared<std::promise<json>>();
  std::future<json> answer = waiter->get_future();
  std::string id;
  {
    std::lock_guard lock(host_mu);
    id = "std-host-" + std::to_string(++host_next_id);
    host_waiting.emplace(id, waiter);
  }
  send_line(io::encode_request(id, "host/check", {{"capability", capability}, {"details", {{"path", path}}}}));
  // A cancelled call stops waiting; the late answer then finds no waiter and is dropped.
  while (answer.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    if (!call.cancelled) continue;
    std::lock_guard lock(host_mu);
    host_waiting.erase(id);
    reason = "the call was cancelled";
    return host_verdict::failed;
  }
  json a = answer.get();
  if (!a.contains("result")) {
    const json& err = a.value("error", json::object());
    reason = "dhara did not answer the check: " +
             (err.is_object() && err.contains("message") && err["message"].is_string()
                  ? err["message"].get<std::string>()
                  : std::string("no reason given"));
    return host_verdict::failed;
  }
  const json& r = a["result"];
  bool allowed = r.is_object() && r.contains("allowed") && r["allowed"].is_boolean() && r["allowed"].get<bool>();
  if (!allowed)
    reason = r.is_object() && r.contains("reason") && r["reason"].is_string() ? r["reason"].get<std::string>()
                                                                               : std::string("denied");
  return allowed ? host_verdict::allowed : host_verdict::denied;
}

bool deliver_host_answer(const json& id, json answer) {
  if (!id.is_string()) return false;
  std::shared_ptr<std::promise<json>> waiter;
  {
    std::lock_guard lock(host_mu);
    auto it = host_waiting.find(id.get<std::string>());
    if (it == host_waiting.end()) return false;
    waiter = std::move(it->second);
    host_waiting.erase(it);
  }
  waiter->set_value(std::move(answer));
  return true;
}

}  // namespace dhara::stdext
