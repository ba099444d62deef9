// The steps behind dhara's locked, all-or-nothing file updates (permissions.json, config.json):
// make the folder, take the lock, replace the file by rename. Each store words its own errors.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace dhara::io {

/// Owns a file descriptor and closes it on every path out of a function.
class unique_fd {
 public:
  explicit unique_fd(int fd = -1) : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept;
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }

  /// The descriptor, or a negative value when none is held.
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Closes now and returns close()'s errno (a deferred write error on some filesystems), or 0.
  int close_checked();

 private:
  void reset();
  int fd_;
};

/// strerror(err) as a string, for messages.
std::string errno_text(int err);

/// What a non-regular file is, for messages: "a directory", "a FIFO", "a socket", "a device",
/// else "not a regular file".
std::string_view file_kind(mode_t mode);

/// The folder of `path`: "." for a bare name, "/" for a file at the root.
std::string folder_of(const std::string& path);

/// Which step of make_folders, take_lock or replace_file failed. The in-the-way steps are the
/// user's to fix (something stands where dhara's folder or lock must be); the others are the
/// system's (a failed call, or another dhara holding the lock).
enum class file_step {
  folder_in_the_way,  ///< make_folders: what stands at the folder's path is not a directory
  create_folder,      ///< make_folders: mkdir failed; the message ends "create DIR yourself"
  lock_in_the_way,    ///< take_lock: the lock file is a symbolic link or not a regular file
  lock,               ///< take_lock: open or flock failed, or the lock stayed busy past the wait
  replace,            ///< replace_file: creating, writing, syncing or renaming the temp file failed
};

/// A failed step and one sentence naming the path and the system's reason. The sentence has
/// no closing note: the caller adds its own ("; nothing was changed", "or set DHARA_HOME"...).
struct file_failure {
  file_step step;
  std::string message;
};

/// mkdir -p `dir`: every folder it creates gets `mode`; existing folders keep theirs. A file
/// in the way is "DIR is not a directory; move it away so dhara can keep its `holds` there".
std::optional<file_failure> make_folders(const std::string& dir, mode_t mode, std::string_view holds);

/// Takes an exclusive flock on `lock_path` (created 0600 if missing, never a symlink), polling
/// for up to `wait`; then "another dhara is holding the `lock_name` lock (...)". On success
/// `held` owns the locked descriptor: the lock lasts until it closes. Lock a separate file, not
/// the one replace_file renames over: the rename swaps the inode, so a waiter on the old inode
/// would win a lock that no longer guards anything. The descriptor is O_CLOEXEC so spawned
/// extensions cannot inherit, and so hold, the lock.
std::optional<file_failure> take_lock(const std::string& lock_path, std::chrono::milliseconds wait,
                                      std::string_view lock_name, unique_fd& held);

/// Replaces `path` (in folder `dir`) with `text` so that readers and a crash see the old file
/// or the new one, never a mix: a temp file `path` + ".tmp-XXXXXX" (so a denied path "NAME*"
/// covers it) is created, given `mode`, written, fsynced and renamed over `path`, then `dir`
/// is fsynced (if only that fails the update still counts as done). No temp file is left on
/// failure, an exception included; on failure `path` is untouched.
std::optional<file_failure> replace_file(const std::string& path, const std::string& dir, const std::string& text,
                                         mode_t mode);

}  // namespace dhara::io
