// libFuzzer target for the serve side of JSON-RPC (`dhara serve --stdio`): bytes from an agent
// client, split into lines the way the serve loop splits them (on '\n', blank lines skipped,
// no '\r' stripped), each through io::parse_rpc, and every answer the server builds from
// client-controlled parts — the client's id, its method name, its toolCallId, an extension's
// stderr bytes in a crash's data — must be one line that the client can parse back to the same
// id, code and message. (The params checks of initialize and tools/call live in cli/ and
// broker/serve.cpp, not in a pure function; they are exercised by tests/cli/serve_test.py.)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "io/jsonrpc.hpp"

namespace {

using json = nlohmann::json;
namespace rpc = dhara::io;

void require(bool ok) {
  if (!ok) std::abort();
}

// The answer line parses back as an error with this id and code, and one line.
void check_error_line(const std::string& line, const json& id, int code) {
  require(line.find('\n') == std::string::npos);
  auto back = rpc::parse_rpc(line);
  require(back.has_value());
  const auto* err = std::get_if<rpc::rpc_error_response>(&*back);
  require(err != nullptr);
  require(err->id == id && err->code == code);
}

void answer(const rpc::rpc_request& req, std::string_view raw_bytes) {
  // Success: {status: ok} for shutdown, any object for a tool result.
  const std::string ok = rpc::encode_result(req.id, json{{"status", "ok"}});
  auto back = rpc::parse_rpc(ok);
  require(back.has_value());
  const auto* res = std::get_if<rpc::rpc_response>(&*back);
  require(res != nullptr && res->id == req.id && (*res).result == json{{"status", "ok"}});

  // Unknown method, naming it (the method is client text).
  check_error_line(rpc::encode_error(req.id, rpc::rpc_error::method_not_found,
                                     "unknown method '" + req.method + "'", json{{"method", req.method}}),
                   req.id, rpc::rpc_error::method_not_found);

  // tools/call with a toolCallId already in flight; its data echoes the params.
  if (req.params.is_object()) {
    auto it = req.params.find("toolCallId");
    if (it != req.params.end() && it->is_string())
      check_error_line(rpc::encode_error(req.id, rpc::rpc_error::invalid_params,
                                         "toolCallId '" + it->get<std::string>() + "' is already in flight"),
                       req.id, rpc::rpc_error::invalid_params);
    check_error_line(rpc::encode_error(req.id, rpc::rpc_error::denied, "denied", json{{"params", req.params}}),
                     req.id, rpc::rpc_error::denied);
  }

  // A crash answer carries the extension's stderr tail: arbitrary bytes, maybe not UTF-8.
  check_error_line(rpc::encode_error(req.id, rpc::rpc_error::crashed, std::string(raw_bytes),
                                     json{{"exitCode", nullptr}, {"signal", "SIGKILL"}, {"stderrTail", std::string(raw_bytes)}}),
                   req.id, rpc::rpc_error::crashed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::size_t start = 0;
  while (start <= in.size()) {
    std::size_t nl = in.find('\n', start);
    const bool complete = nl != std::string_view::npos;
    std::string_view line = in.substr(start, complete ? nl - start : std::string_view::npos);
    start = complete ? nl + 1 : in.size() + 1;
    if (!complete) break;  // the serve loop waits for the newline
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto msg = rpc::parse_rpc(line);
    if (!msg) {
      const int code = rpc::rpc_error_code(msg.err());
      require(code == rpc::rpc_error::parse || code == rpc::rpc_error::invalid_request);
      // Answered as serve answers it: with the id when it can be read (cli/serve_cmd.cpp).
      const json id = rpc::refused_request_id(line);
      check_error_line(rpc::encode_error(id, code, msg.err().message), id, code);
      continue;
    }
    if (const auto* req = std::get_if<rpc::rpc_request>(&*msg)) {
      require(req->id.is_string() || req->id.is_number_integer());
      require(!req->method.empty());
      answer(*req, in.substr(0, 512));
    }
  }
  return 0;
}
