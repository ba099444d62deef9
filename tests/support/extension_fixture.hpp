// Test support for runs with real extension processes: a temporary DHARA_HOME holding
// copies of tests/extensions/*, and /proc scans for leftover processes and descriptors.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/temp_tree.hpp"

namespace dhara::testing {

namespace fs = std::filesystem;

/// Copies a program through a close-on-exec descriptor. std::filesystem::copy_file's descriptor
/// is inherited by a child forked meanwhile (an extension another thread is starting), and
/// while any process holds the file open for writing, exec of it fails with ETXTBSY.
inline void copy_executable(const fs::path& from, const fs::path& to) {
  std::ifstream in(from, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int fd = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
  if (fd < 0) std::abort();
  for (std::size_t done = 0; done < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::abort();
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

/// A fresh temporary folder with home/.dhara/extensions and a project; removed at the end.
struct temp_home : temp_tree {
  temp_home() : temp_tree("dhara-test-XXXXXX") {
    fs::create_directories(extensions());
    fs::create_directories(project());
  }
  fs::path home() const { return root / "home"; }
  fs::path dhara_home() const { return root / "home/.dhara"; }
  fs::path extensions() const { return root / "home/.dhara/extensions"; }
  fs::path project() const { return root / "project"; }

  /// Copies tests/extensions/<source> to extensions/<name>, renaming it in its manifest.
  fs::path add_extension(const std::string& source, std::string name = {}) {
    if (name.empty()) name = source;
    fs::path from = fs::path(DHARA_TEST_EXTENSIONS) / source;
    fs::path to = extensions() / name;
    fs::copy(from, to, fs::copy_options::recursive);
    if (source == "echo-native") {
      fs::remove(to / "echo-native");  // a stale hand-built binary is never used
      copy_executable(DHARA_TEST_ECHO_NATIVE, to / "echo-native");
    }
    nlohmann::json m = nlohmann::json::parse(std::ifstream(to / "manifest.json"));
    m["name"] = name;
    std::ofstream(to / "manifest.json") << m.dump(2);
    return to;
  }
};

/// What a /proc file holds, empty when it cannot be read: its process may end while it is
/// read (an istream then threw "basic_filebuf::underflow error reading the file: No such
/// process" out of processes_mentioning, and left its /proc listing open).
inline std::string proc_file_text(const std::string& path) {
  std::string text;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return text;
}

/// Processes whose command line or cwd mentions `needle` (other than this process).
inline std::vector<int> processes_mentioning(const std::string& needle) {
  std::vector<int> pids;
  DIR* d = ::opendir("/proc");
  if (!d) return pids;
  while (dirent* e = ::readdir(d)) {
    int pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == ::getpid()) continue;
    const std::string text = proc_file_text("/proc/" + std::string(e->d_name) + "/cmdline");
    std::error_code ec;
    auto cwd = fs::read_symlink("/proc/" + std::string(e->d_name) + "/cwd", ec);
    if (text.find(needle) != std::string::npos || (!ec && cwd.string().find(needle) != std::string::npos))
      pids.push_back(pid);
  }
  ::closedir(d);
  return pids;
}

/// Children of this process that still exist (zombies included).
inline std::vector<int> child_processes() {
  std::vector<int> pids;
  DIR* d = ::opendir("/proc");
  if (!d) return pids;
  while (dirent* e = ::readdir(d)) {
    int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string line;
    std::getline(stat, line);
    auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == ::getpid()) pids.push_back(pid);
  }
  ::closedir(d);
  return pids;
}

/// Open file descriptors of this process, each with what it refers to.
inline std::map<int, std::string> open_fds() {
  std::map<int, std::string> fds;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return fds;
  while (dirent* e = ::readdir(d)) {
    int fd = std::atoi(e->d_name);
    if (e->d_name[0] == '.' || fd == ::dirfd(d)) continue;  // not the listing's own descriptor
    std::error_code ec;
    fds[fd] = fs::read_symlink(fs::path("/proc/self/fd") / e->d_name, ec).string();
  }
  ::closedir(d);
  return fds;
}

/// Descriptors open now that were not open in `before` ("fd -> target"), empty when none leaked.
/// The sanitizer runtimes open files for a moment on their own threads, and a descriptor closes
/// only once everything in flight that holds it is done, so a new one must still be there after
/// a few looks to count.
inline std::vector<std::string> new_fds(const std::map<int, std::string>& before) {
  std::vector<std::string> fresh;
  for (int look = 0; look < 20; ++look) {
    fresh.clear();
    for (const auto& [fd, target] : open_fds()) {
      auto it = before.find(fd);
      if (it == before.end() || it->second != target) fresh.push_back(std::to_string(fd) + " -> " + target);
    }
    if (fresh.empty()) break;
    ::usleep(50'000);
  }
  return fresh;
}

}  // namespace dhara::testing
