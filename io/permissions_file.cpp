// permissions.json on disk: reads that refuse links and non-files, and a transaction that
// locks, re-reads, changes and replaces the file by rename so no update is lost or torn.
#include "io/permissions_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <exception>
#include <optional>
#include <string_view>
#include <utility>

#include "io/files.hpp"
#include "policy/json_text.hpp"

namespace dhara::io {
namespace {

using policy::errc;
using policy::make_error;

// What every refusal ends with: the user must act, and knows dhara did not touch the file.
constexpr std::string_view advice = "; fix or move it (dhara does not change a file it cannot read)";

// The parser names its source "permissions.json"; messages should name the real path.
constexpr std::string_view parser_source = "permissions.json";

std::string errno_text(int err) { return std::strerror(err); }

policy::error refused(const std::string& path, std::string_view what) {
  return make_error(errc::invalid_value, path + " " + std::string(what) + std::string(advice));
}

std::string with_path(const std::string& message, const std::string& path) {
  if (message.compare(0, parser_source.size(), parser_source) == 0)
    return path + message.substr(parser_source.size());
  return path + ": " + message;
}

// Closes a descriptor on every path out of a function.
class unique_fd {
 public:
  explicit unique_fd(int fd = -1) : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }

  int get() const { return fd_; }
  /// Closes now and reports close()'s error (a deferred write error on some filesystems).
  int close_checked() {
    int rc = ::close(std::exchange(fd_, -1));
    return rc == 0 ? 0 : errno;
  }

 private:
  void reset() {
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  }
  int fd_;
};

std::string_view kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

// The file's bytes, or nullopt when it does not exist. O_NOFOLLOW refuses a symlink as the
// last component: a link would let whoever placed it point dhara's approvals at another file
// (and the rename in update_permissions would replace the link, not its target, anyway).
// O_NONBLOCK keeps open() from hanging on a FIFO; it does not affect reading a regular file.
policy::result<std::optional<std::string>> read_bytes(const std::string& path) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) {
    int err = errno;
    if (err == ENOENT) return std::optional<std::string>{};
    if (err == ELOOP) {
      struct stat st;
      if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
        return make_error(errc::invalid_value,
                          path + " is a symbolic link, and dhara does not follow links for its own state; "
                                 "replace the link with the file it points to, or move it (dhara changed nothing)");
      return refused(path, "cannot be opened: its path has too many symbolic links");
    }
    return refused(path, "cannot be read: " + errno_text(err));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return refused(path, "cannot be read: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) return refused(path, "is " + std::string(kind_of(st.st_mode)) + ", not a file");
  if (static_cast<std::size_t>(st.st_size) > max_state_file_bytes)
    return refused(path, "is larger than " + std::to_string(max_state_file_bytes) + " bytes");

  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (true) {
    if (done == out.size()) out.resize(out.size() + 4096);  // someone may be appending to it
    ssize_t n = ::read(fd.get(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return refused(path, "cannot be read: " + errno_text(errno));
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
    if (done > max_state_file_bytes)
      return refused(path, "grew past " + std::to_string(max_state_file_bytes) + " bytes while being read");
  }
  out.resize(done);
  return std::optional<std::string>(std::move(out));
}

policy::result<policy::parsed_permissions> parse_bytes(const std::optional<std::string>& bytes,
                                                       const std::string& path) {
  if (!bytes) return policy::parsed_permissions{};  // no file yet: nothing recorded
  auto parsed = policy::parse_permissions(*bytes);
  if (!parsed) {
    std::string message = with_path(parsed.err().message, path);
    // A syntax error already says to fix the file by hand and that dhara will not overwrite it.
    if (parsed.err().code != errc::parse_error) message += advice;
    return make_error(parsed.err().code, std::move(message));
  }
  for (auto& w : parsed->warnings) w = with_path(w, path);
  return parsed;
}

std::string folder_of(const std::string& path) {
  auto cut = path.rfind('/');
  if (cut == std::string::npos) return ".";
  if (cut == 0) return "/";
  return path.substr(0, cut);
}

// mkdir -p with 0700 for every folder created: DHARA_HOME holds approvals and the audit trail,
// which are nobody else's business. Existing folders keep their mode.
std::optional<policy::error> make_folders(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return std::nullopt;
    return make_error(errc::invalid_value, dir + " is not a directory; move it away so dhara can keep its state there");
  }
  for (std::size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      int err = errno;
      return make_error(errc::invalid_value, "cannot create " + prefix + ": " + errno_text(err) +
                                                 "; create " + dir + " yourself or set DHARA_HOME");
    }
  }
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return make_error(errc::invalid_value, dir + " is not a directory; move it away so dhara can keep its state there");
  return std::nullopt;
}

// The lock lives in its own file, never deleted or replaced. Locking permissions.json itself
// would not work: the rename swaps in a new inode, so a process that waited on the old
// inode's lock would win it after the writer left and then race a newcomer who locked the
// new inode. The lock file's inode stays the same for as long as dhara is used. O_CLOEXEC
// keeps spawned extensions from inheriting (and so holding) the lock.
policy::result<unique_fd> take_lock(const std::string& lock_path, std::chrono::milliseconds wait) {
  unique_fd fd(::open(lock_path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK, 0600));
  if (fd.get() < 0) {
    int err = errno;
    if (err == ELOOP)
      return make_error(errc::invalid_value, lock_path + " is a symbolic link; remove it (dhara recreates the lock file)");
    return make_error(errc::invalid_value, "cannot open the lock file " + lock_path + ": " + errno_text(err) +
                                               "; check the permissions of its folder");
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return make_error(errc::invalid_value, lock_path + " is not a regular file; remove it (dhara recreates the lock file)");

  // flock() has no timeout, so a bounded wait polls LOCK_NB with a growing pause. Waiters are
  // not served in order; contention is rare (a CLI command while a session records a prompt)
  // and each holder keeps the lock only for one read-change-write.
  const auto deadline = std::chrono::steady_clock::now() + wait;
  auto pause = std::chrono::microseconds(200);
  constexpr auto max_pause = std::chrono::microseconds(20'000);
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if (err == EINTR) continue;
    if (err != EWOULDBLOCK)
      return make_error(errc::invalid_value, "cannot lock " + lock_path + ": " + errno_text(err));
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      return make_error(errc::invalid_value,
                        "another dhara is holding the permissions lock (" + lock_path + ") for more than " +
                            std::to_string(wait.count()) + " ms; retry, or stop the dhara process that holds it");
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
    auto nap = std::min(pause, left);
    struct timespec ts{static_cast<time_t>(nap.count() / 1'000'000), static_cast<long>(nap.count() % 1'000'000) * 1000};
    ::nanosleep(&ts, nullptr);
    pause = std::min(pause * 2, max_pause);
  }
  return fd;
}

// Writes `text` to a fresh temp file beside `path`, syncs it, then renames it over `path`:
// readers (and a crash) see the old file or the new one, never a mix. The temp name starts
// with "permissions.json" so the built-in denied path "permissions.json*" covers it too.
std::optional<policy::error> replace_file(const std::string& path, const std::string& dir, const std::string& text) {
  // Removes the temp file on every way out, an exception included, unless it was renamed.
  struct temp_file {
    std::string name;
    bool renamed = false;
    ~temp_file() {
      if (!renamed) ::unlink(name.c_str());
    }
  };
  std::string tmpl = path + ".tmp-XXXXXX";
  unique_fd fd(::mkostemp(tmpl.data(), O_CLOEXEC));  // O_CREAT|O_EXCL, unique name
  if (fd.get() < 0) {
    int err = errno;
    return make_error(errc::invalid_value, "cannot create a temporary file in " + dir + ": " + errno_text(err) +
                                               "; nothing was changed");
  }
  temp_file tmp{std::move(tmpl)};
  auto fail = [&](std::string_view what, int err) -> policy::error {
    return make_error(errc::invalid_value, "cannot write " + path + ": " + std::string(what) + ": " +
                                               errno_text(err) + "; nothing was changed");
  };
  if (::fchmod(fd.get(), 0600) != 0) return fail("chmod of the temporary file", errno);
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("writing the temporary file", errno);
    done += static_cast<std::size_t>(n);
  }
  // Without this fsync the rename could reach the disk before the data, and a crash would
  // leave an empty permissions.json where a full one stood.
  if (::fsync(fd.get()) != 0) return fail("syncing the temporary file", errno);
  if (int err = fd.close_checked(); err != 0) return fail("closing the temporary file", err);
  if (::rename(tmp.name.c_str(), path.c_str()) != 0) return fail("renaming the temporary file", errno);
  tmp.renamed = true;

  // The rename lives in the directory: syncing it makes the new file survive a crash. If that
  // fails the change is already what every reader sees, so it is reported as done; a crash
  // before the disk catches up brings back the previous, equally whole file.
  unique_fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() >= 0) ::fsync(dir_fd.get());
  return std::nullopt;
}

policy::result<policy::permissions> update_locked(const std::string& path, const permissions_change& change,
                                                  std::chrono::milliseconds lock_wait) {
  if (path.empty()) return make_error(errc::invalid_path, "the permissions file path is empty");
  const std::string dir = folder_of(path);
  if (auto err = make_folders(dir)) return *err;
  auto lock = take_lock(path + ".lock", lock_wait);
  if (!lock) return lock.err();

  // Read under the lock: what another process wrote a moment ago is what we change.
  auto bytes = read_bytes(path);
  if (!bytes) return bytes.err();
  auto parsed = parse_bytes(*bytes, path);
  if (!parsed) return parsed.err();

  // `change` works on a copy so that a no-op (or an error) returns the file as read, even if
  // the callback touched its argument before deciding.
  policy::permissions working = parsed->value;
  policy::result<bool> changed = false;
  try {
    changed = change(working);
  } catch (const std::exception& e) {
    return make_error(errc::invalid_value, "updating " + path + " failed: " + policy::printable_excerpt(e.what()) +
                                               "; nothing was changed");
  } catch (...) {
    return make_error(errc::invalid_value, "updating " + path + " failed; nothing was changed");
  }
  if (!changed) return changed.err();
  if (!*changed) return std::move(parsed->value);

  std::string text = policy::serialize_permissions(working);
  // Same bytes: skip the rename, which would only wake every session's file watch.
  if (*bytes && **bytes == text) return working;
  if (auto err = replace_file(path, dir, text)) return *err;
  return working;  // `lock` closes here, after the rename: the next writer reads our file
}

}  // namespace

std::string permissions_path(const std::string& dhara_home) { return dhara_home + "/permissions.json"; }

policy::result<policy::parsed_permissions> read_permissions(const std::string& path) {
  try {
    if (path.empty()) return make_error(errc::invalid_path, "the permissions file path is empty");
    auto bytes = read_bytes(path);
    if (!bytes) return bytes.err();
    return parse_bytes(*bytes, path);
  } catch (const std::exception& e) {  // allocation failure
    return make_error(errc::invalid_value, "cannot read " + path + ": " + policy::printable_excerpt(e.what()));
  }
}

policy::result<policy::permissions> update_permissions(const std::string& path, const permissions_change& change,
                                                       std::chrono::milliseconds lock_wait) {
  try {
    return update_locked(path, change, lock_wait);
  } catch (const std::exception& e) {  // allocation failure; the temp file is gone already
    return make_error(errc::invalid_value, "cannot update " + path + ": " + policy::printable_excerpt(e.what()) +
                                               "; nothing was changed");
  }
}

}  // namespace dhara::io
