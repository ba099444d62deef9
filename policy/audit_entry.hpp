// The audit entry (DESIGN §3.3, §9 "Audit chain, exactly"): the model, a fast JSON-line
// serializer with the seed's key order, and the ignore-pattern filter that never drops
// a denial. Hashing (SHA-256) and writing live in io/ and actors/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/decision.hpp"

namespace dhara::policy {

/// `action` of an audit line.
enum class audit_action { allowed, denied };
std::string_view to_string(audit_action a);

/// One capability check, as it goes to audit.jsonl.
struct audit_entry {
  std::int64_t timestamp_ms = 0;   ///< Unix time in milliseconds, written as ISO-8601 UTC
  std::string extension;
  std::string capability;          ///< a catalog name, or "*" (reset)
  audit_action action = audit_action::denied;
  /// `details` object members, in order; values are strings ({"path": "..."}).
  std::vector<std::pair<std::string, std::string>> details;
  std::string reason;              ///< always written for a denial (a placeholder if empty)
  decider decided_by = decider::failure;  ///< written as `decidedBy`
  std::string tool;                ///< omitted when empty
  std::string tool_call_id;        ///< omitted when empty
  std::string session;             ///< omitted when empty
  std::uint64_t seq = 0;           ///< position in the chain (1, 2, …), set by the writer
};

/// One `details` member, seen where it lies.
struct audit_detail {
  std::string_view key;
  std::string_view value;
};

/// An audit entry seen in the caller's own strings, so that whoever decided can serialize its
/// line without first copying every field into an audit_entry (the checker's hot path).
struct audit_entry_view {
  std::int64_t timestamp_ms = 0;
  std::string_view extension;
  std::string_view capability;
  audit_action action = audit_action::denied;
  std::span<const audit_detail> details;
  std::string_view reason;
  decider decided_by = decider::failure;
  std::string_view tool;
  std::string_view tool_call_id;
  std::string_view session;
};

/// Audit lines serialized up to their `seq`: each is a line's bytes B (DESIGN §9) without
/// the seq's digits, so it ends in `,"seq":`. Whoever decided serializes its entries into one
/// of these; the audit log only numbers, chains and writes them, so the writer's one thread
/// does no JSON work and frees two buffers per append rather than every entry's strings.
class audit_lines {
 public:
  /// Serializes `entry` (its seq is ignored: the log numbers the line).
  void add(const audit_entry& entry);
  void add(const audit_entry_view& entry);
  /// Appends every line of `other`, in order.
  void add(const audit_lines& other);
  /// Moves lines `first` … size()-1 to the end of `into` (none when first >= size()).
  void move_tail(std::size_t first, audit_lines& into);

  std::size_t size() const { return ends_.size(); }
  bool empty() const { return ends_.empty(); }
  /// Bytes of every line, without seqs and hashes.
  std::size_t bytes() const { return text_.size(); }
  /// Line `i`: B up to and including `"seq":`.
  std::string_view operator[](std::size_t i) const {
    const std::size_t begin = i == 0 ? 0 : ends_[i - 1];
    return {text_.data() + begin, ends_[i] - begin};
  }
  /// Room for `lines` lines of `bytes` in all.
  void reserve(std::size_t lines, std::size_t bytes);
  void clear();

 private:
  std::string text_;
  std::vector<std::size_t> ends_;  // where each line ends in text_
};

/// An entry for a decision the user made (a prompt answer, a CLI change): decidedBy user,
/// one `details` member, and the reason a denial needs.
audit_entry user_decision_entry(std::int64_t timestamp_ms, std::string extension, std::string capability,
                                bool allowed, std::string detail_key, std::string detail_value,
                                std::string denial_reason);

/// Length of the `,"hash":"<64 hex>"}` suffix that ends every line.
inline constexpr std::size_t audit_hash_suffix_bytes = 75;

/// The `reason` written for a denial whose reason is empty (a denial always has a reason).
inline constexpr std::string_view audit_missing_reason = "denied (no reason recorded)";

/// Length of a formatted timestamp, "YYYY-MM-DDTHH:MM:SS.mmmZ".
inline constexpr std::size_t audit_timestamp_bytes = 24;
/// The most bytes of one string (a path, a URL, a reason) an audit line holds; a longer one
/// is cut at a character boundary and ends "… (cut by dhara: N bytes in all)", so that no
/// line passes what dhara's readers take (16 MiB) whatever a caller sends.
inline constexpr std::size_t audit_string_bytes_max = 64 * 1024;

/// Appends the line's bytes B — everything before the hash suffix — to `out`:
/// {"timestamp":"2026-05-14T10:00:00.123Z","extension":…,"capability":…,"action":…,
///  "details":{…},"reason":…,"decidedBy":…,"tool":…,"toolCallId":…,"session":…,"seq":N
/// (no closing brace). `reason` appears when non-empty and always on a denial.
void append_audit_body(std::string& out, const audit_entry& entry);

/// Appends `,"hash":"<hash_hex>"}` and a newline. `hash_hex` must be 64 lowercase hex chars.
void append_audit_suffix(std::string& out, std::string_view hash_hex);

/// Appends `s` as a JSON string literal (with quotes). Control characters, quote and
/// backslash are escaped (`\n`, `\u001f`, ...), U+2028/U+2029 become `\u2028`/`\u2029`,
/// valid UTF-8 is copied as is, and each maximal invalid subpart (Unicode §3.9: overlongs,
/// surrogates, > U+10FFFF, truncated sequences, stray continuation bytes) becomes `\ufffd`,
/// so every line stays valid JSON.
void append_json_string(std::string& out, std::string_view s);

/// Formats Unix milliseconds as "YYYY-MM-DDTHH:MM:SS.mmmZ" (UTC, proleptic Gregorian).
/// Times before 1970 are exact; times outside years 0000..9999 are clamped to
/// 0000-01-01T00:00:00.000Z / 9999-12-31T23:59:59.999Z so the width stays 24.
std::string format_timestamp(std::int64_t unix_ms);

/// True when an *allowed* entry is to be dropped because a `path` or `url` detail matches
/// one of the `auditIgnorePatterns` globs (`**` spans segments). Denials are never dropped.
/// A `path` matches with glob_match_at_or_under: `resolved`, the path the check resolved
/// (when there is one), and the path as written when absolute, lexically normalized; a
/// relative path without a resolution never matches. A `url` matches when glob_match accepts it without its query and fragment, or its
/// path part; one with a '%' or a dot segment in it never does.
bool is_ignored(const audit_entry& entry, const std::vector<std::string>& patterns, std::string_view resolved = {});
bool is_ignored(const audit_entry_view& entry, const std::vector<std::string>& patterns, std::string_view resolved = {});

}  // namespace dhara::policy
