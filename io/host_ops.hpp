// The host API operations (DESIGN §5, §9 "Host API results"): the I/O that runs after the
// checker allowed a request, re-checking what only I/O can know (where a path really leads,
// what a host name resolves to). Blocking, never throwing; results in the §9 JSON shapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/net_rules.hpp"
#include "policy/path_rules.hpp"
#include "policy/result.hpp"

namespace dhara::io {

// Error codes, the same for every operation here:
//   errc::invalid_path  — the path is not under the allowed root, or a symlink is met on the
//                         way to it (the root's own path included): refused.
//   errc::not_found     — the file, directory or executable does not exist.
//   errc::invalid_value — the request is refused for its content: too large, not UTF-8, an
//                         unknown encoding, a bad header or method, a host that resolves to a
//                         refused address or does not resolve, an argv that is not absolute.
//   errc::resolve_failed — the operating system or the network failed (permission denied,
//                         connection refused, timeout, no openat2 in the kernel).
//
// A file operation's path is the resolution its check matched (policy::decision::resolved),
// and its root the resolved allowed entry that matched: neither holds a symlink when checked.
// Both are opened as they are, by name, with no symlink followed (openat2 RESOLVE_NO_SYMLINKS,
// the path RESOLVE_BENEATH the root): a link put on either since the check, into a denied
// folder beneath the root or out of it, makes the operation fail. Deny rules name paths; a
// denied folder moved since the rules were read (its parent renamed) is known by identity:
// with `denied`, the identities of the rules' denied entries (policy::path_rule_set::
// denied_ids), an operation refuses a file in such a folder before opening or creating it.
// Without them (tests of the opens alone) that walk is skipped. The allowed entry may be a
// folder, a single file (then the path is that file, opened in the file's folder) or a glob
// (opened beneath the folder before its first glob character, which the path lies under).

/// Most entries fs_list returns; more set `truncated` (the first names in byte order are kept).
inline constexpr std::size_t max_list_entries = 10000;

/// True when `bytes` is well-formed UTF-8 (no overlong forms, surrogates or code points above
/// U+10FFFF), i.e. what nlohmann::json can serialize without throwing.
bool is_valid_utf8(std::string_view bytes);

/// Standard base64 (RFC 4648 §4) with '=' padding.
std::string encode_base64(std::string_view bytes);

/// Decodes standard base64; padding may be omitted, nothing else is tolerated (no whitespace,
/// no URL-safe alphabet, no stray bits after the last byte). errc::invalid_value otherwise.
policy::result<std::string> decode_base64(std::string_view text);

/// Reads a regular file at `path_abs` (absolute) beneath `allowed_root` (absolute, the allowed
/// entry that matched) → {content, size, encoding}. `encoding` is "utf8" (the default when
/// empty: invalid UTF-8 is an error that suggests base64) or "base64". A file larger than
/// `max_bytes` is an error, never silently truncated: a partial file read as whole is worse
/// than no file. Directories, FIFOs and devices are refused (a FIFO would block forever).
policy::result<nlohmann::json> fs_read(const std::string& allowed_root, const std::string& path_abs,
                                       std::string_view encoding, std::size_t max_bytes,
                                       std::span<const policy::file_id> denied = {});

/// Writes `content` (already decoded bytes) to a regular file beneath `allowed_root`,
/// creating it with mode 0644 (minus the umask) or truncating it → {bytesWritten}. Content
/// over `max_bytes` is refused before anything is opened. Not atomic: a concurrent reader may
/// see a partial file.
policy::result<nlohmann::json> fs_write(const std::string& allowed_root, const std::string& path_abs,
                                        std::string_view content, std::size_t max_bytes,
                                        std::span<const policy::file_id> denied = {});

/// Lists a directory beneath `allowed_root` → {entries: [{name, type, size}], truncated}, sorted
/// by name (bytes), `type` one of "file", "dir", "symlink" (not followed), "other"; `size` is
/// the lstat size. A name that is not UTF-8 is shown with U+FFFD and carries `nameBase64`.
policy::result<nlohmann::json> fs_list(const std::string& allowed_root, const std::string& path_abs,
                                       std::size_t max_entries = max_list_entries,
                                       std::span<const policy::file_id> denied = {});

/// Reads one variable of dhara's environment → {value: string|null}; a value that is not
/// UTF-8 is base64 with `valueEncoding: "base64"`. The checker has required secrets:env.
policy::result<nlohmann::json> env_get(const std::string& name);

/// Why `name` is no environment variable name (empty, '=', NUL), or "" when it is one.
std::string env_name_problem(const std::string& name);

/// Why a fetch with this method and these headers cannot be sent, or none when it can: a method
/// that is no HTTP token, headers that are not an object of strings, a character HTTP does not
/// allow, a header that is dhara's to set (Host, framing, Proxy-*). The host API asks before the
/// capability is checked, so a request refused for its shape leaves no `allowed` line.
std::optional<policy::error> fetch_request_problem(std::string_view method, const nlohmann::json& headers);

/// Limits for one net_fetch.
struct fetch_limits {
  std::size_t max_body_bytes = 10 * 1024 * 1024;  ///< response body kept; more sets `truncated`
  std::uint64_t timeout_ms = 30000;               ///< the whole transfer, connect included
};

/// The addresses `host` may be reached at, given what it resolved to: an IP literal passes when
/// listed literally or not refused (policy::is_refused_address); a name passes when listed by
/// name (exact or `*.suffix`) or when none of its addresses is refused — one refused address
/// refuses the host, since the connection could land on it. errc::invalid_value otherwise.
policy::result<std::vector<policy::ip_address>> vet_addresses(
    std::string_view host, const std::vector<policy::ip_address>& addresses,
    const policy::domain_rules& rules);

/// Fetches an http(s) URL → {status, headers (lower-cased names → strings, repeats joined
/// with ", "), body, truncated}; a body that is not UTF-8 is base64 with `bodyEncoding:
/// "base64"`. The host is resolved here, vetted (vet_addresses, then policy::check_url) and
/// the connection pinned to the vetted addresses. Redirects are returned, never followed.
/// `method` defaults to GET; `headers` is null or an object of strings; `body` is raw bytes.
policy::result<nlohmann::json> net_fetch(const std::string& url, std::string_view method,
                                         const nlohmann::json& headers, std::string_view body,
                                         const policy::domain_rules& rules, const fetch_limits& limits);

/// Kills the process group of every spawn running now, and of any started after: called at a
/// session's end, so that no spawn keeps dhara (or itself) running past it.
void end_running_spawns();

/// Kills the process group of every spawn running now for extension `owner`: its profile
/// changed, and a spawn keeps the one it started with (a revoked filesystem:write kept writing
/// until its timeout, up to 24 h: a review). A spawn planned before and started after is
/// ended as it starts (spawn_owner). Returns how many were signalled.
std::size_t end_spawns_of(const std::string& owner);

/// How many times `owner`'s spawns were ended for a profile change: taken when a spawn is
/// planned, with the profile it will run in.
std::uint64_t spawn_profile(const std::string& owner);

/// Whom a spawn runs for, and under which of its profiles (spawn_profile when planned).
struct spawn_owner {
  std::string extension;
  std::uint64_t profile = 0;
};

/// Spawns run again (a new session in the same process, as in tests).
void allow_spawns();

/// Runs `argv` (argv[0] absolute, already checked; no shell, no PATH search) in `cwd` (empty:
/// dhara's own) with exactly `env` ("NAME=value" entries) and stdin from /dev/null →
/// {exitCode, signal, stdout, stderr, truncated, timedOut}. `exitCode` is null and `signal` a
/// name ("SIGKILL") when a signal ended it. Each of stdout and stderr keeps at most
/// `max_output` bytes (the rest is drained and dropped; `truncated`); a stream that is not
/// UTF-8 is base64 with `stdoutEncoding`/`stderrEncoding: "base64"`. The child leads a new
/// session; when `timeout_ms` (> 0) passes, or when the call ends, its whole process group is
/// SIGKILLed, so nothing it started in that group outlives the call. `owner` names the
/// extension it runs for and its profile when planned (end_spawns_of).
policy::result<nlohmann::json> process_spawn(const std::vector<std::string>& argv, const std::string& cwd,
                                             std::uint64_t timeout_ms, std::size_t max_output,
                                             const std::vector<std::string>& env, const spawn_owner& owner = {});

}  // namespace dhara::io
