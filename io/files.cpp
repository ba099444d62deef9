// File reading with clear errors and discovery of DHARA_HOME and the project root.
#include "io/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "policy/path_rules.hpp"

namespace dhara::io {

policy::result<std::string> read_text_file(const std::string& path, std::size_t max_bytes) {
  using policy::errc;
  // O_NONBLOCK: a FIFO planted in a file's place (a repository's .dhara/config.json, a
  // manifest) would block open() until a writer came; it is refused below as not a regular file.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return policy::make_error(errc::not_found, path + " does not exist");
    return policy::make_error(errc::invalid_value, "cannot read " + path + ": " + std::strerror(err) +
                                                       "; check its permissions");
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return policy::make_error(errc::invalid_value, path + " is not a regular file; move it away and retry");
  }
  if (static_cast<std::size_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return policy::make_error(errc::invalid_value, path + " is larger than " + std::to_string(max_bytes) +
                                                       " bytes; it cannot be a dhara file");
  }
  std::string out;
  out.resize(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (true) {
    if (done == out.size()) out.resize(out.size() + 4096);  // the file may have grown
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return policy::make_error(errc::invalid_value, "cannot read " + path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
    if (done > max_bytes) {
      ::close(fd);
      return policy::make_error(errc::invalid_value, path + " grew past " + std::to_string(max_bytes) + " bytes while reading");
    }
  }
  ::close(fd);
  out.resize(done);
  return out;
}

std::int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

policy::result<locations> discover_locations(std::string_view home, std::string_view dhara_home_env,
                                             std::string_view cwd) {
  using policy::errc;
  if (home.empty() || home.front() != '/')
    return policy::make_error(errc::invalid_value, "HOME is not set to an absolute path; set HOME to your home folder (dhara needs it for ~ in paths and the built-in denials under it)");
  locations loc;
  loc.home = *policy::normalize_path(home, "/");
  auto cwd_n = policy::normalize_path(cwd, "/");
  if (!cwd_n || cwd.front() != '/')
    return policy::make_error(errc::invalid_value, "the current directory is not an absolute path");
  loc.cwd = std::move(*cwd_n);
  if (dhara_home_env.empty()) {
    loc.dhara_home = loc.home + "/.dhara";
  } else {
    auto expanded = policy::expand_home(dhara_home_env, loc.home);
    if (!expanded) return expanded.err();
    auto n = policy::normalize_path(*expanded, loc.cwd);
    if (!n) return policy::make_error(errc::invalid_value, "DHARA_HOME: " + n.err().message);
    loc.dhara_home = std::move(*n);
  }
  // The nearest ancestor of cwd with a .dhara/ folder that is neither DHARA_HOME nor ~/.dhara,
  // known by device and inode, not by name: cwd is a resolved path, HOME and DHARA_HOME may
  // not be (a home reached through a symlink), and a ~/.dhara left behind when DHARA_HOME moved
  // is no project's. Taken as a project, either made the whole home the project's allowed
  // folder. Another user's `.dhara` (in /tmp, or a shared folder) is no marker of this user's
  // project either: it moved the root, and with it the allowed folder, up to where that user
  // chose.
  struct stat dh_st, home_st;
  const bool dh_known = ::stat(loc.dhara_home.c_str(), &dh_st) == 0;
  const bool home_known = ::stat((loc.home + "/.dhara").c_str(), &home_st) == 0;
  auto is_state_folder = [&](const struct stat& st) {
    return (dh_known && st.st_dev == dh_st.st_dev && st.st_ino == dh_st.st_ino) ||
           (home_known && st.st_dev == home_st.st_dev && st.st_ino == home_st.st_ino);
  };
  // Only a folder of the user's own or root's: a link counts when it and the folder it names
  // both are (another user's link to /usr, or to this user's own home, moved the root too).
  auto owned = [](const struct stat& st) { return st.st_uid == ::geteuid() || st.st_uid == 0; };
  auto own_folder = [&](const std::string& marker, struct stat& st) {
    struct stat link_st;
    return ::lstat(marker.c_str(), &link_st) == 0 && owned(link_st) && ::stat(marker.c_str(), &st) == 0 &&
           S_ISDIR(st.st_mode) && owned(st);
  };
  loc.project_root = loc.cwd;
  for (std::string dir = loc.cwd;;) {
    std::string marker = (dir == "/" ? std::string() : dir) + "/.dhara";
    struct stat st;
    if (own_folder(marker, st) && !is_state_folder(st)) {
      loc.project_root = dir;
      break;
    }
    if (dir == "/") break;
    auto cut = dir.rfind('/');
    dir.resize(cut == 0 ? 1 : cut);
  }
  // Without a marker the root is the cwd, whose `.dhara` may still be one of those skipped.
  const std::string root_marker = (loc.project_root == "/" ? std::string() : loc.project_root) + "/.dhara";
  struct stat root_st, any_st;
  if (own_folder(root_marker, root_st)) loc.project_dhara_is_state = is_state_folder(root_st);
  else loc.project_dhara_foreign = ::lstat(root_marker.c_str(), &any_st) == 0;
  return loc;
}

policy::result<locations> discover_locations() {
  const char* home = std::getenv("HOME");
  const char* dh = std::getenv("DHARA_HOME");
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr)
    return policy::make_error(policy::errc::invalid_value,
                              std::string("cannot read the current directory: ") + std::strerror(errno));
  return discover_locations(home ? home : "", dh ? dh : "", cwd);
}

}  // namespace dhara::io
