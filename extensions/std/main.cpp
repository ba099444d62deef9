// dhara-std: the bundled extension (read, write, edit, ls, grep, bash; see README.md).
// The main thread reads requests; each tools/execute runs on its own thread, so a running
// call can be cancelled and host/check answers reach the call waiting for them.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <thread>
#include <variant>

#include "extensions/std/tools.hpp"
#include "io/jsonrpc.hpp"

namespace dhara::stdext {
namespace {

constexpr std::size_t max_line_bytes = 64 * 1024 * 1024;

using tool_fn = tool_result (*)(const json&, const call_context&);

tool_fn find_tool(const std::string& name) {
  if (name == "read") return run_read;
  if (name == "write") return run_write;
  if (name == "edit") return run_edit;
  if (name == "ls") return run_ls;
  if (name == "grep") return run_grep;
  if (name == "bash") return run_bash;
  return nullptr;
}

void answer(const json& id, const tool_result& r) {
  if (r.rpc_code != 0) {
    send_line(io::encode_error(id, r.rpc_code, r.text, r.rpc_data));
    return;
  }
  json item = json::object();
  item["type"] = "text";
  item["text"] = r.text;
  json result = json::object();
  result["content"] = json::array({item});
  if (r.is_error) result["isError"] = true;
  if (!r.metadata.is_null()) result["metadata"] = r.metadata;
  send_line(io::encode_result(id, result));
}

// Runs on the call's own thread; answers exactly once.
void run_call(tool_fn tool, json id, json input, call_context ctx) {
  tool_result r;
  try {
    r = tool(input, ctx);
  } catch (const invalid_params& e) {
    r = {e.what(), true, nullptr, io::rpc_error::invalid_params, nullptr};
  } catch (const std::exception& e) {
    r = tool_failure(std::string("the tool failed unexpectedly: ") + e.what());
  }
  end_call(ctx.call);
  answer(id, r);
}

void execute(const io::rpc_request& req) {
  const json& p = req.params;
  auto bad = [&](const std::string& why) { send_line(io::encode_error(req.id, io::rpc_error::invalid_params, why)); };
  if (!p.is_object()) return bad("tools/execute needs params {toolCallId, toolName, input, context}");
  auto name = p.find("toolName");
  if (name == p.end() || !name->is_string()) return bad("tools/execute needs a string toolName");
  tool_fn tool = find_tool(name->get<std::string>());
  if (!tool)
    return send_line(io::encode_error(req.id, io::rpc_error::method_not_found,
                                      "unknown tool '" + name->get<std::string>() +
                                          "'; std has read, write, edit, ls, grep and bash"));
  json input = p.value("input", json::object());
  if (!input.is_object()) return bad("input must be an object");
  auto call_id = p.find("toolCallId");
  if (call_id != p.end() && !call_id->is_string()) return bad("toolCallId must be a string");
  const json& context = p.contains("context") ? p["context"] : json::object();
  if (!context.is_object()) return bad("context must be an object");
  auto cwd = context.find("cwd");
  if (cwd != context.end() && !cwd->is_string()) return bad("context.cwd must be a string");

  call_ptr call = begin_call(call_id != p.end() ? call_id->get<std::string>() : std::string());
  if (!call)
    return send_line(io::encode_error(req.id, io::rpc_error::tool_error,
                                      "too many calls in flight (" + std::to_string(max_calls_in_flight) + "); retry later"));
  call_context ctx{call, cwd != context.end() ? cwd->get<std::string>() : std::string()};
  try {
    std::thread(run_call, tool, req.id, std::move(input), std::move(ctx)).detach();
  } catch (const std::exception& e) {  // no thread to be had: answer here
    end_call(call);
    send_line(io::encode_error(req.id, io::rpc_error::tool_error, std::string("cannot start the call: ") + e.what()));
  }
}

std::string tool_call_id_of(const json& params) {
  if (!params.is_object() || !params.contains("toolCallId") || !params["toolCallId"].is_string()) return {};
  return params["toolCallId"].get<std::string>();
}

[[noreturn]] void stop() {
  cancel_calls("");
  kill_all_children();
  ::_exit(0);
}

void on_request(const io::rpc_request& req) {
  if (req.method == "initialize") {
    json result = {{"protocolVersion", "0.1.0"}, {"name", "std"}, {"version", "0.1.0"}, {"tools", tool_catalog()}};
    send_line(io::encode_result(req.id, result));
  } else if (req.method == "tools/execute") {
    execute(req);
  } else if (req.method == "tools/cancel") {
    cancel_calls(tool_call_id_of(req.params));
    send_line(io::encode_result(req.id, json::object()));
  } else if (req.method == "shutdown") {
    cancel_calls("");
    send_line(io::encode_result(req.id, {{"status", "ok"}}));
    stop();
  } else {
    send_line(io::encode_error(req.id, io::rpc_error::method_not_found, "method '" + req.method + "' not found"));
  }
}

void on_line(std::string_view line) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;  // blank
  auto msg = io::parse_rpc(line);
  if (!msg) {
    send_line(io::encode_error(io::refused_request_id(line), io::rpc_error_code(msg.err()), msg.err().message));
    return;
  }
  if (auto* r = std::get_if<io::rpc_request>(&*msg)) {
    on_request(*r);
  } else if (auto* n = std::get_if<io::rpc_notification>(&*msg)) {
    if (n->method == "tools/cancel") cancel_calls(tool_call_id_of(n->params));  // others need no answer
  } else if (auto* ok = std::get_if<io::rpc_response>(&*msg)) {
    deliver_host_answer(ok->id, json{{"result", ok->result}});
  } else if (auto* e = std::get_if<io::rpc_error_response>(&*msg)) {
    deliver_host_answer(e->id, json{{"error", {{"code", e->code}, {"message", e->message}}}});
  }
}

extern "C" void on_sigterm(int) {
  kill_all_children();  // async-signal-safe; then die of SIGTERM as dhara asked
  ::signal(SIGTERM, SIG_DFL);
  ::raise(SIGTERM);
}

}  // namespace
}  // namespace dhara::stdext

int main() {
  using namespace dhara::stdext;
  ::signal(SIGPIPE, SIG_IGN);  // a closed pipe is an error return, not a death
  struct sigaction term {};
  term.sa_handler = on_sigterm;
  ::sigaction(SIGTERM, &term, nullptr);

  std::string buf;
  std::size_t scanned = 0;
  bool skipping = false;  // inside a line over max_line_bytes: dropped up to its newline
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) stop();  // EOF: dhara is gone or done with us
    buf.append(chunk, static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t nl; (nl = buf.find('\n', scanned)) != std::string::npos; start = scanned = nl + 1) {
      if (!skipping) on_line(std::string_view(buf).substr(start, nl - start));
      skipping = false;
    }
    buf.erase(0, start);
    scanned = buf.size();
    if (buf.size() > max_line_bytes) {
      if (!skipping)
        send_line(dhara::io::encode_error(nullptr, dhara::io::rpc_error::parse, "the line is longer than 64 MiB; dropped"));
      skipping = true;
      buf.clear();
      scanned = 0;
    }
  }
}
