// Atoms and message types shared by dhara's actors. Types that carry JSON or pointers are
// whitelisted as local-only message types: dhara's actors never cross a network.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/actor.hpp>
#include <nlohmann/json.hpp>

#include "io/event_loop.hpp"

namespace dhara::actors {

using execute_atom = caf::atom_constant<caf::atom("execute")>;      ///< run a tool call
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;        ///< cancel a tool call
using status_atom = caf::atom_constant<caf::atom("status")>;        ///< state and tools
using shutdown_atom = caf::atom_constant<caf::atom("shutdown")>;    ///< graceful stop
using lines_atom = caf::atom_constant<caf::atom("lines")>;          ///< stdout lines (io thread)
using exited_atom = caf::atom_constant<caf::atom("exited")>;        ///< process ended (io thread)
using spawnfail_atom = caf::atom_constant<caf::atom("spawnfail")>;  ///< spawn failed (io thread)
using timeout_atom = caf::atom_constant<caf::atom("timeout")>;      ///< a handshake or call timer
using restart_atom = caf::atom_constant<caf::atom("restart")>;      ///< backoff elapsed
using killstep_atom = caf::atom_constant<caf::atom("killstep")>;    ///< next step of a kill chain
using progress_atom = caf::atom_constant<caf::atom("progress")>;    ///< tools/progress forwarded
using wflush_atom = caf::atom_constant<caf::atom("wflush")>;        ///< write what a supervisor collected
using reconfine_atom = caf::atom_constant<caf::atom("reconfine")>;  ///< start again with another argv (sandbox)

/// One tool call for an extension.
struct tool_call {
  std::string tool_call_id;         ///< unique per session; the key for cancel and progress
  std::string tool;                 ///< the bare tool name the extension knows
  nlohmann::json input = nlohmann::json::object();
  std::string cwd;
  std::string session_id;
  std::uint64_t timeout_ms = 0;     ///< 0 = the extension's callTimeoutMs
  caf::actor progress_to;           ///< receives (progress_atom, toolCallId, update); may be null
  std::uint64_t ticket = 0;         ///< the caller's, echoed in the call_result (actors/ticketed_promise.hpp)
};

/// What a tool call produced: the extension's result object, or a JSON-RPC error.
struct call_result {
  bool ok = false;
  nlohmann::json result;            ///< when ok: {content, isError?, …} as the extension sent it
  int code = 0;                     ///< when !ok: -32001 … -32004, -32601, -32602
  std::string message;
  nlohmann::json data;              ///< e.g. {exitCode, signal, stderrTail} for -32003
  std::uint64_t ticket = 0;         ///< the tool_call's ticket, when it was sent with one
};

/// Several results to one asker, released together: the calls it sent with `send` and a
/// ticket whose replies came in one read of the extension's output. One message instead of
/// one per result (actors/ticketed_promise.hpp, answers_together); whoever sends tickets takes
/// it as it takes a call_result (call_replies::answered).
struct call_results {
  std::vector<call_result> results;
};

/// A failed call: a JSON-RPC error code, its sentence, and optional data.
inline call_result call_error(int code, std::string message, nlohmann::json data = nullptr) {
  return {false, nullptr, code, std::move(message), std::move(data)};
}

/// An extension's state as `extensions list` shows it.
enum class extension_state { starting, ready, failed, stopped };
std::string_view to_string(extension_state s);

/// A snapshot of one supervisor.
struct extension_info {
  std::string name;
  std::string version;
  extension_state state = extension_state::starting;
  std::string reason;               ///< why it failed (empty when ready)
  nlohmann::json tools = nlohmann::json::array();  ///< from its initialize reply
  std::uint32_t restarts = 0;
  std::int64_t start_ms = 0;        ///< how long the last start (spawn → initialize reply) took
};

}  // namespace dhara::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::tool_call)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::call_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::call_results)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::extension_info)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::io::process_exit)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(nlohmann::json)
