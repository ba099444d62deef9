// The six tools of the std extension and what they share: the call's context, the result
// (DESIGN §5 tools/execute), and strict readers for the input object.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "extensions/std/paths.hpp"
#include "extensions/std/rpc.hpp"

namespace dhara::stdext {

/// What a tool answers: a result {content: [{type: "text", text}], isError?, metadata?}, or,
/// when `rpc_code` is set, a JSON-RPC error {code: rpc_code, message: text, data: rpc_data}.
struct tool_result {
  std::string text;
  bool is_error = false;
  json metadata;       ///< null: none
  int rpc_code = 0;    ///< -32002 denied, -32004 cancelled
  json rpc_data;       ///< null: none
};

/// A tool's input that it cannot use (a missing key, a wrong type): answered -32602.
struct invalid_params : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One call as a tool sees it.
struct call_context {
  call_ptr call;
  std::string cwd;  ///< context.cwd as sent: the session's cwd, "" when absent
};

/// A failed tool: isError with one sentence.
tool_result tool_failure(std::string sentence);
/// A check dhara denied during the call (host/check): error -32002 {capability, reason}.
tool_result denied(std::string_view capability, std::string reason);
/// The call stopped because it was cancelled: error -32004.
tool_result cancelled();

/// An optional string input; invalid_params when present but not a string.
std::optional<std::string> string_input(const json& input, const char* key);
/// A required string input; invalid_params when absent or not a string.
std::string required_string(const json& input, const char* key);
/// An optional integer input in [min, max]; invalid_params when present but not such an integer.
std::optional<std::int64_t> integer_input(const json& input, const char* key, std::int64_t min, std::int64_t max);
/// An optional boolean input; invalid_params when present but not a boolean.
bool bool_input(const json& input, const char* key, bool fallback);

/// The resolved path a listing tool works on: `path` when given (the gate checked it), else
/// the call's cwd, which the gate did not check, so it is checked now with host/check.
/// Sets `result` and returns nullopt when the path is unusable or denied.
std::optional<checked_path> listing_root(const json& input, const call_context& ctx, tool_result& result);

tool_result run_read(const json& input, const call_context& ctx);
tool_result run_write(const json& input, const call_context& ctx);
tool_result run_edit(const json& input, const call_context& ctx);
tool_result run_ls(const json& input, const call_context& ctx);
tool_result run_grep(const json& input, const call_context& ctx);
tool_result run_bash(const json& input, const call_context& ctx);

/// The `tools` array of the initialize result: name, description, parameters, capabilities.
json tool_catalog();

}  // namespace dhara::stdext
