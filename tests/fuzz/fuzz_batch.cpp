// libFuzzer target for the batch file (`dhara run --calls`): whatever the bytes, parse_batch
// gives one entry per non-blank line, in order, each either a call or that line's error,
// with the line number as id unless the line gave a string or number id.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/batch_parse.hpp"
#include "io/jsonrpc.hpp"
#include "policy/json_text.hpp"

namespace {

using dhara::broker::batch_call;
using json = nlohmann::json;

void require(bool ok) {
  if (!ok) std::abort();
}

// The lines the batch holds, written the obvious way: split on '\n' (a last line without
// one counts), each with its 1-based number; blank (only spaces, tabs, CRs) lines dropped.
struct numbered_line {
  std::size_t number;
  std::string_view text;
};
std::vector<numbered_line> model_lines(std::string_view in) {
  std::vector<numbered_line> out;
  std::size_t number = 0, start = 0;
  while (start < in.size()) {
    std::size_t end = start;
    while (end < in.size() && in[end] != '\n') ++end;
    std::string_view line = in.substr(start, end - start);
    ++number;
    bool blank = true;
    for (char c : line) blank = blank && (c == ' ' || c == '\t' || c == '\r');
    if (!blank) out.push_back({number, line});
    start = end + 1;
  }
  return out;
}

bool is_call(const json& doc) {
  if (!doc.is_object()) return false;
  auto tool = doc.find("tool");
  auto input = doc.find("input");
  auto extension = doc.find("extension");
  return tool != doc.end() && tool->is_string() && (input == doc.end() || input->is_object()) &&
         (extension == doc.end() || extension->is_string());
}

void check_entry(const batch_call& c, const numbered_line& line) {
  const std::string prefix = "batch line " + std::to_string(line.number) + " ";
  auto doc = dhara::policy::parse_json_text(line.text, "");
  if (!doc) {
    require(c.error_code == dhara::io::rpc_error::parse);
    require(c.id == json(line.number));
    require(c.error_message.starts_with(prefix + "is not JSON ("));
    return;
  }
  // The id: the line's own when it is a string or a number, else the line number.
  auto id = doc->is_object() ? doc->find("id") : doc->end();
  if (doc->is_object() && id != doc->end() && (id->is_string() || id->is_number()))
    require(c.id == *id);
  else
    require(c.id == json(line.number));
  if (!is_call(*doc)) {
    require(c.error_code == dhara::io::rpc_error::invalid_request);
    require(c.error_message.starts_with(prefix + "is not a call"));
    // What could be read is kept for the result line: a string tool and extension.
    auto text_of = [&](const char* key) {
      auto it = doc->is_object() ? doc->find(key) : doc->end();
      return doc->is_object() && it != doc->end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    require(c.tool == text_of("tool") && c.extension == text_of("extension") && c.input == json::object());
    return;
  }
  require(c.error_code == 0 && c.error_message.empty());
  require(c.tool == (*doc)["tool"].get<std::string>());
  require(c.extension == doc->value("extension", std::string()));
  require(c.input == doc->value("input", json::object()));
  require(c.input.is_object());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<batch_call> calls = dhara::broker::parse_batch(text);
  std::vector<numbered_line> lines = model_lines(text);
  require(calls.size() == lines.size());
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const batch_call& c = calls[i];
    require(c.error_code == 0 || c.error_code == dhara::io::rpc_error::parse ||
            c.error_code == dhara::io::rpc_error::invalid_request);
    require((c.error_code == 0) == c.error_message.empty());
    require(c.id.is_string() || c.id.is_number());
    check_entry(c, lines[i]);
    // An entry is printed as a JSON line: every string in it must serialize.
    try {
      (void)json{{"id", c.id}, {"tool", c.tool}, {"extension", c.extension}, {"input", c.input},
                 {"error", c.error_message}}
          .dump();
    } catch (const json::exception&) {
      require(false);
    }
  }
  return 0;
}
