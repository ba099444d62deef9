// The std extension's side of the protocol (DESIGN §5): one locked writer for stdout, the
// calls in flight (so `tools/cancel` can reach them), and host/check requests to dhara.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace dhara::stdext {

using json = nlohmann::json;

/// Most tools/execute calls running at once; one more is refused with a tool error.
inline constexpr std::size_t max_calls_in_flight = 64;

/// Writes one message as a line on stdout; safe from any thread.
void send_line(const std::string& line);

/// One tools/execute call while it runs: shared by its worker thread and the reader thread.
struct call_state {
  std::string tool_call_id;
  std::atomic<bool> cancelled{false};
  std::size_t slot = 0;  ///< its place in the child process group table
};
using call_ptr = std::shared_ptr<call_state>;

/// Registers a call; nullptr when max_calls_in_flight are already running.
call_ptr begin_call(std::string tool_call_id);

/// Forgets a call once it has been answered.
void end_call(const call_ptr& call);

/// Marks the call `tool_call_id` (every call when empty) cancelled and kills its child
/// process group, if it runs one.
void cancel_calls(std::string_view tool_call_id);

/// Records `group` as the process group `call` runs (0: none any more). Until it is cleared,
/// cancel_calls and kill_all_children may SIGKILL it, so clear it before reaping the child.
void set_child_group(const call_ptr& call, pid_t group);

/// SIGKILLs every recorded child process group. Async-signal-safe (used by the SIGTERM handler).
void kill_all_children();

/// What dhara answered a host/check.
enum class host_verdict {
  allowed,  ///< the check passed
  denied,   ///< dhara denied it (audited as a denial)
  failed,   ///< no usable answer: an error reply, or the call was cancelled while waiting
};

/// Asks dhara, with host/check, whether `capability` on `path` is allowed (dhara audits it).
/// Unless allowed, `reason` says why.
host_verdict host_check(const call_state& call, std::string_view capability, const std::string& path,
                        std::string& reason);

/// Hands an answer (result or error) to the host request that waits for it. False when no
/// request of ours has that id.
bool deliver_host_answer(const json& id, json answer);

}  // namespace dhara::stdext
