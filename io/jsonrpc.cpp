// JSON-RPC 2.0 codec: a depth-limited parse of untrusted lines into typed messages, and
// line encoders that cannot throw on bad UTF-8 or emit a raw newline.
#include "io/jsonrpc.hpp"

#include "policy/audit_entry.hpp"
#include "policy/json_fast.hpp"
#include "policy/json_text.hpp"

#include <climits>
#include <cstdint>
#include <exception>
#include <optional>
#include <utility>

namespace dhara::io {

namespace {

using json = nlohmann::json;
using policy::errc;
using policy::error;
using policy::make_error;

error invalid(std::string message) { return make_error(errc::invalid_value, std::move(message)); }

bool valid_id(const json& id) { return id.is_string() || id.is_number_integer(); }

std::string dump(const json& value) {
  // replace: invalid UTF-8 from a caller becomes U+FFFD instead of an exception; compact
  // output escapes control characters, so a line never holds a raw newline.
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Appends `value` as dump() writes it, without a serializer per call (nlohmann builds one,
// with its locale lookup and buffer, for every dump): keys in the document's (sorted) order,
// strings through policy::append_json_string. For valid UTF-8 without U+2028/U+2029 the bytes
// are dump()'s; otherwise the same value once parsed (those two escaped, invalid UTF-8 as
// \ufffd). Floating-point numbers, rare in a tool's input, are dump()'s own.
void append_json(std::string& out, const json& value) {
  switch (value.type()) {
    case json::value_t::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, member] : value.get_ref<const json::object_t&>()) {
        if (!first) out.push_back(',');
        first = false;
        policy::append_json_string(out, key);
        out.push_back(':');
        append_json(out, member);
      }
      out.push_back('}');
      return;
    }
    case json::value_t::array: {
      out.push_back('[');
      bool first = true;
      for (const json& element : value.get_ref<const json::array_t&>()) {
        if (!first) out.push_back(',');
        first = false;
        append_json(out, element);
      }
      out.push_back(']');
      return;
    }
    case json::value_t::string: policy::append_json_string(out, value.get_ref<const std::string&>()); return;
    case json::value_t::boolean: out += value.get<bool>() ? "true" : "false"; return;
    case json::value_t::null: out += "null"; return;
    case json::value_t::number_integer: out += std::to_string(value.get<std::int64_t>()); return;
    case json::value_t::number_unsigned: out += std::to_string(value.get<std::uint64_t>()); return;
    default: out += dump(value); return;  // floats, binary, discarded
  }
}

// Members are looked up once; absent ones are null pointers.
struct members {
  json* id = nullptr;
  json* method = nullptr;
  json* params = nullptr;
  json* result = nullptr;
  json* error = nullptr;
};

policy::result<rpc_message> parse_error_response(json& err, json* id) {
  if (!id) return invalid("an error response needs \"id\" (null when the request could not be read)");
  if (!id->is_null() && !valid_id(*id))
    return invalid("\"id\" must be a string, an integer or null, got " + std::string(id->type_name()));
  if (!err.is_object()) return invalid("\"error\" must be an object, got " + std::string(err.type_name()));
  const auto code = err.find("code");
  if (code == err.end() || !code->is_number_integer())
    return invalid("\"error.code\" must be an integer");
  bool fits = false;
  if (code->is_number_unsigned()) {
    fits = code->get<std::uint64_t>() <= static_cast<std::uint64_t>(INT_MAX);
  } else {
    const auto v = code->get<std::int64_t>();
    fits = v >= INT_MIN && v <= INT_MAX;
  }
  if (!fits) return invalid("\"error.code\" is out of range");
  const auto message = err.find("message");
  if (message == err.end() || !message->is_string()) return invalid("\"error.message\" must be a string");
  rpc_error_response out;
  out.id = std::move(*id);
  out.code = code->get<int>();
  out.message = std::move(message->get_ref<std::string&>());
  if (const auto data = err.find("data"); data != err.end()) out.data = std::move(*data);
  return rpc_message(std::move(out));
}

policy::result<rpc_message> to_message(json& doc) {
  if (doc.is_array()) return invalid("batch requests (JSON arrays) are not supported; send one object per line");
  if (!doc.is_object()) return invalid("a JSON-RPC message must be an object, got " + std::string(doc.type_name()));

  const auto version = doc.find("jsonrpc");
  if (version == doc.end()) return invalid("missing \"jsonrpc\": \"2.0\"");
  if (!version->is_string() || version->get_ref<const std::string&>() != "2.0")
    return invalid("\"jsonrpc\" must be \"2.0\"");

  members m;
  const auto find = [&doc](const char* name) -> json* {
    const auto it = doc.find(name);
    return it == doc.end() ? nullptr : &*it;
  };
  m.id = find("id");
  m.method = find("method");
  m.params = find("params");
  m.result = find("result");
  m.error = find("error");

  if (m.method) {
    if (m.result || m.error) return invalid("a message cannot have both \"method\" and \"result\" or \"error\"");
    if (!m.method->is_string())
      return invalid("\"method\" must be a string, got " + std::string(m.method->type_name()));
    if (m.method->get_ref<const std::string&>().empty()) return invalid("\"method\" must not be empty");
    json params;
    if (m.params) {
      if (!m.params->is_object() && !m.params->is_array())
        return invalid("\"params\" must be an object or an array, got " + std::string(m.params->type_name()));
      params = std::move(*m.params);
    }
    std::string method = std::move(m.method->get_ref<std::string&>());
    if (!m.id) return rpc_message(rpc_notification{std::move(method), std::move(params)});
    if (!valid_id(*m.id))
      return invalid("\"id\" of a request must be a string or an integer, got " + std::string(m.id->type_name()));
    return rpc_message(rpc_request{std::move(*m.id), std::move(method), std::move(params)});
  }

  if (m.result && m.error) return invalid("a response cannot have both \"result\" and \"error\"");
  if (m.error) return parse_error_response(*m.error, m.id);
  if (m.result) {
    if (!m.id) return invalid("a response needs \"id\"");
    if (!valid_id(*m.id))
      return invalid("\"id\" of a response must be a string or an integer, got " + std::string(m.id->type_name()));
    return rpc_message(rpc_response{std::move(*m.id), std::move(*m.result)});
  }
  return invalid("a message needs \"method\" (a request or notification) or \"result\" or \"error\" (a response)");
}

void append_method_and_params(std::string& out, std::string_view method, const json& params) {
  out += ",\"method\":";
  out += dump(json(method));
  if (!params.is_null()) {
    out += ",\"params\":";
    out += dump(params);
  }
}

// The line an extension writes most, a result: {"jsonrpc":"2.0","id":…,"result":…} in any
// order, read without building the object around the result. It gives the message the full
// parse gives; anything else (another member, a name twice, an error, a bad id) is left to
// the full parse, which also names what is wrong.
std::optional<rpc_message> plain_response(std::string_view line) {
  static constexpr std::string_view names[] = {"jsonrpc", "id", "result"};
  json version, id, result;
  json* const values[] = {&version, &id, &result};
  std::uint32_t present = 0;
  if (!policy::parse_json_members_fast(line, rpc_max_depth, names, values, present) || present != 0b111)
    return std::nullopt;
  if (!version.is_string() || version.get_ref<const std::string&>() != "2.0" || !valid_id(id)) return std::nullopt;
  return rpc_message(rpc_response{std::move(id), std::move(result)});
}

}  // namespace

policy::result<rpc_message> parse_rpc(std::string_view line) {
  try {
    if (auto message = plain_response(line)) return std::move(*message);
  } catch (const std::exception&) {
    // Only allocation failures are expected: the full parse below answers.
  }
  auto doc = policy::parse_json_text(line, "", rpc_max_depth);
  if (!doc) return doc.err();
  try {
    return to_message(*doc);
  } catch (const std::exception& e) {
    // Only allocation failures are expected; they must not reach the event loop.
    return make_error(errc::parse_error, "cannot read the message: " + policy::printable_excerpt(e.what()));
  }
}

json refused_request_id(std::string_view line) {
  try {
    auto doc = policy::parse_json_text(line, "", rpc_max_depth);
    if (!doc || !doc->is_object() || doc->contains("result") || doc->contains("error")) return nullptr;
    const auto id = doc->find("id");
    if (id == doc->end() || !valid_id(*id)) return nullptr;
    return std::move(*id);
  } catch (const std::exception&) {  // allocation failure: the id cannot be read
    return nullptr;
  }
}

int rpc_error_code(const policy::error& parse_failure) {
  return parse_failure.code == errc::parse_error ? rpc_error::parse : rpc_error::invalid_request;
}

std::string encode_request(const json& id, std::string_view method, const json& params) {
  std::string out = "{\"jsonrpc\":\"2.0\",\"id\":";
  out += dump(id);
  append_method_and_params(out, method, params);
  out += '}';
  return out;
}

std::string encode_execute_request(std::int64_t id, std::string_view tool_call_id, std::string_view tool,
                                   const json& input, std::string_view cwd, std::string_view session_id) {
  // Keys in the order a params document would dump them (sorted). One allocation for the
  // usual line: ~110 bytes of keys and punctuation, the strings, and as much again for a
  // small input (growing from the first literal took four).
  std::string out;
  out.reserve(256 + cwd.size() + session_id.size() + tool_call_id.size() + tool.size());
  out += "{\"jsonrpc\":\"2.0\",\"id\":";
  out += std::to_string(id);
  out += ",\"method\":\"tools/execute\",\"params\":{\"context\":{\"cwd\":";
  policy::append_json_string(out, cwd);
  out += ",\"sessionId\":";
  policy::append_json_string(out, session_id);
  out += "},\"input\":";
  append_json(out, input);
  out += ",\"toolCallId\":";
  policy::append_json_string(out, tool_call_id);
  out += ",\"toolName\":";
  policy::append_json_string(out, tool);
  out += "}}";
  return out;
}

std::string encode_notification(std::string_view method, const json& params) {
  std::string out = "{\"jsonrpc\":\"2.0\"";
  append_method_and_params(out, method, params);
  out += '}';
  return out;
}

std::string encode_result(const json& id, const json& result) {
  std::string out = "{\"jsonrpc\":\"2.0\",\"id\":";
  out += dump(id);
  out += ",\"result\":";
  out += dump(result);
  out += '}';
  return out;
}

std::string encode_error(const json& id, int code, std::string_view message, const json& data) {
  std::string out = "{\"jsonrpc\":\"2.0\",\"id\":";
  out += dump(id);
  out += ",\"error\":{\"code\":";
  out += std::to_string(code);
  out += ",\"message\":";
  out += dump(json(message));
  if (!data.is_null()) {
    out += ",\"data\":";
    out += dump(data);
  }
  out += "}}";
  return out;
}

std::string encode(const rpc_message& message) {
  struct visitor {
    std::string operator()(const rpc_request& m) const { return encode_request(m.id, m.method, m.params); }
    std::string operator()(const rpc_notification& m) const { return encode_notification(m.method, m.params); }
    std::string operator()(const rpc_response& m) const { return encode_result(m.id, m.result); }
    std::string operator()(const rpc_error_response& m) const {
      return encode_error(m.id, m.code, m.message, m.data);
    }
  };
  return std::visit(visitor{}, message);
}

}  // namespace dhara::io
