// The tool-call gate (DESIGN §9): which checks one tool call needs, from the tool's declared
// capabilities and its input. Pure: the checker decides each check with decide().
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/capability.hpp"
#include "policy/result.hpp"
#include "policy/snapshot.hpp"

namespace dhara::policy {

/// The capabilities a tool requires: its `capabilities` list when given (`[]` = none), else
/// every capability of its manifest. A tool naming an unknown capability, or one its manifest
/// does not declare, is refused at load (errc::unknown_capability / errc::invalid_value).
result<capability_set> tool_required_capabilities(capability_set manifest_capabilities,
                                                  const nlohmann::json& tool_declaration);

/// One check of a tool call, owning its subject (the input it came from).
struct gate_check {
  capability cap = capability::filesystem_read;
  subject_kind kind = subject_kind::none;
  std::string subject;            ///< path, url or command string
  std::vector<std::string> argv;  ///< for subject_kind::argv
  std::string input_key;          ///< the input key it came from ("" for the capability itself)
  /// One more `details` member its audit line records after the subject, unchecked by this
  /// check: the folder a host/process/spawn runs in (`cwd`). Empty key: none.
  std::string also_key = {};
  std::string also = {};

  /// The request decide() takes; valid while this check and `extension` live.
  check_request request(std::string_view extension) const {
    return {extension, cap, kind, subject, argv};
  }
};

/// The checks of one call: each required capability that no input key covers, then the input
/// keys (their checks check the capability too, and name the subject) — `path`, `file`,
/// `filePath`, `dir`, `cwd` as a write under filesystem:write, else as a read under
/// filesystem:read (unchecked with neither); `url` under network:fetch or network:outbound;
/// `command` (string or array) and `argv` under process:spawn. A checked key whose value has
/// the wrong type yields a check that denies (any doubt denies).
std::vector<gate_check> tool_call_checks(capability_set required, const nlohmann::json& input);

/// The largest subjects dhara checks (oversized_subject).
struct subject_limits {
  std::size_t path = 4096;               ///< PATH_MAX; also a check's `also` (a folder)
  std::size_t url = 8192;                ///< what common servers take
  std::size_t command = 128 * 1024;      ///< a command string
  std::size_t argv_bytes = 128 * 1024;   ///< an argv, all of it
  std::size_t argv_count = 4096;
};
/// For host requests, whose programs dhara spawns itself: Linux takes 128 KiB an argument.
inline constexpr subject_limits host_request_limits{};
/// For tool calls, whose tools may take a command or an argv on their input rather than as a
/// program's arguments (std's `bash`): more, but not without end (a review found 141 KB
/// commands the first limits refused).
inline constexpr subject_limits tool_call_limits{4096, 8192, 1024 * 1024, 2 * 1024 * 1024, 65536};

/// Why the subjects of `checks` are larger than `limits`, or "". Each subject is written into
/// its audit line (cut at 64 KiB a string): paths of megabytes, or denied URLs of 70 KiB,
/// rotated the kept audit files away in seconds, an earlier denial with them (two reviews).
/// Such a request or call is refused unchecked (-32602), as malformed input is.
std::string oversized_subject(const std::vector<gate_check>& checks, const subject_limits& limits);

/// What approve mode shows for a call (DESIGN §9 "Approve-mode subject").
struct call_subject {
  std::string text;      ///< shown after `[<tool>] `; empty when the input has no string at all
  bool is_path = false;  ///< from `path`, `file` or `filePath`: an existing file adds its line count
  /// The other inputs of the list below that the call has, each as `; key: value`: shown
  /// after the text (and its line count), so nothing the tool is given to act on is hidden.
  std::string others;
  /// What the human is shown and the audit records, without a line count.
  std::string whole() const { return text + others; }
};

/// The first present of `path`, `file`, `filePath`, `url`, `command`, `argv` (joined,
/// shell-quoted), `query`, `pattern`, with the others present in `others`; else the first
/// string input as `key=value`. `dir` and `cwd` follow in `others` too. Control characters
/// are shown as `?` so a subject cannot move the cursor or fake a prompt; the subject is cut
/// at 512 bytes and the others at 160 each and 512 together (saying how much was cut), and a
/// run of more than eight spaces is shown as its count, so the call stays on the screen.
call_subject approval_subject(const nlohmann::json& input);

/// `arg` quoted for a POSIX shell when it needs quoting ('…' with '\'' for quotes).
std::string shell_quote(std::string_view arg);

}  // namespace dhara::policy
