// The batch line parser: each line is JSON text checked for the call's shape; a bad line
// becomes an entry carrying its JSON-RPC error, so the batch reports it in order.
#include "broker/batch_parse.hpp"

#include "io/jsonrpc.hpp"
#include "policy/json_text.hpp"
#include "policy/text.hpp"

namespace dhara::broker {

using json = nlohmann::json;

namespace {

// What keeps a line's JSON from being a call, or "" when it is one.
std::string not_a_call(const json& doc) {
  if (!doc.is_object()) return "it is a JSON " + std::string(policy::json_type_name(doc)) + ", not an object";
  const auto tool = doc.find("tool");
  if (tool == doc.end()) return "it names no \"tool\"";
  if (!tool->is_string()) return "\"tool\" must be a string, got " + std::string(policy::json_type_name(*tool));
  if (const auto input = doc.find("input"); input != doc.end() && !input->is_object())
    return "\"input\" must be an object, got " + std::string(policy::json_type_name(*input));
  if (const auto ext = doc.find("extension"); ext != doc.end() && !ext->is_string())
    return "\"extension\" must be a string, got " + std::string(policy::json_type_name(*ext));
  return {};
}

}  // namespace

std::vector<batch_call> parse_batch(std::string_view text) {
  std::vector<batch_call> calls;
  std::size_t line_no = 0;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    batch_call c;
    c.id = line_no;
    auto parsed = policy::parse_json_text(line, "");
    json doc = parsed ? std::move(*parsed) : json();
    if (!parsed) {
      c.error_code = io::rpc_error::parse;
      // The parser counts lines within this one line: only its column says anything here.
      std::string why = parsed.err().message;
      if (why.starts_with("line 1, column ")) why = why.substr(8);
      c.error_message = "batch line " + std::to_string(line_no) + " is not JSON (" + why + ")";
    } else if (std::string why = not_a_call(doc); !why.empty()) {
      c.error_code = io::rpc_error::invalid_request;
      c.error_message = "batch line " + std::to_string(line_no) + " is not a call: " + why +
                        " (a call is {\"tool\": \"name\", \"input\": {...}} with optional \"extension\" and \"id\")";
      // Its result line names what it could read, so the user finds the call it meant.
      if (doc.is_object()) {
        if (auto t = doc.find("tool"); t != doc.end() && t->is_string()) c.tool = t->get<std::string>();
        if (auto e = doc.find("extension"); e != doc.end() && e->is_string()) c.extension = e->get<std::string>();
      }
    } else {
      c.tool = doc["tool"].get<std::string>();
      if (doc.contains("input")) c.input = doc["input"];
      if (doc.contains("extension")) c.extension = doc["extension"].get<std::string>();
    }
    if (doc.is_object() && doc.contains("id") && (doc["id"].is_string() || doc["id"].is_number())) c.id = doc["id"];
    calls.push_back(std::move(c));
  }
  return calls;
}

}  // namespace dhara::broker
