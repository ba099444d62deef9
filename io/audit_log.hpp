// The audit trail on disk (DESIGN §3.3, §9 "Audit chain, exactly"): the only writer of
// $DHARA_HOME/audit.jsonl (hash chain, group commit, rotation) and its verifier.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/audit_entry.hpp"
#include "policy/result.hpp"
#include "policy/settings.hpp"

namespace dhara::io {

/// Longest audit line read back (recovery and verification): a longer one is refused, so a
/// hostile file cannot make dhara buffer without bound.
inline constexpr std::size_t max_audit_line_bytes = 16 * 1024 * 1024;

/// How the audit file is written and rotated (security.audit in the settings).
struct audit_log_options {
  policy::audit_durability durability = policy::audit_durability::write;  ///< fsync: fdatasync per batch
  std::uint64_t max_bytes = 104857600;  ///< rotate before audit.jsonl would pass this (0: never)
  std::uint32_t keep = 5;               ///< rotated files kept: audit.1.jsonl … audit.<keep>.jsonl
                                        ///< (0 counts as 1: rotation never deletes the trail)
};

/// The audit trail of one DHARA_HOME, open for appending. Move-only; not thread-safe (one
/// owner, the audit writer actor).
///
/// Several processes may hold one at once (a session and `dhara config permissions …`):
/// each batch is written under an exclusive flock on `audit.lock`, after re-reading the
/// chain's tail if another process appended or rotated since, so the chain stays one chain.
///
/// The caller must ignore SIGXFSZ (`signal(SIGXFSZ, SIG_IGN)`) before appending: a file-size
/// limit (RLIMIT_FSIZE) would otherwise kill the process instead of failing the write with
/// EFBIG, and an audit failure must be a denial, never a crash.
class audit_log {
 public:
  /// Opens (creating with mode 0600, and creating `dir` itself with 0700 if missing)
  /// `dir`/audit.jsonl and recovers the chain: the last `seq` and `hash` from the tail of
  /// audit.jsonl or, when it is empty or missing, of the newest rotated file (seq 0 and 64
  /// '0's when there is no audit yet). A torn last line (no newline: dhara stopped in the
  /// middle of a write, so no decision was released on it) is truncated away and described
  /// in recovered(). A last line that is not a JSON object with a `seq` and a well-formed
  /// hash suffix is an error: an audit file is never rewritten or "fixed" silently.
  static policy::result<audit_log> open(std::string dir, audit_log_options options);

  audit_log(audit_log&& other) noexcept;
  audit_log& operator=(audit_log&& other) noexcept;
  audit_log(const audit_log&) = delete;
  audit_log& operator=(const audit_log&) = delete;
  ~audit_log();

  /// Numbers the entries (writes seq = last+1, last+2, … into each), chains their hashes and
  /// writes them with one write(2) per file (rotating between lines when audit.jsonl would
  /// pass max_bytes), then one fdatasync per file in fsync durability. Returns the last seq
  /// written (last_seq() unchanged for an empty span). On failure (ENOSPC, EFBIG, EIO, a
  /// failed rotation…) returns an error naming the file and the cause; the bytes of the
  /// failing file segment are truncated away, and last_seq()/last_hash() describe exactly
  /// what is on disk, so a later append continues the chain. When a large batch spans a
  /// rotation, the lines before the failing segment stay written (the error says how many).
  /// If a failed write cannot be undone, every later append fails until the log is reopened.
  policy::result<std::uint64_t> append(std::span<policy::audit_entry> entries);

  /// `seq` of the last line on disk (0: no audit yet).
  std::uint64_t last_seq() const { return last_seq_; }

  /// `hash` of the last line on disk (64 '0's: no audit yet).
  std::string_view last_hash() const { return {last_hash_, sizeof last_hash_}; }

  /// What recovery repaired (a truncated torn line), one sentence per repair, for the log;
  /// "" when nothing was. Repairs made during append (another process crashed mid-write)
  /// are added here too.
  const std::string& recovered() const { return recovered_; }

  /// The path of audit.jsonl.
  const std::string& path() const { return path_; }

 private:
  struct hasher;  // SHA-256 state reused across lines (OpenSSL stays out of this header)

  audit_log(std::string dir, audit_log_options options);

  std::optional<policy::error> open_current();
  std::optional<policy::error> recover_tail();
  std::optional<policy::error> sync_with_disk();
  std::optional<policy::error> rotate();
  std::optional<policy::error> write_segment(std::size_t begin, std::size_t end);
  std::optional<policy::error> sync_dir();
  void close_fds();

  std::string dir_;
  std::string path_;
  audit_log_options options_;
  int fd_ = -1;       // audit.jsonl, O_APPEND
  int lock_fd_ = -1;  // audit.lock, held (flock) only while a batch is written
  std::uint64_t ino_ = 0;   // identity of the file fd_ is open on, to notice a rotation
  std::uint64_t dev_ = 0;   // by another process
  std::uint64_t size_ = 0;  // bytes in audit.jsonl as this object last left it
  std::uint64_t last_seq_ = 0;
  char last_hash_[64];
  std::string recovered_;
  std::string broken_;  // why appends are refused ("" = healthy)
  std::unique_ptr<hasher> hasher_;
  std::string batch_;                  // serialized lines of the batch being written
  // Ends of the batch's file segments in batch_, each with the seq of its last line: a
  // rotation goes between two segments.
  std::vector<std::pair<std::size_t, std::uint64_t>> cuts_;
};

/// What verify_audit found.
struct audit_verification {
  bool ok = false;                  ///< every line of every file chains correctly
  std::uint64_t lines = 0;          ///< lines checked before the first break (all when ok)
  std::vector<std::string> files;   ///< the files read, oldest first
  std::uint64_t first_seq = 0;      ///< seq of the first line (0: no lines)
  std::uint64_t last_seq = 0;       ///< seq of the last good line
  bool anchored = false;            ///< the first line is not seq 1 (older files were rotated
                                    ///< away): its hash is taken as given and anchors the chain
  std::string first_bad_file;       ///< path of the file with the first break ("" when ok)
  std::uint64_t first_bad_line = 0; ///< 1-based line in that file (0: ok, or the file itself
                                    ///< is wrong: a symlink, not a regular file)
  std::string why;                  ///< what is wrong with that line, one sentence
};

/// Checks the whole trail in `dir`, oldest first (audit.N.jsonl … audit.1.jsonl,
/// audit.jsonl): every line is one JSON object ending in the hash suffix, `seq` grows by
/// exactly 1, and every hash recomputes as SHA-256(previous hash ‖ line without suffix).
/// The first line anchors the chain when it is not seq 1. Reads attacker-editable files:
/// never throws, never follows a symlink or blocks on a FIFO, lines over
/// max_audit_line_bytes are a break, memory stays bounded. The files are opened under a
/// shared lock (released before reading), so a session writing at the same time cannot make
/// it see a half-written batch or a half-done rotation. An error (not a failed verification)
/// when `dir` cannot be listed or a file cannot be read.
policy::result<audit_verification> verify_audit(const std::string& dir);

}  // namespace dhara::io
