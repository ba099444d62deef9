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

/// When an append in fsync durability makes its lines durable.
enum class audit_sync {
  now,       ///< fdatasync before append() returns
  deferred,  ///< the last file's fdatasync is left to the caller (audit_log::sync_handle()),
             ///< who may run it on another thread while the log goes on writing, and must
             ///< release nothing on these lines before it succeeded
};

/// The file an append left unsynced, open on a descriptor of its own, so that another thread
/// can make its lines durable while the log goes on writing, even after a rotation renamed
/// the file. Copies share the descriptor; the last one closes it. Empty: nothing to sync.
class audit_sync_handle {
 public:
  audit_sync_handle() = default;
  explicit operator bool() const { return file_ != nullptr; }
  /// fdatasync (retried on EINTR): "" once every line written to the file so far is on
  /// disk, else why not, naming the file. "" for an empty handle.
  std::string sync() const;
  /// The same file, opened by the same log.
  bool same_file(const audit_sync_handle& other) const { return file_ == other.file_; }

 private:
  friend class audit_log;
  struct file;
  std::shared_ptr<const file> file_;
};

/// Where the chain ended just before an append's lines: what audit_log::roll_back() cuts
/// back to.
struct audit_checkpoint {
  std::uint64_t ino = 0;   ///< the file the append started in
  std::uint64_t dev = 0;
  std::uint64_t size = 0;  ///< its size before the append
  std::uint64_t seq = 0;   ///< the chain's last seq and hash before the append
  std::string hash;
};

/// The audit trail of one DHARA_HOME, open for appending. Move-only; not thread-safe (one
/// owner, the audit writer actor).
///
/// Several processes may hold one at once (a session and `dhara config permissions …`):
/// each batch is written under an exclusive flock on `audit.lock`, after re-reading the
/// chain's tail if another process appended or rotated since, so the chain stays one chain.
/// With keep_lock the lock stays held after a batch, for the next ones, until release_lock.
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
  /// failed rotation…) returns an error naming the file and the cause, and nothing of the
  /// batch stays written: the failing segment is truncated away and, when the batch spanned
  /// a rotation, the lines before it are cut and the files get their names back, so the
  /// trail never holds an entry whose decision the failure refused. last_seq()/last_hash()
  /// describe exactly what is on disk, so a later append continues the chain. If a failed
  /// write cannot be undone, every later append fails until the log is reopened.
  ///
  /// With audit_sync::deferred (meaningful in fsync durability only) the lines of the last
  /// file are written but not synced: sync_handle() says what to sync. Segments before a
  /// rotation are synced at once, so syncing the handles of every unsynced append is enough.
  policy::result<std::uint64_t> append(std::span<policy::audit_entry> entries,
                                       audit_sync sync = audit_sync::now);

  /// The same for lines serialized by their callers (audit_lines), all of `batches` in order
  /// as one batch: the log's thread only numbers, hashes and writes them.
  policy::result<std::uint64_t> append(std::span<const policy::audit_lines> batches,
                                       audit_sync sync = audit_sync::now);

  /// Whether appends leave audit.lock locked (default: no). While it stays locked, the next
  /// append needs neither the lock nor the look at the file for other processes' lines:
  /// three system calls fewer, each about a microsecond here. Every other process's append,
  /// and every verification, waits meanwhile: the caller must release_lock() soon (the audit
  /// writer actor gives it back 50 ms after a batch took it, or as soon as it sees another
  /// process wait for it).
  void keep_lock(bool keep) { keep_lock_ = keep; }

  /// Unlocks audit.lock if an append left it locked (keep_lock).
  void release_lock();

  /// Whether an append left audit.lock locked.
  bool holds_lock() const { return lock_held_; }

  /// Whether the last append found audit.lock held by another process and waited for it.
  bool waited_for_lock() const { return waited_for_lock_; }

  /// Whether another process now waits for audit.lock (blocked in flock, as /proc/locks
  /// shows); true when that cannot be read. One read of /proc/locks: for a holder that looks
  /// now and then, not per batch.
  bool others_wait_for_lock() const;

  /// After a successful append: the file whose lines it left unsynced (empty when it synced
  /// them, or when the durability is not fsync).
  const audit_sync_handle& sync_handle() const { return unsynced_; }

  /// After a successful append: where the chain ended just before its lines.
  const audit_checkpoint& last_append_start() const { return append_start_; }

  /// A deferred sync failed, so the lines written since `from` (a last_append_start()) may
  /// not be on disk: cuts them away, so that the trail keeps no entry whose decision was not
  /// confirmed, and the chain continues from `from`. Possible only while audit.jsonl is the
  /// file `from` points into and no other process appended since; otherwise returns why, and
  /// every later append fails until the log is reopened.
  std::optional<policy::error> roll_back(const audit_checkpoint& from);

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
  std::optional<policy::error> shift_rotated(std::uint64_t by);
  std::optional<policy::error> rotate(std::uint64_t number);
  std::optional<policy::error> prune();
  std::optional<policy::error> undo_rotations();
  std::optional<policy::error> write_segment(std::size_t begin, std::size_t end, bool sync);
  bool share_current_file();
  std::optional<policy::error> sync_dir();
  void close_fds();

  std::string dir_;
  std::string path_;
  audit_log_options options_;
  int fd_ = -1;       // audit.jsonl, O_APPEND
  int lock_fd_ = -1;  // audit.lock, held (flock) while a batch is written, and after it with keep_lock
  bool keep_lock_ = false;
  bool lock_held_ = false;  // an append left the lock held (keep_lock)
  bool waited_for_lock_ = false;  // the last append waited for another process's lock
  std::uint64_t lock_ino_ = 0;    // audit.lock's inode, to find it in /proc/locks
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
  audit_sync_handle current_;     // fd_ shared for deferred syncs (made on first need)
  audit_sync_handle unsynced_;    // what the last append left unsynced
  audit_checkpoint append_start_;
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

namespace detail {
/// The 64 lowercase hex digits of a 32-byte SHA-256 digest into out[0..64), as every audit
/// line's `hash` is written: sixteen bytes at a time with SSE2 (every x86-64), else
/// digest_hex_portable. Both are compiled on every target, so the tests compare them.
void digest_hex(const unsigned char* digest, char* out);
/// The same from a table of every byte value's two digits.
void digest_hex_portable(const unsigned char* digest, char* out);
}  // namespace detail

}  // namespace dhara::io
