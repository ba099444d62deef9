// The non-template helpers of the call flow (see call_flow.hpp).
#include "broker/call_flow.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/text.hpp"

namespace dhara::broker {

bool parse_hitl_mode(const std::string& text, hitl_mode& out) {
  if (text == "auto") out = hitl_mode::automatic;
  else if (text == "approve") out = hitl_mode::approve;
  else if (text == "review") out = hitl_mode::review;
  else return false;
  return true;
}

namespace {

// The largest file whose lines the approve prompt counts: the count is read on the session's
// actor before the question, and a sparse file of 4 GiB held the prompt (and, under serve,
// every other request) for 41 s (a review).
constexpr off_t max_counted_bytes = off_t{16} << 20;

// Lines of a regular file (a last line without '\n' counts); nullopt when it is not one.
// `too_large` is set, and nothing read, for one over max_counted_bytes.
std::optional<std::size_t> count_lines(const std::string& path, bool& too_large) {
  too_large = false;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return std::nullopt;
  }
  if (st.st_size > max_counted_bytes) {
    ::close(fd);
    too_large = true;
    return std::nullopt;
  }
  std::size_t lines = 0;
  char last = '\n';
  char buf[65536];
  for (off_t total = 0; total <= max_counted_bytes;) {  // a file grown since fstat is not read on
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    total += n;
    for (ssize_t i = 0; i < n; ++i) lines += buf[i] == '\n';
    last = buf[n - 1];
  }
  ::close(fd);
  return lines + (last != '\n' ? 1 : 0);
}

}  // namespace

std::string shown_subject(const nlohmann::json& input, const std::string& cwd) {
  policy::call_subject s = policy::approval_subject(input);
  if (!s.is_path || s.text.empty()) return s.whole();
  const std::string& raw = input.contains("path") && input["path"].is_string()         ? input["path"].get_ref<const std::string&>()
                           : input.contains("file") && input["file"].is_string()       ? input["file"].get_ref<const std::string&>()
                           : input.contains("filePath") && input["filePath"].is_string() ? input["filePath"].get_ref<const std::string&>()
                                                                                      : s.text;
  std::string full = raw.starts_with('/') || cwd.empty() ? raw : cwd + "/" + raw;
  bool too_large = false;
  if (auto n = count_lines(full, too_large)) return s.text + " (" + std::to_string(*n) + (*n == 1 ? " line)" : " lines)") + s.others;
  if (too_large) return s.text + " (over 16 MiB: lines not counted)" + s.others;
  return s.whole();
}

std::string shown_result(const actors::call_result& r, std::size_t max_lines, std::size_t max_columns) {
  std::string text;
  if (r.result.is_object() && r.result.contains("content") && r.result["content"].is_array()) {
    for (const nlohmann::json& c : r.result["content"])
      if (c.is_object() && c.value("type", "") == "text" && c.contains("text") && c["text"].is_string())
        text += (text.empty() ? "" : "\n") + c["text"].get<std::string>();
  } else {
    text = r.result.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::string out;
  std::size_t lines = 0, pos = 0, total = 0;
  for (char c : text) total += c == '\n';
  total += !text.empty() && text.back() != '\n';
  while (pos < text.size() && lines < max_lines) {
    std::size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    for (char& c : line)
      if (c == '\t') c = ' ';
    // The extension's text is what a reviewer checks: no control (C0, C1: 0x9b is an 8-bit
    // CSI), bidi override or invisible character reaches the terminal (a review: only bytes
    // below 0x20 were replaced, and `\u009b1A\u009b2K` erased the line above).
    line = policy::terminal_safe(line);
    if (line.size() > max_columns) {
      std::size_t keep = max_columns;  // at a character's first byte
      while (keep > 0 && (static_cast<unsigned char>(line[keep]) & 0xC0) == 0x80) --keep;
      line = line.substr(0, keep) + "…";
    }
    out += "  " + line + "\n";
    ++lines;
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
  if (lines < total) out += "  … (" + std::to_string(total - lines) + " more lines)\n";
  if (text.empty()) out += "  (no text)\n";
  return out;
}

nlohmann::json rejection_result(const std::string& text) {
  return {{"content", nlohmann::json::array({{{"type", "text"}, {"text", text}}})}, {"isError", true}};
}

policy::audit_entry human_decision_entry(const call_spec& spec, std::string_view prompt, bool allowed,
                                         const std::string& reason) {
  policy::audit_entry e;
  e.timestamp_ms = io::wall_clock_ms();
  e.extension = spec.tool.extension;
  // The decision is about the call as a whole: the first capability it needs stands for it.
  e.capability = "*";
  spec.tool.required.for_each([&](policy::capability c) {
    if (e.capability == "*") e.capability = std::string(policy::to_string(c));
  });
  e.action = allowed ? policy::audit_action::allowed : policy::audit_action::denied;
  e.details.push_back({"prompt", std::string(prompt)});
  policy::call_subject s = policy::approval_subject(spec.call.input);
  if (!s.text.empty()) e.details.push_back({"subject", s.whole()});
  e.reason = reason;
  e.decided_by = policy::decider::user;
  e.tool = spec.tool.name;
  e.tool_call_id = spec.call.tool_call_id;
  e.session = spec.call.session_id;
  return e;
}

}  // namespace dhara::broker
