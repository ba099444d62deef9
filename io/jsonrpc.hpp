// JSON-RPC 2.0 codec for the extension protocol and serve mode (DESIGN §5, §9): one fuzzable
// parse function for untrusted lines, and encoders that write one line each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "policy/result.hpp"

namespace dhara::io {

/// JSON-RPC error codes used by dhara (DESIGN §5).
namespace rpc_error {
constexpr int parse = -32700;             ///< the line is not JSON (or nested too deep)
constexpr int invalid_request = -32600;   ///< JSON, but not a JSON-RPC 2.0 message
constexpr int method_not_found = -32601;  ///< unknown method or tool
constexpr int invalid_params = -32602;    ///< params of the wrong shape
constexpr int tool_error = -32001;        ///< the tool failed
constexpr int denied = -32002;            ///< capability denied; data {capability, reason}
constexpr int crashed = -32003;           ///< extension crashed; data {exitCode, signal, stderrTail}
constexpr int cancelled = -32004;         ///< cancelled or timed out
}  // namespace rpc_error

/// Deepest JSON nesting accepted in a message ({} is depth 1); deeper is a parse error.
inline constexpr std::size_t rpc_max_depth = 256;

/// A call that expects an answer. `id` is an integer or a string.
struct rpc_request {
  nlohmann::json id;
  std::string method;      ///< non-empty
  nlohmann::json params;   ///< object or array; null when absent
  bool operator==(const rpc_request&) const = default;
};

/// A call without an answer (no "id" member).
struct rpc_notification {
  std::string method;      ///< non-empty
  nlohmann::json params;   ///< object or array; null when absent
  bool operator==(const rpc_notification&) const = default;
};

/// A successful answer. `id` is an integer or a string.
struct rpc_response {
  nlohmann::json id;
  nlohmann::json result;   ///< any JSON value, null included
  bool operator==(const rpc_response&) const = default;
};

/// A failed answer. `id` is an integer, a string, or null (the request could not be read).
struct rpc_error_response {
  nlohmann::json id;
  int code = 0;
  std::string message;
  nlohmann::json data;     ///< null when absent
  bool operator==(const rpc_error_response&) const = default;
};

/// One decoded line.
using rpc_message = std::variant<rpc_request, rpc_notification, rpc_response, rpc_error_response>;

/// Decodes one line (without its newline) of untrusted bytes. Not JSON, invalid UTF-8, or
/// nesting deeper than rpc_max_depth is errc::parse_error (answer rpc_error::parse); JSON
/// that is not one JSON-RPC 2.0 message (batch arrays included) is errc::invalid_value
/// (answer rpc_error::invalid_request). Unknown members are ignored. Error messages are
/// printable ASCII and short, whatever the input. Never throws.
policy::result<rpc_message> parse_rpc(std::string_view line);

/// The error code to answer a parse_rpc failure with: parse or invalid_request.
int rpc_error_code(const policy::error& parse_failure);

/// The id to answer a line parse_rpc refused with: the line's "id" when it is a JSON object
/// that is not a response (no "result" or "error") and its "id" is a string or an integer, so
/// that a client waiting for that id hears why; else null, as JSON-RPC 2.0 answers a request
/// whose id cannot be read. Never throws.
nlohmann::json refused_request_id(std::string_view line);

/// One request line, without "\n". `id`: integer or string; null `params` is left out.
std::string encode_request(const nlohmann::json& id, std::string_view method,
                           const nlohmann::json& params);

/// The tools/execute request line for one call, without "\n": the same message as
/// encode_request(id, "tools/execute", {toolCallId, toolName, input, context {cwd,
/// sessionId}}), written without building the params document (the supervisor's hot path).
std::string encode_execute_request(std::int64_t id, std::string_view tool_call_id, std::string_view tool,
                                   const nlohmann::json& input, std::string_view cwd, std::string_view session_id);

/// One notification line, without "\n"; null `params` is left out.
std::string encode_notification(std::string_view method, const nlohmann::json& params);

/// One success response line, without "\n". `id`: integer or string.
std::string encode_result(const nlohmann::json& id, const nlohmann::json& result);

/// One error response line, without "\n". `id`: integer, string or null; null `data` is
/// left out.
std::string encode_error(const nlohmann::json& id, int code, std::string_view message,
                         const nlohmann::json& data = nullptr);

/// The line for any decoded message (encode_request, ... by kind).
std::string encode(const rpc_message& message);

}  // namespace dhara::io
