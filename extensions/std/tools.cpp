// What the tools share: result helpers, input readers, and the catalog sent at initialize.
#include "extensions/std/tools.hpp"

namespace dhara::stdext {

tool_result tool_failure(std::string sentence) { return {std::move(sentence), true, nullptr, 0, nullptr}; }

tool_result denied(std::string_view capability, std::string reason) {
  json data = {{"capability", capability}, {"reason", reason}};
  return {std::move(reason), true, nullptr, -32002, std::move(data)};
}

tool_result cancelled() { return {"cancelled", true, nullptr, -32004, nullptr}; }

std::optional<std::string> string_input(const json& input, const char* key) {
  auto it = input.find(key);
  if (it == input.end()) return std::nullopt;
  if (!it->is_string()) throw invalid_params(std::string("'") + key + "' must be a string");
  return it->get<std::string>();
}

std::string required_string(const json& input, const char* key) {
  auto value = string_input(input, key);
  if (!value) throw invalid_params(std::string("'") + key + "' is required (a string)");
  return *value;
}

std::optional<std::int64_t> integer_input(const json& input, const char* key, std::int64_t min, std::int64_t max) {
  auto it = input.find(key);
  if (it == input.end()) return std::nullopt;
  std::int64_t value = 0;
  bool ok = false;
  if (it->is_number_unsigned()) {
    auto u = it->get<std::uint64_t>();
    ok = u <= static_cast<std::uint64_t>(max);
    value = ok ? static_cast<std::int64_t>(u) : 0;
  } else if (it->is_number_integer()) {
    value = it->get<std::int64_t>();
    ok = true;
  }
  if (!ok || value < min || value > max)
    throw invalid_params(std::string("'") + key + "' must be an integer from " + std::to_string(min) + " to " +
                         std::to_string(max));
  return value;
}

bool bool_input(const json& input, const char* key, bool fallback) {
  auto it = input.find(key);
  if (it == input.end()) return fallback;
  if (!it->is_boolean()) throw invalid_params(std::string("'") + key + "' must be true or false");
  return it->get<bool>();
}

std::optional<checked_path> listing_root(const json& input, const call_context& ctx, tool_result& result) {
  std::optional<std::string> given = string_input(input, "path");
  auto root = resolve_input_path(given.value_or("."), ctx.cwd);
  if (!root) {
    result = tool_failure(root.err().message);
    return std::nullopt;
  }
  std::string reason;
  if (given) return std::move(*root);
  switch (host_check(*ctx.call, "filesystem:read", root->real, reason)) {
    case host_verdict::allowed: return std::move(*root);
    case host_verdict::denied: result = denied("filesystem:read", "reading the current folder: " + reason); break;
    case host_verdict::failed:
      result = ctx.call->cancelled ? cancelled() : tool_failure("cannot check the current folder with dhara: " + reason);
      break;
  }
  return std::nullopt;
}

namespace {

json tool(const char* name, const char* description, json properties, json required, json capabilities) {
  return {{"name", name},
          {"description", description},
          {"parameters", {{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)}}},
          {"capabilities", std::move(capabilities)}};
}

json text(const char* description) { return {{"type", "string"}, {"description", description}}; }
json integer(const char* description, int min) {
  return {{"type", "integer"}, {"minimum", min}, {"description", description}};
}
json boolean(const char* description) { return {{"type", "boolean"}, {"description", description}}; }

}  // namespace

json tool_catalog() {
  const json read_cap = {"filesystem:read"};
  return json::array({
      tool("read", "Read a text file. Returns at most `limit` lines (default 2000) and 256 KiB, starting at line `offset` (1-based), and says how to continue when it stops early.",
           {{"path", text("File to read: absolute, ~/..., or relative to the session's directory")},
            {"offset", integer("First line to return, 1-based (default 1)", 1)},
            {"limit", integer("Most lines to return (default 2000)", 1)}},
           {"path"}, read_cap),
      tool("write", "Write a text file, replacing it atomically (temporary file + rename); missing parent folders are created. Returns the number of bytes written.",
           {{"path", text("File to write")}, {"content", text("The complete new contents")}}, {"path", "content"},
           {"filesystem:write"}),
      tool("edit", "Replace exact text in a file. `oldText` must occur exactly once unless `replaceAll` is true. The file is rewritten atomically.",
           {{"path", text("File to edit")},
            {"oldText", text("Text to find, exactly as in the file (whitespace included)")},
            {"newText", text("Replacement text")},
            {"replaceAll", boolean("Replace every occurrence (default false)")}},
           {"path", "oldText", "newText"}, {"filesystem:read", "filesystem:write"}),
      tool("ls", "List a folder: each entry with its type and size (default: the session's directory).",
           {{"path", text("Folder to list (default: the session's directory)")}}, json::array(), read_cap),
      tool("grep", "Search files for a POSIX extended regular expression (\\d, \\w, \\s also work). Prints `file:line: text`; skips binary files, symlinks and .git.",
           {{"pattern", text("Regular expression, matched per line")},
            {"path", text("File or folder to search (default: the session's directory)")},
            {"glob", text("Only files whose path matches this glob, e.g. *.cpp or src/**/*.h")},
            {"ignoreCase", boolean("Case-insensitive (default false)")},
            {"maxResults", integer("Most matching lines to return (default 100, at most 1000)", 1)}},
           {"pattern"}, read_cap),
      tool("bash", "Run a program without a shell: `argv` is executed directly, or `command` is split on spaces (no quotes, pipes, redirections or $). Returns the exit code, stdout and stderr (each cut to 64 KiB).",
           {{"command", text("Program and arguments separated by spaces")},
            {"argv", {{"type", "array"}, {"items", {{"type", "string"}}}, {"description", "Program and arguments"}}},
            {"cwd", text("Directory to run in (default: the session's directory)")},
            {"timeoutMs", integer("Kill the program's process group after this many milliseconds (default 60000)", 1)}},
           json::array(), {"process:spawn"}),
  });
}

}  // namespace dhara::stdext
