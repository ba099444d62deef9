// Path resolution shared with the gate (policy/ and io/path_resolver), and symlink-refusing
// file operations.
#include "extensions/std/paths.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "io/path_resolver.hpp"
#include "policy/path_rules.hpp"

namespace dhara::stdext {
namespace {

using policy::errc;
using policy::make_error;

policy::error fail(std::string sentence) { return make_error(errc::invalid_path, std::move(sentence)); }

// $HOME normalized as dhara normalizes it (io::discover_locations); "" when unusable.
const std::string& home() {
  static const std::string value = [] {
    const char* h = std::getenv("HOME");
    if (!h || h[0] != '/') return std::string();
    auto n = policy::normalize_path(h, "/");
    return n ? *n : std::string();
  }();
  return value;
}

std::string random_suffix() {
  unsigned char bytes[6] = {};
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    auto t = static_cast<unsigned long>(::getpid()) ^ static_cast<unsigned long>(std::rand());
    std::memcpy(bytes, &t, sizeof bytes < sizeof t ? sizeof bytes : sizeof t);
  }
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out.push_back(hex[b >> 4]);
    out.push_back(hex[b & 15]);
  }
  return out;
}

bool write_all(int fd, std::string_view data) {
  for (std::size_t off = 0; off < data.size();) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

// Opens the folder `dir` (absolute, symlink-free) one component at a time without following
// links, creating missing components when `make_parents`. Returns the fd or -1 with errno.
int open_folder(const std::string& dir, bool make_parents) {
  // The walk uses O_PATH: it needs no right to list the folders above the target (under the
  // OS sandbox only the allowed folders may be read, not `/` or the home folder).
  int fd = open_no_links(AT_FDCWD, "/", O_PATH | O_DIRECTORY);
  std::size_t pos = 1;
  while (fd >= 0 && pos < dir.size()) {
    std::size_t end = dir.find('/', pos);
    if (end == std::string::npos) end = dir.size();
    std::string comp = dir.substr(pos, end - pos);
    pos = end + 1;
    int next = open_no_links(fd, comp.c_str(), O_PATH | O_DIRECTORY);
    if (next < 0 && errno == ENOENT && make_parents) {
      if (::mkdirat(fd, comp.c_str(), 0777) != 0 && errno != EEXIST) next = -1;
      else next = open_no_links(fd, comp.c_str(), O_PATH | O_DIRECTORY);
    }
    int saved = errno;
    ::close(fd);
    errno = saved;
    fd = next;
  }
  if (fd < 0) return fd;
  // The target folder itself opened for reading, so it can be synced after the rename; where
  // that is not allowed the O_PATH descriptor still serves every *at() call.
  int readable = ::openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (readable < 0) return fd;
  ::close(fd);
  return readable;
}

}  // namespace

policy::result<checked_path> resolve_input_path(std::string_view raw, std::string_view cwd) {
  if (raw.empty()) return fail("the path is empty");
  if (raw.find('\0') != std::string_view::npos) return fail("the path holds a NUL byte");
  std::string input(raw);
  if (raw.front() == '~') {
    auto expanded = policy::expand_home(raw, home());
    if (!expanded) return expanded.err();
    input = std::move(*expanded);
  }
  if (input.front() != '/' && (cwd.empty() || cwd.front() != '/'))
    return fail("cannot resolve the relative path '" + std::string(raw) +
                "': the call's context.cwd is not an absolute path");
  auto lexical = policy::normalize_path(input, cwd);
  if (!lexical) return lexical.err();
  auto real = io::real_path_resolver{}.resolve(*lexical);
  if (!real) return real.err();
  return checked_path{std::string(raw), std::move(*real)};
}

int open_no_links(int dirfd, const char* path, int flags, mode_t mode) {
  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd;
  do fd = ::syscall(SYS_openat2, dirfd, path, &how, sizeof how);
  while (fd < 0 && errno == EINTR);
  if (fd < 0 && errno == ENOSYS) fd = ::openat(dirfd, path, flags | O_CLOEXEC | O_NOFOLLOW, mode);
  return static_cast<int>(fd);
}

std::string errno_sentence(std::string_view shown, int err) {
  std::string p = "'" + std::string(shown) + "'";
  switch (err) {
    case ENOENT: return p + " does not exist";
    case ENOTDIR: return "a component of " + p + " is not a folder";
    case EISDIR: return p + " is a folder";
    case EACCES:
    case EPERM: return "permission denied for " + p;
    case ELOOP:
      return p + " now holds a symbolic link that was not there when the path was checked; refusing to follow it";
    default: return p + ": " + std::strerror(err);
  }
}

policy::result<int> open_regular_file(const checked_path& p) {
  int fd = open_no_links(AT_FDCWD, p.real.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd < 0) return fail(errno_sentence(p.shown, errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    bool dir = S_ISDIR(st.st_mode);
    ::close(fd);
    return fail("'" + p.shown + (dir ? "' is a folder, not a file; use ls to list it" : "' is not a regular file"));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

policy::result<std::string> read_regular_file(const checked_path& p, std::size_t max_bytes) {
  auto fd = open_regular_file(p);
  if (!fd) return fd.err();
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(*fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int saved = errno;
      ::close(*fd);
      return fail(errno_sentence(p.shown, saved));
    }
    if (n == 0) break;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes) {
      ::close(*fd);
      return fail("'" + p.shown + "' is larger than " + std::to_string(max_bytes) + " bytes, the most this tool handles");
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(*fd);
  return out;
}

bool looks_binary(std::string_view head) { return head.find('\0') != std::string_view::npos; }

policy::result<bool> replace_file(const checked_path& p, std::string_view content, bool make_parents) {
  std::size_t slash = p.real.rfind('/');
  std::string base = p.real.substr(slash + 1);
  if (base.empty()) return fail("'" + p.shown + "' is a folder, not a file");
  int dir = open_folder(slash == 0 ? "/" : p.real.substr(0, slash), make_parents);
  if (dir < 0)
    return fail(errno == ELOOP ? errno_sentence(p.shown, ELOOP)
                               : "cannot open the folder of '" + p.shown + "': " + std::strerror(errno));

  struct stat st;
  bool created = ::fstatat(dir, base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0;
  std::string problem;
  if (created && errno != ENOENT) problem = errno_sentence(p.shown, errno);
  else if (!created && S_ISLNK(st.st_mode)) problem = errno_sentence(p.shown, ELOOP);
  else if (!created && S_ISDIR(st.st_mode)) problem = "'" + p.shown + "' is a folder, not a file";
  else if (!created && !S_ISREG(st.st_mode)) problem = "'" + p.shown + "' is not a regular file";
  if (!problem.empty()) {
    ::close(dir);
    return fail(problem);
  }

  // The temporary name keeps within NAME_MAX however long the target's name is.
  std::string tmp, why;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 8; ++attempt) {
    tmp = "." + base.substr(0, 200) + ".dhara-" + random_suffix();
    fd = ::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, created ? 0666 : 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) why = "cannot create a temporary file beside it: " + std::string(std::strerror(errno));
  else if (!created && ::fchmod(fd, st.st_mode & 07777) != 0) why = std::strerror(errno);
  else if (!write_all(fd, content)) why = std::strerror(errno);
  else if (::fsync(fd) != 0) why = std::strerror(errno);
  if (fd >= 0 && ::close(fd) != 0 && why.empty()) why = std::strerror(errno);
  if (why.empty() && ::renameat(dir, tmp.c_str(), dir, base.c_str()) != 0) why = std::strerror(errno);
  if (!why.empty()) {
    if (fd >= 0) ::unlinkat(dir, tmp.c_str(), 0);
    ::close(dir);
    return fail("cannot write '" + p.shown + "': " + why);
  }
  ::fsync(dir);  // the rename itself survives a crash
  ::close(dir);
  return created;
}

}  // namespace dhara::stdext
