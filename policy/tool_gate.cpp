// The checks a tool call needs (DESIGN §9 "Tool-call gate").
#include "policy/tool_gate.hpp"

#include <cctype>

#include <algorithm>
#include <array>

#include "policy/text.hpp"

namespace dhara::policy {

result<capability_set> tool_required_capabilities(capability_set manifest_capabilities,
                                                  const nlohmann::json& tool) {
  if (!tool.is_object() || !tool.contains("capabilities")) return manifest_capabilities;
  const nlohmann::json& list = tool["capabilities"];
  if (!list.is_array())
    return make_error(errc::invalid_type, "the tool's capabilities must be an array of capability names");
  capability_set required;
  for (const nlohmann::json& name : list) {
    if (!name.is_string()) return make_error(errc::invalid_type, "the tool's capabilities must be strings");
    auto cap = parse_capability(name.get<std::string>());
    if (!cap) return cap.err();
    required.insert(*cap);
  }
  capability_set beyond = required.minus(with_implied(manifest_capabilities));
  if (!beyond.empty())
    return make_error(errc::invalid_value, "the tool requires " + join_names(beyond) +
                                               ", which its manifest does not declare");
  return required;
}

std::vector<gate_check> tool_call_checks(capability_set required, const nlohmann::json& input) {
  std::vector<gate_check> checks;
  auto with_bare_checks = [&] {
    // A capability with a subject check is checked there (decide() checks the capability
    // first), and its audit line then names the subject; the others are checked bare.
    capability_set covered;
    for (const gate_check& c : checks) covered.insert(c.cap);
    if (required.minus(covered).empty()) return std::move(checks);  // nothing bare: no second vector
    std::vector<gate_check> out;
    required.minus(covered).for_each([&](capability c) { out.push_back({c, subject_kind::none, {}, {}, {}}); });
    out.insert(out.end(), std::make_move_iterator(checks.begin()), std::make_move_iterator(checks.end()));
    return out;
  };
  if (!input.is_object()) return with_bare_checks();

  // A value of the wrong type cannot be checked: an empty path denies ("the path is empty").
  auto text_of = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : std::string(); };

  bool writes = required.contains(capability::filesystem_write);
  bool reads = required.contains(capability::filesystem_read);
  if (writes || reads) {
    capability fs = writes ? capability::filesystem_write : capability::filesystem_read;
    for (const char* key : {"path", "file", "filePath", "dir", "cwd"})
      if (auto it = input.find(key); it != input.end())
        checks.push_back({fs, subject_kind::path, text_of(*it), {}, key});
  }
  bool fetch = required.contains(capability::network_fetch);
  if (fetch || required.contains(capability::network_outbound)) {
    if (auto it = input.find("url"); it != input.end())
      checks.push_back({fetch ? capability::network_fetch : capability::network_outbound, subject_kind::url,
                        it->is_string() ? it->get<std::string>() : std::string("(not a string)"), {}, "url"});
  }
  if (required.contains(capability::process_spawn)) {
    for (const char* key : {"command", "argv"}) {
      auto it = input.find(key);
      if (it == input.end()) continue;
      if (it->is_string() && std::string_view(key) == "command") {
        checks.push_back({capability::process_spawn, subject_kind::command_string, it->get<std::string>(), {}, key});
        continue;
      }
      gate_check c{capability::process_spawn, subject_kind::argv, {}, {}, key};
      if (it->is_array())
        for (const nlohmann::json& a : *it) c.argv.push_back(a.is_string() ? a.get<std::string>() : std::string());
      if (c.argv.empty() || std::find(c.argv.begin(), c.argv.end(), std::string()) != c.argv.end())
        c.argv = {};  // not an array of non-empty strings: an empty argv denies
      checks.push_back(std::move(c));
    }
  }
  return with_bare_checks();
}

std::string oversized_subject(const std::vector<gate_check>& checks, const subject_limits& limits) {
  auto over = [](std::string_view what, std::size_t n, std::size_t max, std::string_view whose) {
    return "the " + std::string(what) + " is " + std::to_string(n) + " bytes long, over the " + std::to_string(max) +
           " " + std::string(whose);
  };
  for (const gate_check& c : checks) {
    const std::size_t n = c.subject.size();
    if (c.kind == subject_kind::path && n > limits.path) return over("path", n, limits.path, "a path may have");
    if (c.kind == subject_kind::url && n > limits.url) return over("URL", n, limits.url, "dhara checks");
    if (c.kind == subject_kind::command_string && n > limits.command)
      return over("command", n, limits.command, "a command may have");
    if (c.also.size() > limits.path) return over(c.also_key, c.also.size(), limits.path, "a path may have");
    std::size_t total = 0;
    for (const std::string& a : c.argv) total += a.size() + 1;
    if (c.argv.size() > limits.argv_count || total > limits.argv_bytes)
      return "the argv has " + std::to_string(c.argv.size()) + " arguments of " + std::to_string(total) +
             " bytes, over the " + std::to_string(limits.argv_count) + " arguments and " +
             std::to_string(limits.argv_bytes) + " bytes dhara checks";
  }
  return {};
}

std::string shell_quote(std::string_view arg) {
  bool plain = !arg.empty();
  for (char c : arg)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_./:=@%+-").find(c) != std::string_view::npos))
      plain = false;
  if (plain) return std::string(arg);
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

namespace {

// What an approve prompt shows of one input: at most `room` bytes (cut at a character's first
// byte, saying how much was cut), a run of more than eight spaces as its count. A subject of
// rm -rf … and 3000 spaces, or a `query` of blank rows, pushed the real call off the screen
// and put a fake `[bash] ls` line above `Approve?` (a review).
std::string shown_bounded(std::string_view text, std::size_t room) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ' ') {
      std::size_t run = text.find_first_not_of(' ', i);
      run = (run == std::string_view::npos ? text.size() : run) - i;
      if (run > 8) {
        out += " [" + std::to_string(run) + " spaces] ";
        i += run;
        continue;
      }
    }
    out += text[i++];
  }
  if (out.size() <= room) return out;
  std::size_t keep = room;
  while (keep > 0 && (static_cast<unsigned char>(out[keep]) & 0xC0) == 0x80) --keep;
  return out.substr(0, keep) + "… (" + std::to_string(out.size() - keep) + " more bytes)";
}

}  // namespace

call_subject approval_subject(const nlohmann::json& input) {
  if (!input.is_object()) return {};
  // The subject is shown whole up to subject_room bytes; the inputs after it share others_room.
  constexpr std::size_t subject_room = 512, others_room = 512, other_room = 160;
  call_subject subject;
  bool first = true;
  std::string fallback_key;  // the input shown as key=value, when none of the list is there
  std::size_t left_out = 0;  // inputs with no room left
  auto add_other = [&](std::string_view key, const std::string& text) {
    if (subject.others.size() >= others_room) return void(++left_out);
    std::size_t room = std::min(other_room, others_room - subject.others.size());
    subject.others += "; " + shown_bounded(key, 64) + ": " + shown_bounded(text, room);
  };
  for (const char* key : {"path", "file", "filePath", "url", "command", "argv", "query", "pattern"}) {
    auto it = input.find(key);
    if (it == input.end()) continue;
    std::string_view k(key);
    std::string text;
    if (it->is_string()) {
      text = terminal_safe(it->get_ref<const std::string&>());
    } else if ((k == "argv" || k == "command") && it->is_array()) {
      std::string joined;
      for (const nlohmann::json& a : *it)
        joined += (joined.empty() ? "" : " ") + shell_quote(a.is_string() ? a.get_ref<const std::string&>() : a.dump());
      text = terminal_safe(joined);
    } else {
      continue;
    }
    // The first is the subject; every other one follows it, named: a call with a path and a
    // command showed only the path, and the human approved a command never shown.
    if (first) {
      subject.text = shown_bounded(text, subject_room);
      subject.is_path = k == "path" || k == "file" || k == "filePath";
      first = false;
    } else {
      add_other(k, text);
    }
  }
  if (first) {
    for (const auto& [key, value] : input.items())
      if (value.is_string()) {
        subject.text = shown_bounded(terminal_safe(key + "=" + value.get<std::string>()), subject_room);
        fallback_key = key;
        first = false;
        break;
      }
    if (first) return {};
  }
  // Then every other input, the folder a command runs in or a tool works on first: `rm -rf
  // build` was approved without the other project it ran in, and {"text": …, "cwd": …} showed
  // only `cwd=…` (a review). Within others_room; what is cut is said.
  auto shown_already = [&](const std::string& key) {
    if (key == fallback_key) return true;
    for (const char* k : {"path", "file", "filePath", "url", "command", "argv", "query", "pattern"})
      if (key == k) {
        const nlohmann::json& v = input.at(key);
        return v.is_string() || ((key == "argv" || key == "command") && v.is_array());
      }
    return false;
  };
  auto add_rest = [&](const std::string& key, const nlohmann::json& value) {
    if (shown_already(key)) return;
    add_other(terminal_safe(key), terminal_safe(value.is_string() ? value.get_ref<const std::string&>()
                                                                  : value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  };
  for (const char* key : {"dir", "cwd"})
    if (auto it = input.find(key); it != input.end()) add_rest(key, *it);
  for (const auto& [key, value] : input.items())
    if (key != "dir" && key != "cwd") add_rest(key, value);
  if (left_out > 0) subject.others += "; and " + std::to_string(left_out) + (left_out == 1 ? " more input" : " more inputs");
  return subject;
}

}  // namespace dhara::policy
