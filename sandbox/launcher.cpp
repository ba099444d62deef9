// Helpers for starting commands under dhara-launch.
#include "sandbox/launcher.hpp"

#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

namespace dhara::sandbox {
namespace {

policy::error sys_error(const std::string& what) {
  return policy::make_error(policy::errc::invalid_value, what + ": " + std::strerror(errno));
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
      char real[PATH_MAX];
      if (::realpath(interp.c_str(), real)) out = real;
      break;
    }
  }
  ::close(fd);
  return out;
}

policy::result<std::string> make_private_dir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = tmp && tmp[0] == '/' ? tmp : "/tmp";
  std::string templ = base + "/" + prefix + "XXXXXX";
  if (!::mkdtemp(templ.data())) return sys_error("cannot create a private folder under " + base);
  char real[PATH_MAX];
  if (!::realpath(templ.c_str(), real)) return sys_error("cannot resolve " + templ);
  return std::string(real);
}

void remove_private_dir(const std::string& dir) {
  std::error_code ec;
  if (!dir.empty() && dir != "/") std::filesystem::remove_all(dir, ec);
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
