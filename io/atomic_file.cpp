// Folder creation, the bounded flock wait and the temp-file-and-rename replacement shared by
// io/permissions_file.cpp and io/settings_file.cpp.
#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

namespace dhara::io {

unique_fd& unique_fd::operator=(unique_fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

int unique_fd::close_checked() {
  int rc = ::close(std::exchange(fd_, -1));
  return rc == 0 ? 0 : errno;
}

void unique_fd::reset() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

std::string errno_text(int err) { return std::strerror(err); }

std::string_view file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

std::string folder_of(const std::string& path) {
  auto cut = path.rfind('/');
  if (cut == std::string::npos) return ".";
  if (cut == 0) return "/";
  return path.substr(0, cut);
}

std::optional<file_failure> make_folders(const std::string& dir, mode_t mode, std::string_view holds) {
  auto in_the_way = [&] {
    return file_failure{file_step::folder_in_the_way, dir + " is not a directory; move it away so dhara can keep its " +
                                                          std::string(holds) + " there"};
  };
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return std::nullopt;
    return in_the_way();
  }
  for (std::size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      int err = errno;
      return file_failure{file_step::create_folder,
                          "cannot create " + prefix + ": " + errno_text(err) + "; create " + dir + " yourself"};
    }
  }
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return in_the_way();
  return std::nullopt;
}

// The lock lives in its own file, never deleted or replaced, so its inode stays the same for
// as long as dhara is used. Locking the data file itself would not work: the rename swaps in a
// new inode, so a process that waited on the old inode's lock would win it after the writer
// left and then race a newcomer who locked the new inode.
std::optional<file_failure> take_lock(const std::string& lock_path, std::chrono::milliseconds wait,
                                      std::string_view lock_name, unique_fd& held) {
  unique_fd fd(::open(lock_path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK, 0600));
  if (fd.get() < 0) {
    int err = errno;
    if (err == ELOOP)
      return file_failure{file_step::lock_in_the_way,
                          lock_path + " is a symbolic link; remove it (dhara recreates the lock file)"};
    return file_failure{file_step::lock, "cannot open the lock file " + lock_path + ": " + errno_text(err) +
                                             "; check the permissions of its folder"};
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return file_failure{file_step::lock_in_the_way,
                        lock_path + " is not a regular file; remove it (dhara recreates the lock file)"};

  // flock() has no timeout, so a bounded wait polls LOCK_NB with a growing pause. Waiters are
  // not served in order; contention is rare (a CLI command while a session records a prompt)
  // and each holder keeps the lock only for one read-change-write.
  const auto deadline = std::chrono::steady_clock::now() + wait;
  auto pause = std::chrono::microseconds(200);
  constexpr auto max_pause = std::chrono::microseconds(20'000);
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if (err == EINTR) continue;
    if (err != EWOULDBLOCK) return file_failure{file_step::lock, "cannot lock " + lock_path + ": " + errno_text(err)};
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      return file_failure{file_step::lock, "another dhara is holding the " + std::string(lock_name) + " lock (" +
                                               lock_path + ") for more than " + std::to_string(wait.count()) +
                                               " ms; retry, or stop the dhara process that holds it"};
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
    auto nap = std::min(pause, left);
    struct timespec ts{static_cast<time_t>(nap.count() / 1'000'000), static_cast<long>(nap.count() % 1'000'000) * 1000};
    ::nanosleep(&ts, nullptr);
    pause = std::min(pause * 2, max_pause);
  }
  held = std::move(fd);
  return std::nullopt;
}

std::optional<file_failure> replace_file(const std::string& path, const std::string& dir, const std::string& text,
                                         mode_t mode) {
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
    return file_failure{file_step::replace, "cannot create a temporary file in " + dir + ": " + errno_text(err)};
  }
  temp_file tmp{std::move(tmpl)};
  auto failed = [&](std::string_view what, int err) {
    return file_failure{file_step::replace, "cannot write " + path + ": " + std::string(what) + ": " + errno_text(err)};
  };
  if (::fchmod(fd.get(), mode) != 0) return failed("chmod of the temporary file", errno);
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return failed("writing the temporary file", errno);
    done += static_cast<std::size_t>(n);
  }
  // Without this fsync the rename could reach the disk before the data, and a crash would
  // leave an empty file where a full one stood.
  if (::fsync(fd.get()) != 0) return failed("syncing the temporary file", errno);
  if (int err = fd.close_checked(); err != 0) return failed("closing the temporary file", err);
  if (::rename(tmp.name.c_str(), path.c_str()) != 0) return failed("renaming the temporary file", errno);
  tmp.renamed = true;

  // The rename lives in the directory: syncing it makes the new file survive a crash. If that
  // fails the change is already what every reader sees, so it is reported as done; a crash
  // before the disk catches up brings back the previous, equally whole file.
  unique_fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() >= 0) ::fsync(dir_fd.get());
  return std::nullopt;
}

}  // namespace dhara::io
