// Helpers for starting commands under dhara-launch.
#include "sandbox/launcher.hpp"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <set>
#include <string_view>

namespace dhara::sandbox {
namespace {

policy::error sys_error(const std::string& what) {
  return policy::make_error(policy::errc::invalid_value, what + ": " + std::strerror(errno));
}

// The folder of an absolute path ("/" for an entry of the root).
std::string folder_of(std::string_view path) {
  return std::string(path.substr(0, std::max<std::size_t>(path.rfind('/'), 1)));
}

bool write_all(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

std::string launcher_path() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  std::string self(buf, static_cast<std::size_t>(n));
  return self.substr(0, self.rfind('/')) + "/dhara-launch";
}

std::string elf_interpreter(const std::string& executable) {
  int fd = ::open(executable.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  Elf64_Ehdr eh{};
  if (::pread(fd, &eh, sizeof eh, 0) == sizeof eh && std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum < 256) {
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph{};
      if (::pread(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph)) != sizeof ph) break;
      if (ph.p_type != PT_INTERP || ph.p_filesz == 0 || ph.p_filesz >= PATH_MAX) continue;
      std::string interp(ph.p_filesz, '\0');
      if (::pread(fd, interp.data(), interp.size(), static_cast<off_t>(ph.p_offset)) != static_cast<ssize_t>(interp.size()))
        break;
      interp.resize(std::strlen(interp.c_str()));
      // A relative loader is found from the folder the program starts in, not from ours:
      // nothing is granted for it (the kernel's exec then meets the sandbox as it is).
      char real[PATH_MAX];
      struct stat st{};
      if (interp.starts_with('/') && ::realpath(interp.c_str(), real) && ::stat(real, &st) == 0 && S_ISREG(st.st_mode))
        out = real;
      break;
    }
  }
  ::close(fd);
  return out;
}

policy::sandbox_inputs sandbox_inputs_here(const policy::policy_snapshot& snapshot,
                                           const policy::extension_policy& ext, const std::string& program,
                                           std::string temp_dir) {
  policy::sandbox_inputs in =
      policy::sandbox_inputs_for(snapshot, ext, program, elf_interpreter(program), std::move(temp_dir));
  char real[PATH_MAX];
  if (!in.extension_folder.empty() && ::realpath(in.extension_folder.c_str(), real)) in.extension_folder = real;
  return in;
}

std::vector<std::string> links_on_the_way(const std::string& path) {
  std::vector<std::string> links;
  std::deque<std::string> rest;
  auto push_front_parts = [&](std::string_view p) {
    std::vector<std::string> parts;
    for (std::size_t i = 0; i <= p.size();) {
      std::size_t j = std::min(p.find('/', i), p.size());
      if (j > i) parts.emplace_back(p.substr(i, j - i));
      i = j + 1;
    }
    rest.insert(rest.begin(), parts.begin(), parts.end());
  };
  push_front_parts(path);
  std::string at = "/";  // resolved so far: never holds a link
  while (!rest.empty() && links.size() < 40) {
    const std::string part = std::move(rest.front());
    rest.pop_front();
    if (part == ".") continue;
    if (part == "..") {
      at = folder_of(at);
      continue;
    }
    std::string next = at == "/" ? "/" + part : at + "/" + part;
    struct stat st{};
    if (::lstat(next.c_str(), &st) != 0) break;  // absent: nothing further to meet
    if (!S_ISLNK(st.st_mode)) {
      at = std::move(next);
      continue;
    }
    char target[PATH_MAX];
    const ssize_t n = ::readlink(next.c_str(), target, sizeof target);
    links.push_back(std::move(next));
    if (n <= 0) break;
    if (target[0] == '/') at = "/";
    push_front_parts(std::string_view(target, static_cast<std::size_t>(n)));
  }
  return links;
}

std::vector<guarded_link> links_to_guard(const policy::policy_snapshot& snapshot) {
  std::vector<std::string> guarded;
  for (const policy::path_entry& e : snapshot.paths.denied)
    guarded.push_back(e.glob ? policy::glob_literal_folder(policy::glob3_pattern(e)) : e.normalized);
  for (const auto& [name, ext] : snapshot.extensions) guarded.push_back(ext.folder);
  std::sort(guarded.begin(), guarded.end());
  guarded.erase(std::unique(guarded.begin(), guarded.end()), guarded.end());
  std::vector<guarded_link> out;
  for (const std::string& g : guarded)
    if (!g.empty() && g.front() == '/')
      for (std::string& link : links_on_the_way(g)) out.push_back({std::move(link), g});
  return out;
}

std::string replaceable_link(const policy::sandbox_profile& profile, const std::vector<guarded_link>& links) {
  auto under = [](const std::string& p, const std::vector<std::string>& l) {
    return std::any_of(l.begin(), l.end(), [&](const std::string& x) { return policy::is_at_or_under(p, x); });
  };
  for (const auto& [link, g] : links) {
    auto grant = std::find_if(profile.write.begin(), profile.write.end(),
                              [&](const std::string& w) { return link != w && policy::is_at_or_under(link, w); });
    if (grant == profile.write.end() || under(link, profile.read_only) || under(link, profile.mask)) continue;
    if (::faccessat(AT_FDCWD, folder_of(link).c_str(), W_OK, AT_EACCESS) != 0) continue;  // not this user's to change
    return link + " is a symbolic link inside " + *grant + ", which this extension may write, on the way to " + g +
           " (denied, or an extension's folder): the extension could replace the link, and the next session "
           "would follow it. Make it the folder or file it points to, or do not allow writing to " + *grant;
  }
  return {};
}

namespace {

// The empty folder inside a private folder that says dhara made it: only folders with it are
// ever removed as abandoned. Made once the folder is locked, so a folder being made is never
// taken for an abandoned one. A folder, not a file: making it and looking for it take no
// descriptor.
constexpr const char* private_mark = ".dhara-private";

// mkdtemp's six characters.
bool is_mkdtemp_suffix(std::string_view s) {
  return s.size() == 6 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
         });
}

}  // namespace

private_dir::private_dir(private_dir&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

private_dir& private_dir::operator=(private_dir&& other) noexcept {
  if (this != &other) {
    remove();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void private_dir::remove() noexcept {
  if (fd_ < 0) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  ::close(fd_);  // the lock goes with it, after the folder
  fd_ = -1;
}

std::size_t remove_abandoned_private_dirs(const std::string& base, const std::string& prefix) {
  DIR* d = ::opendir(base.c_str());
  if (d == nullptr) return 0;
  std::size_t removed = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (!name.starts_with(prefix) || !is_mkdtemp_suffix(name.substr(prefix.size()))) continue;
    // Marked (looked at by name first: most such folders are not, and need no descriptor),
    // this user's, and not locked by a live process (its lock went when it died).
    const std::string mark = std::string(name) + "/" + private_mark;
    struct stat st {};
    if (::fstatat(::dirfd(d), mark.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const int fd = ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    if (::fstat(fd, &st) == 0 && st.st_uid == ::geteuid() &&
        ::fstatat(fd, private_mark, &st, AT_SYMLINK_NOFOLLOW) == 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      std::error_code ec;
      std::filesystem::remove_all(std::filesystem::path(base) / name, ec);
      if (!ec) ++removed;
    }
    ::close(fd);
  }
  ::closedir(d);
  return removed;
}

policy::result<private_dir> make_private_dir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = tmp && tmp[0] == '/' ? tmp : "/tmp";
  {  // once a process for each prefix: what dhara processes that were killed left behind
    static std::mutex m;
    static std::set<std::string> swept;
    std::lock_guard<std::mutex> lock(m);
    if (swept.insert(base + "/" + prefix).second) remove_abandoned_private_dirs(base, prefix);
  }
  std::string templ = base + "/" + prefix + "XXXXXX";
  if (!::mkdtemp(templ.data())) return sys_error("cannot create a private folder under " + base);
  char real[PATH_MAX];
  if (!::realpath(templ.c_str(), real)) {
    policy::error why = sys_error("cannot resolve " + templ);
    ::rmdir(templ.c_str());
    return why;
  }
  const int fd = ::open(real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    policy::error why = sys_error(std::string("cannot open the private folder ") + real);
    ::rmdir(real);
    return why;
  }
  private_dir held(real, fd);  // removed again should what follows fail
  // Locked before it is marked: a folder without its mark is never removed as abandoned. On a
  // file system without flock it stays unmarked: removed at the end, never by a later sweep.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == ENOLCK || errno == EOPNOTSUPP || errno == EINVAL) return held;
    return sys_error(std::string("cannot lock the private folder ") + real);
  }
  if (::mkdirat(fd, private_mark, 0700) != 0) return sys_error(std::string("cannot mark the private folder ") + real);
  return held;
}

policy::result<std::string> write_profile_file(const policy::sandbox_profile& profile, const std::string& dir) {
  std::string path = dir + "/profile.json";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0400);
  if (fd < 0) return sys_error("cannot create " + path);
  bool ok = write_all(fd, policy::to_json(profile));
  ::close(fd);
  if (!ok) return sys_error("cannot write " + path);
  return path;
}

policy::result<int> profile_memfd(const policy::sandbox_profile& profile) {
  int fd = ::memfd_create("dhara-profile", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return sys_error("cannot create a memfd for the sandbox profile");
  if (!write_all(fd, policy::to_json(profile)) || ::lseek(fd, 0, SEEK_SET) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0) {
    auto e = sys_error("cannot fill the sandbox profile memfd");
    ::close(fd);
    return e;
  }
  return fd;
}

}  // namespace dhara::sandbox
