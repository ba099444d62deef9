// `dhara extensions install <folder>` and `dhara extensions remove <name>` (DESIGN §6, §9
// "Extensions and identity"): the review screen before anything is copied, the approval
// prompts the security level asks for, a copy that no symlink can smuggle outside files into,
// an atomic rename into $DHARA_HOME/extensions, and approvals bound to the installed folder
// and audited as the user's decisions. docs/permissions-and-audit.md describes the behaviour.
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include "actors/approval.hpp"
#include "broker/policy_loader.hpp"
#include "cli/commands.hpp"
#include "cli/permissions_ops.hpp"
#include "io/files.hpp"
#include "io/permissions_file.hpp"
#include "io/terminal.hpp"
#include "policy/capability.hpp"
#include "policy/level.hpp"
#include "policy/net_rules.hpp"
#include "policy/path_rules.hpp"
#include "policy/permissions.hpp"
#include "policy/text.hpp"

namespace dhara::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using policy::errc;
using policy::make_error;

// Limits of one installed extension: a mistaken `install ~` must not fill the disk, and a
// symlink loop must end. node_modules-sized extensions fit.
constexpr std::uint64_t max_install_bytes = 512ull * 1024 * 1024;
constexpr std::size_t max_install_entries = 50'000;
constexpr int max_install_depth = 32;

// Set by SIGINT/SIGTERM/SIGHUP while files are copied: the copy stops and its temp folder goes.
std::atomic<bool> interrupted{false};
extern "C" void on_interrupt(int) { interrupted.store(true); }

std::string errno_text(int err) { return std::strerror(err); }

class unique_fd {
 public:
  explicit unique_fd(int fd = -1) : fd_(fd) {}
  ~unique_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  unique_fd(unique_fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  unique_fd& operator=(unique_fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_;
};

// Manifest text is untrusted: shown on the review screen, it must not be able to move the
// cursor, erase lines or reorder text. Control characters (C0, DEL, C1), bidi controls and
// invalid UTF-8 are shown escaped; everything else is copied.
std::string printable(std::string_view s) {
  std::string out;
  auto hex = [&](unsigned v, int digits, const char* prefix) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%s%0*x", prefix, digits, v);
    out += buf;
  };
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      hex(c, 2, "\\x");
      ++i;
      continue;
    }
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    std::size_t len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    bool valid = len > 0 && i + len <= s.size();
    unsigned cp = len == 2 ? c & 0x1fu : len == 3 ? c & 0x0fu : c & 0x07u;
    for (std::size_t k = 1; valid && k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      valid = (cc & 0xc0) == 0x80;
      cp = (cp << 6) | (cc & 0x3fu);
    }
    if (valid) valid = !(len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) && !(len == 4 && (cp < 0x10000 || cp > 0x10ffff));
    if (!valid) {
      hex(c, 2, "\\x");
      ++i;
      continue;
    }
    bool control = (cp >= 0x80 && cp < 0xa0) || cp == 0x061c || (cp >= 0x200b && cp <= 0x200f) ||
                   (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
    if (control) hex(cp, 4, "\\u");
    else out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// The copy. Regular files and folders are copied; a symlink is followed only when the kernel
// proves (openat2 RESOLVE_BENEATH from the source root) that it resolves inside the folder,
// and then what it points to is copied as a plain file or folder. A link that leads outside
// (`~/.ssh`, `/etc`, `../..`), a dangling link and special files refuse the whole install,
// naming the entry. The installed folder therefore holds no symlinks at all.

struct tree_stats {
  std::uint64_t bytes = 0;
  std::size_t entries = 0;
  std::size_t files = 0;
};

class tree_copy {
 public:
  /// `dest_root` < 0: only scan (check every entry and the limits, copy nothing).
  tree_copy(int src_root, std::string src_shown, int dest_root)
      : src_root_(src_root), shown_(std::move(src_shown)), dest_root_(dest_root) {}

  policy::result<tree_stats> run() {
    auto r = dir(src_root_, dest_root_, "", 0);
    if (!r) return r.err();
    return stats_;
  }

 private:
  std::string where(const std::string& rel) const { return shown_ + "/" + rel; }

  policy::result<bool> count(const std::string& rel, std::uint64_t bytes) {
    if (++stats_.entries > max_install_entries)
      return make_error(errc::invalid_value, shown_ + " holds more than " + std::to_string(max_install_entries) +
                                                 " files and folders, the limit for one extension; is it the right folder?");
    stats_.bytes += bytes;
    if (stats_.bytes > max_install_bytes)
      return make_error(errc::invalid_value, shown_ + " holds more than " + std::to_string(max_install_bytes >> 20) +
                                                 " MiB (at " + where(rel) +
                                                 "), the limit for one extension; is it the right folder?");
    if (interrupted.load()) return make_error(errc::invalid_value, "interrupted");
    return true;
  }

  // Follows the symlink at `rel` beneath the source root; the opened object, or why not.
  policy::result<unique_fd> follow(const std::string& rel, int dir_fd, const std::string& name) {
    open_how how{};
    how.flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    long fd = -1;
    int err = 0;
    for (int attempt = 0; attempt < 8; ++attempt) {  // EAGAIN: a concurrent rename; retry a little
      fd = ::syscall(SYS_openat2, src_root_, rel.c_str(), &how, sizeof how);
      err = errno;
      if (fd >= 0 || (err != EAGAIN && err != EINTR)) break;
    }
    if (fd >= 0) return unique_fd(static_cast<int>(fd));
    char target[4096];
    ssize_t n = ::readlinkat(dir_fd, name.c_str(), target, sizeof target - 1);
    std::string to = n >= 0 ? printable(std::string_view(target, static_cast<std::size_t>(n))) : "?";
    std::string link = where(rel) + " is a symlink to '" + to + "'";
    switch (err) {
      case EXDEV:
        return make_error(errc::invalid_path, link + ", which leads outside the extension folder; dhara does not "
                                                     "install links that leave the folder (put the file itself there)");
      case ENOENT:
      case ENOTDIR:
        return make_error(errc::invalid_path, link + ", which does not exist; remove the broken link");
      case ELOOP:
        return make_error(errc::invalid_path, link + " that loops or goes through a /proc link; remove it");
      case ENOSYS:
        return make_error(errc::resolve_failed, "this kernel has no openat2 (Linux 5.6 or later), so dhara cannot prove "
                                                "that " + link + " stays inside the folder; replace the link with the file");
      default:
        return make_error(errc::resolve_failed, "cannot follow " + link + ": " + errno_text(err));
    }
  }

  policy::result<bool> dir(int src, int dst, const std::string& rel, int depth) {
    if (depth > max_install_depth)
      return make_error(errc::invalid_value, where(rel) + " is nested more than " + std::to_string(max_install_depth) +
                                                 " folders deep (a symlink loop?); refused");
    int listing_fd = ::dup(src);
    if (listing_fd < 0) return make_error(errc::resolve_failed, "cannot read " + where(rel) + ": " + errno_text(errno));
    DIR* d = ::fdopendir(listing_fd);
    if (!d) {
      ::close(listing_fd);
      return make_error(errc::resolve_failed, "cannot read " + where(rel) + ": " + errno_text(errno));
    }
    ::rewinddir(d);  // the dup shares the offset of `src`, which an earlier pass may have moved
    std::vector<std::string> names;
    errno = 0;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(std::move(n));
    }
    int read_err = errno;
    ::closedir(d);
    if (read_err) return make_error(errc::resolve_failed, "cannot read " + where(rel) + ": " + errno_text(read_err));
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      std::string child = rel.empty() ? name : rel + "/" + name;
      struct stat st {};
      if (::fstatat(src, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
        return make_error(errc::resolve_failed, "cannot read " + where(child) + ": " + errno_text(errno));
      unique_fd opened;
      if (S_ISLNK(st.st_mode)) {
        auto f = follow(child, src, name);
        if (!f) return f.err();
        opened = std::move(*f);
      } else if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
        int flags = (S_ISDIR(st.st_mode) ? O_DIRECTORY : O_NONBLOCK) | O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY;
        opened = unique_fd(::openat(src, name.c_str(), flags));
        if (!opened.valid())
          return make_error(errc::resolve_failed, "cannot read " + where(child) + ": " + errno_text(errno) +
                                                      (errno == ELOOP ? " (it changed while being installed)" : ""));
      } else {
        return make_error(errc::invalid_value, where(child) + " is a FIFO, socket or device; an extension folder "
                                                              "holds only files, folders and links; remove it");
      }
      if (::fstat(opened.get(), &st) != 0)
        return make_error(errc::resolve_failed, "cannot read " + where(child) + ": " + errno_text(errno));
      if (S_ISDIR(st.st_mode)) {
        if (auto c = count(child, 0); !c) return c.err();
        unique_fd sub_dst;
        if (dst >= 0) {
          if (::mkdirat(dst, name.c_str(), 0755) != 0)
            return make_error(errc::resolve_failed, "cannot create the copy of " + where(child) + ": " + errno_text(errno));
          sub_dst = unique_fd(::openat(dst, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
          if (!sub_dst.valid())
            return make_error(errc::resolve_failed, "cannot open the copy of " + where(child) + ": " + errno_text(errno));
        }
        if (auto r = dir(opened.get(), sub_dst.get(), child, depth + 1); !r) return r.err();
      } else if (S_ISREG(st.st_mode)) {
        if (auto c = count(child, static_cast<std::uint64_t>(st.st_size)); !c) return c.err();
        ++stats_.files;
        if (dst >= 0)
          if (auto r = copy_file(opened.get(), st, dst, name, child); !r) return r.err();
      } else {
        return make_error(errc::invalid_value, where(child) + " leads to a FIFO, socket or device; remove it");
      }
    }
    return true;
  }

  policy::result<bool> copy_file(int src, const struct stat& st, int dst_dir, const std::string& name,
                                 const std::string& rel) {
    // Permission bits as given, minus setuid/setgid/sticky and group/world write.
    unique_fd out(::openat(dst_dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                           static_cast<mode_t>(st.st_mode & 0755)));
    if (!out.valid())
      return make_error(errc::resolve_failed, "cannot create the copy of " + where(rel) + ": " + errno_text(errno));
    std::vector<char> buf(256 * 1024);
    std::uint64_t copied = 0;
    const auto expected = static_cast<std::uint64_t>(st.st_size);
    for (;;) {
      ssize_t n = ::read(src, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return make_error(errc::resolve_failed, "cannot read " + where(rel) + ": " + errno_text(errno));
      if (n == 0) break;
      copied += static_cast<std::uint64_t>(n);
      if (copied > expected) {
        // The file grew while it was copied: count the growth against the limit.
        stats_.bytes += copied - expected;
        if (stats_.bytes > max_install_bytes)
          return make_error(errc::invalid_value, where(rel) + " kept growing past the size limit while being copied");
      }
      for (ssize_t done = 0; done < n;) {
        ssize_t w = ::write(out.get(), buf.data() + done, static_cast<std::size_t>(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0)
          return make_error(errc::resolve_failed, "cannot write the copy of " + where(rel) + ": " + errno_text(errno));
        done += w;
      }
      if (interrupted.load()) return make_error(errc::invalid_value, "interrupted");
    }
    return true;
  }

  int src_root_;
  std::string shown_;
  int dest_root_;
  tree_stats stats_;
};

// ---------------------------------------------------------------------------------------
// Places.

}  // namespace

std::string bundled_extensions_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return (exe.parent_path() / "extensions").string();
}

namespace {

std::vector<std::string> bundled_names() {
  std::vector<std::string> out;
  std::string dir = bundled_extensions_dir();
  std::error_code ec;
  if (dir.empty()) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code ec2;
    if (e.is_directory(ec2) &&
        (fs::exists(e.path() / "manifest.json", ec2) || fs::exists(e.path() / "manifest.yaml", ec2)))
      out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The folder `arg` names: an existing path, else a bundled extension of that name.
policy::result<fs::path> resolve_source(const std::string& arg) {
  std::error_code ec;
  if (arg.empty()) return make_error(errc::invalid_value, "give the folder of the extension to install");
  fs::path given(arg);
  if (fs::exists(given, ec)) {
    if (!fs::is_directory(given, ec))
      return make_error(errc::invalid_value, "'" + arg + "' is not a folder; give the folder that holds manifest.json");
    fs::path canonical = fs::canonical(given, ec);
    if (ec) return make_error(errc::resolve_failed, "cannot resolve '" + arg + "': " + ec.message());
    return canonical;
  }
  if (policy::is_valid_extension_name(arg)) {
    std::string dir = bundled_extensions_dir();
    fs::path bundled = fs::path(dir) / arg;
    if (!dir.empty() && fs::is_directory(bundled, ec)) {
      fs::path canonical = fs::canonical(bundled, ec);
      if (!ec) return canonical;
    }
  }
  std::string names;
  for (const std::string& n : bundled_names()) names += (names.empty() ? "" : ", ") + n;
  return make_error(errc::not_found, "no folder '" + arg + "'" +
                                         (names.empty() ? std::string(" (and no bundled extensions were found)")
                                                        : " and no bundled extension of that name (bundled: " + names + ")"));
}

bool has_terminal(const global_options& g) {
  // As a session decides (DESIGN §9): stdin is a terminal, or /dev/tty opens; --no-prompt wins.
  if (g.no_prompt) return false;
  return ::isatty(0) == 1 || io::terminal_available();
}

std::string author_text(const policy::manifest& m) {
  if (!m.author) return {};
  if (m.author->name.empty()) return m.author->email;
  return m.author->email.empty() ? m.author->name : m.author->name + " <" + m.author->email + ">";
}

// The author as the load-time prompt shows it: the name, else the email.
std::string prompt_author(const policy::manifest& m) {
  if (!m.author) return {};
  return printable(m.author->name.empty() ? m.author->email : m.author->name);
}

// Purpose of a network.outbound domain, from the manifest as written ("" when none).
std::string purpose_of(const policy::manifest& m, const std::string& domain) {
  const json& raw = m.raw;
  if (!raw.is_object() || !raw.contains("network") || !raw["network"].is_object()) return {};
  const json& net = raw["network"];
  if (!net.contains("outbound") || !net["outbound"].is_array()) return {};
  for (const json& o : net["outbound"])
    if (o.is_object() && o.value("domain", json()) == domain && o.contains("purpose") && o["purpose"].is_string())
      return o["purpose"].get<std::string>();
  return {};
}

std::string size_text(std::uint64_t bytes) {
  char buf[64];
  if (bytes < 1024) std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  else if (bytes < 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  else std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024 * 1024));
  return buf;
}

// Removes a folder tree made by this command (a temp copy, a removed extension).
void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

// A temp folder in `parent` that is removed unless released (nothing half-installed stays).
class temp_dir {
 public:
  static policy::result<temp_dir> make(const std::string& parent, const char* prefix) {
    std::string pattern = parent + "/" + prefix + std::to_string(::getpid()) + "-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data()))
      return make_error(errc::resolve_failed, "cannot create a folder in " + parent + ": " + errno_text(errno));
    temp_dir t;
    t.path_ = buf.data();
    return t;
  }
  temp_dir() = default;
  temp_dir(temp_dir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  temp_dir& operator=(temp_dir&&) = delete;
  ~temp_dir() {
    if (!path_.empty()) remove_tree(path_);
  }
  const std::string& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

void fsync_dir(const std::string& dir) {
  unique_fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.valid()) ::fsync(fd.get());
}

// Catches Ctrl-C and friends while files move, so a stop leaves nothing half-done.
class interrupt_guard {
 public:
  interrupt_guard() {
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; ++i) ::sigaction(signals_[i], &sa, &saved_[i]);
  }
  ~interrupt_guard() {
    for (int i = 0; i < 3; ++i) ::sigaction(signals_[i], &saved_[i], nullptr);
  }
  interrupt_guard(const interrupt_guard&) = delete;
  interrupt_guard& operator=(const interrupt_guard&) = delete;

 private:
  int signals_[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction saved_[3] {};
};

// ---------------------------------------------------------------------------------------
// install

struct install_options {
  std::string folder;
  bool force = false;
  bool json = false;
};

// What a capability will be once installed, for the review screen and the summary.
enum class cap_state { pending, approved, denied, trusted_author, yolo };

std::string_view to_string(cap_state s) {
  switch (s) {
    case cap_state::pending: return "pending";
    case cap_state::approved: return "approved";
    case cap_state::denied: return "denied";
    case cap_state::trusted_author: return "trusted-author";
    case cap_state::yolo: return "yolo";
  }
  return "pending";
}

int install_extension(const global_options& g, const install_options& o) {
  int rc = 0;
  auto loaded = load_policy_for_command(rc);
  if (!loaded) return rc;
  for (const std::string& w : loaded->warnings) std::fprintf(stderr, "dhara: warning: %s\n", w.c_str());
  const std::string& dhara_home = loaded->where.dhara_home;
  const policy::settings& settings = loaded->settings;

  auto source = resolve_source(o.folder);
  if (!source) {
    std::fprintf(stderr, "dhara: %s\n", source.err().message.c_str());
    return 2;
  }
  const std::string src = source->string();
  auto manifest = broker::load_manifest(*source);  // as a session reads it
  if (!manifest) {
    std::string why = manifest.err().message;
    if (manifest.err().code == errc::not_found) why += ", so it is not an extension folder";
    std::fprintf(stderr, "dhara: %s\n", why.c_str());
    return 2;
  }
  const policy::manifest& m = *manifest;
  const std::string& name = m.name;

  const std::string ext_root = dhara_home + "/extensions";
  const std::string dest = ext_root + "/" + name;
  std::error_code ec;
  {
    // Copying a folder into itself would never end: refuse a source that holds DHARA_HOME.
    fs::path home_real = fs::weakly_canonical(ext_root, ec);
    if (!ec && policy::is_at_or_under(home_real.string(), src)) {
      std::fprintf(stderr, "dhara: %s holds dhara's own folder %s; give the extension's own folder\n", src.c_str(),
                   ext_root.c_str());
      return 2;
    }
  }

  // Scan before the review: a link that leaves the folder or a folder over the limits is
  // refused before the user is asked anything.
  unique_fd src_fd(::open(src.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!src_fd.valid()) {
    std::fprintf(stderr, "dhara: cannot open %s: %s\n", src.c_str(), errno_text(errno).c_str());
    return 2;
  }
  auto scan = tree_copy(src_fd.get(), src, -1).run();
  if (!scan) {
    std::fprintf(stderr, "dhara: cannot install %s: %s\n", src.c_str(), scan.err().message.c_str());
    return 2;
  }

  // Already installed?
  bool replacing = false;
  std::string old_version;
  std::optional<policy::capability_scope> old_scope;  // what the replaced manifest reached
  struct stat dst_st {};
  if (::lstat(dest.c_str(), &dst_st) == 0) {
    // Installed as a link (to a development copy, say): neither the link nor what it points
    // to is replaced; the user removes the link, which leaves its target alone.
    if (S_ISLNK(dst_st.st_mode)) {
      const fs::path target = fs::canonical(dest, ec);
      if (!ec && target == *source) {
        std::printf("%s is already installed in %s, a link to %s (the folder given); nothing to do\n", name.c_str(),
                    dest.c_str(), target.c_str());
        return 0;
      }
      const fs::path points_to = ec ? fs::read_symlink(dest, ec) : target;
      std::fprintf(stderr,
                   "dhara: %s is a symbolic link to %s, and dhara does not install over a link; run 'dhara extensions "
                   "remove %s' (it removes the link, not %s), then install again\n",
                   dest.c_str(), points_to.c_str(), name.c_str(), points_to.c_str());
      return 2;
    }
    if (!S_ISDIR(dst_st.st_mode)) {
      std::fprintf(stderr, "dhara: %s exists and is not an extension folder; move it away, then install again\n",
                   dest.c_str());
      return 2;
    }
    fs::path dest_real = fs::canonical(dest, ec);
    auto old = broker::load_manifest(dest);
    if (old) {
      old_version = old->version;
      old_scope = policy::scope_of(*old);
    }
    if (!ec && dest_real == *source) {
      std::printf("%s v%s is already installed in %s (that is the folder given); nothing to do\n", name.c_str(),
                  m.version.c_str(), dest.c_str());
      return 0;
    }
    if (!o.force) {
      if (old && old->version == m.version) {
        std::printf("%s v%s is already installed in %s; nothing changed (to reinstall it from %s, add --force)\n",
                    name.c_str(), m.version.c_str(), dest.c_str(), src.c_str());
        return 0;
      }
      std::fprintf(stderr,
                   "dhara: %s%s is already installed in %s; to replace it with v%s run 'dhara extensions install %s "
                   "--upgrade', or remove it first with 'dhara extensions remove %s'\n",
                   name.c_str(), old ? (" v" + old->version).c_str() : " (with an unreadable manifest)", dest.c_str(),
                   m.version.c_str(), o.folder.c_str(), name.c_str());
      return 2;
    }
    replacing = true;
  }

  // What the level does with the declared capabilities (DESIGN §4), given what is recorded
  // for this folder (§3.2: a new version keeps approvals except at paranoid).
  const bool author_trusted = m.author && policy::is_trusted_author(settings.trusted_authors, *m.author, name);
  const policy::pending_action rule = policy::pending_rule(settings.level, author_trusted);
  std::optional<policy::permission_entry> recorded;
  if (auto it = loaded->permissions.entries.find(name); it != loaded->permissions.entries.end()) {
    if (policy::entry_applies_to(it->second, name, dest, dhara_home)) {
      recorded = it->second;
      // An entry recorded before dhara kept scopes is compared with the manifest it replaces,
      // which its approvals were given for (set_baseline below writes that into the file).
      if (!recorded->scope && old_scope) recorded->scope = old_scope;
      policy::rebind_version(*recorded, m.version, settings.level);
      policy::rebind_scope(*recorded, policy::scope_of(m));  // a wider reach asks again
    } else {
      std::fprintf(stderr, "dhara: warning: the permissions recorded for '%s' were given to %s; this install "
                           "inherits nothing\n", name.c_str(),
                   it->second.folder ? it->second.folder->c_str() : "another folder");
    }
  }
  policy::effective_permissions eff;
  if (recorded) eff = policy::effective_for(*recorded, m.version, settings.level);
  std::map<policy::capability, cap_state> states;
  policy::capability_set pending;
  m.capabilities.for_each([&](policy::capability c) {
    cap_state s = eff.denied.contains(c)     ? cap_state::denied
                  : eff.approved.contains(c) ? cap_state::approved
                                             : cap_state::pending;
    if (s == cap_state::pending && rule == policy::pending_action::approve_trusted_author) s = cap_state::trusted_author;
    if (rule == policy::pending_action::grant_yolo) s = cap_state::yolo;
    if (s == cap_state::pending) pending.insert(c);
    states[c] = s;
  });

  const bool interactive = has_terminal(g);

  // The review screen, before anything is copied or run.
  std::string review;
  auto line = [&](const std::string& s) { review += s + "\n"; };
  line("Extension: " + name + " v" + m.version);
  line("  Author:       " + (m.author ? printable(author_text(m)) : std::string("(none given)")));
  line("  Description:  " + (m.description.empty() ? std::string("(none given)") : printable(m.description)));
  line("  Runs:         " + printable(m.runtime_command));
  line("  From:         " + printable(src) + " (" + std::to_string(scan->files) + (scan->files == 1 ? " file, " : " files, ") + size_text(scan->bytes) + ")");
  line("  Installs to:  " + dest + (replacing ? " (replacing v" + (old_version.empty() ? "?" : old_version) + ")" : ""));
  if (m.capabilities.empty()) {
    line("  Capabilities: none");
  } else {
    line("  Capabilities:");
    m.capabilities.for_each([&](policy::capability c) {
      std::string cap(policy::to_string(c));
      std::string note;
      if (states[c] == cap_state::approved) note = "  [approved earlier]";
      if (states[c] == cap_state::denied) note = "  [denied earlier]";
      char buf[64];
      std::snprintf(buf, sizeof buf, "    %-22s ", cap.c_str());
      line(buf + std::string(policy::meaning(c)) + note);
    });
  }
  bool networked = m.capabilities.contains(policy::capability::network_fetch) ||
                   m.capabilities.contains(policy::capability::network_outbound);
  if (m.network_domains) {
    if (m.network_domains->empty()) {
      line("  Network:      no host (the list is empty)");
    } else {
      line("  Network:");
      for (const std::string& d : *m.network_domains) {
        std::string purpose = purpose_of(m, d);
        std::string note = policy::listed_host_note(d);  // what `2130706433` reaches
        line("    " + printable(d) + (note.empty() ? "" : " (" + note + ")") +
             (purpose.empty() ? "" : " — " + printable(purpose)));
      }
    }
  } else if (networked) {
    line("  Network:      any public host (the manifest lists no domains)");
  }
  if (m.process_commands) {
    std::string cmds;
    for (const std::string& c : *m.process_commands) cmds += (cmds.empty() ? "" : ", ") + printable(c);
    line("  Commands:     " + (cmds.empty() ? std::string("none (the list is empty)") : cmds));
  } else if (m.capabilities.contains(policy::capability::process_spawn)) {
    line("  Commands:     any program under /usr, /bin or /usr/local (the manifest lists none)");
  }
  line("  Security level: " + std::string(policy::to_string(settings.level)));

  std::optional<io::terminal> tty;
  if (interactive) {
    tty.emplace();
    if (!tty->ok()) tty.reset();
  }
  // The person answering must see the review: on stdout, and on the terminal when stdout
  // goes elsewhere (or carries JSON).
  if (!o.json) std::fputs(review.c_str(), stdout);
  std::fflush(stdout);
  if (tty && (o.json || ::isatty(1) != 1)) tty->say(review);

  auto say = [&](const std::string& s) {
    if (!o.json) std::printf("%s\n", s.c_str());
    else if (tty) tty->say(s + "\n");
  };
  if (rule == policy::pending_action::grant_yolo && !m.capabilities.empty())
    say("security.level is yolo: every capability is granted without asking, and no OS sandbox confines it.");
  if (rule == policy::pending_action::approve_trusted_author && !m.capabilities.empty())
    say("The author is in security.trustedAuthors: at the trusted level its capabilities are approved without "
        "asking (audited as trusted-author); nothing is recorded.");

  // The prompts (DESIGN §9): standard one per package, paranoid one per capability with its
  // meaning; y approves, n denies, q quits with nothing installed.
  std::vector<std::pair<std::string, bool>> answers;  // capability, approved
  const bool per_capability = rule == policy::pending_action::ask_each_capability;
  bool asked = false;
  if (!pending.empty() && tty &&
      (rule == policy::pending_action::ask_package || rule == policy::pending_action::ask_each_capability)) {
    asked = true;
    std::fflush(stdout);
    actors::approval_request req;
    req.extension = name;
    req.version = m.version;
    req.author = prompt_author(m);
    pending.for_each([&](policy::capability c) { req.capabilities.emplace_back(policy::to_string(c)); });
    std::string who = name + " v" + m.version + (req.author.empty() ? "" : " (" + req.author + ")");
    auto quit = [&](char k) {
      std::fprintf(stderr, "dhara: %s; nothing installed\n",
                   k == 'q' ? "installation cancelled" : "the terminal closed before an answer");
      return 130;
    };
    if (!per_capability) {
      char k = tty->ask(actors::package_prompt(req) + "\nInstall? (y/n/q) ");  // DESIGN §9
      if (k != 'y' && k != 'n') return quit(k);
      for (const std::string& c : req.capabilities) answers.emplace_back(c, k == 'y');
    } else {
      for (const std::string& c : req.capabilities) {
        auto parsed = policy::parse_capability(c);
        std::string meaning = parsed ? std::string(policy::meaning(*parsed)) : std::string();
        char k = tty->ask(who + " requests " + c + (meaning.empty() ? "" : " — " + meaning) + "\nApprove? (y/n/q) ");
        if (k != 'y' && k != 'n') return quit(k);
        answers.emplace_back(c, k == 'y');
      }
    }
    for (const auto& [c, ok] : answers)
      if (auto parsed = policy::parse_capability(c)) states[*parsed] = ok ? cap_state::approved : cap_state::denied;
  }
  tty.reset();  // the terminal back to normal before the copy (Ctrl-C is a signal again)

  // The copy: a temp folder beside the destination (same file system; its '.' name keeps
  // sessions from loading it), verified against what was reviewed, then renamed into place.
  interrupt_guard on_signal;
  auto fail = [&](const std::string& why, int code) {
    std::fprintf(stderr, "dhara: cannot install %s: %s; nothing installed\n", name.c_str(), why.c_str());
    return code;
  };
  if (!fs::exists(dhara_home, ec)) {
    fs::create_directories(dhara_home, ec);
    if (!ec) ::chmod(dhara_home.c_str(), 0700);  // dhara's state is private
  }
  fs::create_directories(ext_root, ec);
  if (ec) return fail("cannot create " + ext_root + ": " + ec.message(), 1);
  std::string parent = fs::path(dest).parent_path().string();
  if (parent != ext_root) {
    fs::create_directory(parent, ec);  // the @scope folder
    if (ec) return fail("cannot create " + parent + ": " + ec.message(), 1);
  }
  auto tmp = temp_dir::make(ext_root, ".install-");
  if (!tmp) return fail(tmp.err().message, 1);
  {
    unique_fd dst_fd(::open(tmp->path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dst_fd.valid()) return fail("cannot open " + tmp->path() + ": " + errno_text(errno), 1);
    ::fchmod(dst_fd.get(), 0755);
    auto copied = tree_copy(src_fd.get(), src, dst_fd.get()).run();
    if (interrupted.load()) return fail("interrupted", 130);
    if (!copied) return fail(copied.err().message, 1);
    ::syncfs(dst_fd.get());  // the files on disk before the rename makes them the extension
  }
  auto copied_manifest = broker::load_manifest(tmp->path());
  if (!copied_manifest || copied_manifest->raw != m.raw)
    return fail(src + " changed while it was being installed (the manifest differs from the one reviewed); try again", 1);

  if (replacing) {
    // Swap the new folder in atomically; the old one ends up in the temp folder and goes.
    if (::renameat2(AT_FDCWD, tmp->path().c_str(), AT_FDCWD, dest.c_str(), RENAME_EXCHANGE) != 0)
      return fail("cannot replace " + dest + ": " + errno_text(errno), 1);
  } else if (::renameat2(AT_FDCWD, tmp->path().c_str(), AT_FDCWD, dest.c_str(), RENAME_NOREPLACE) != 0) {
    int err = errno;
    return fail(err == EEXIST ? dest + " appeared while installing (another install?)" : "cannot move the copy to " +
                                                                                               dest + ": " + errno_text(err),
                err == EEXIST ? 2 : 1);
  }
  if (!replacing) tmp->release();
  fsync_dir(parent);
  fsync_dir(ext_root);

  // An entry without a scope (recorded before dhara kept them) gets the replaced manifest's,
  // answers or not: sessions then hold pending what this version widens, as the install's
  // review did, instead of comparing nothing (a review).
  auto set_baseline = [&](policy::permissions& p) {
    auto it = p.entries.find(name);
    if (old_scope && it != p.entries.end() && !it->second.scope &&
        policy::entry_applies_to(it->second, name, dest, dhara_home))
      it->second.scope = *old_scope;
  };
  if (answers.empty() && recorded && old_scope && !loaded->permissions.entries.at(name).scope) {
    auto written = io::update_permissions(io::permissions_path(dhara_home), [&](policy::permissions& p) -> policy::result<bool> {
      set_baseline(p);
      return true;
    });
    if (!written)
      std::fprintf(stderr, "dhara: warning: cannot note in permissions.json what %s v%s's approvals were given for (%s); "
                           "review them with 'dhara config permissions show %s'\n",
                   name.c_str(), old_version.c_str(), written.err().message.c_str(), name.c_str());
  }
  // Audit the answers as the user's, then record them, bound to the installed folder: an
  // approval the trail cannot hold is not made (recorded first, it was in force with no line
  // saying so).
  if (!answers.empty()) {
    std::vector<policy::audit_entry> entries;
    for (const auto& [cap, ok] : answers) {
      auto e = user_change_entry(name, cap, ok, ok ? "approve" : "revoke");
      if (!ok) e.reason = "denied by the user at install";
      e.details.emplace_back("via", "install");
      e.details.emplace_back("prompt", per_capability ? "capability" : "package");
      entries.push_back(std::move(e));
    }
    const std::string unaudited = name + " is installed, but its answers could not be audited, so none was recorded; its "
                                         "capabilities stay pending";
    if (!audit_user_changes(*loaded, std::move(entries), unaudited)) return 1;
    auto stamp = policy::format_timestamp(io::wall_clock_ms());
    const policy::capability_scope scope = policy::scope_of(m);
    auto written = io::update_permissions(io::permissions_path(dhara_home), [&](policy::permissions& p) -> policy::result<bool> {
      set_baseline(p);
      for (const auto& [cap, ok] : answers) {
        auto r = policy::record(p, name, cap, ok ? policy::permission_state::approved : policy::permission_state::denied,
                                m.version, dest, stamp, settings.level, &scope);
        if (!r) return r.err();
      }
      return true;
    });
    if (!written) {
      std::fprintf(stderr, "dhara: %s is installed, but the answers could not be recorded (%s); its capabilities stay "
                           "pending: 'dhara config permissions approve %s --all' approves them\n",
                   name.c_str(), written.err().message.c_str(), name.c_str());
      return 1;
    }
  }

  // Where sessions will look: warn when this install will not be the one they load.
  bool listed = std::any_of(settings.extension_dirs.begin(), settings.extension_dirs.end(), [&](const std::string& d) {
    auto n = policy::normalize_path(d, "/");
    return n && *n == ext_root;
  });
  if (!listed)
    std::fprintf(stderr, "dhara: warning: extensionDirs does not include %s, so sessions will not load %s until it does\n",
                 ext_root.c_str(), name.c_str());
  for (const broker::discovered_extension& e : loaded->extensions)
    if (e.manifest.name == name && e.folder != dest)
      std::fprintf(stderr, "dhara: warning: another extension named '%s' is in %s; only one of them is loaded (the "
                           "global one; among global folders, the first extensionDirs entry)\n",
                   name.c_str(), e.folder.c_str());

  std::vector<std::string> approved, denied, waiting;
  for (const auto& [c, s] : states) {
    std::string cap(policy::to_string(c));
    if (s == cap_state::denied) denied.push_back(cap);
    else if (s == cap_state::pending) waiting.push_back(cap);
    else approved.push_back(cap);
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
  };
  std::string approve_cmd = "dhara config permissions approve " + name + " --all";
  if (o.json) {
    json caps = json::object();
    for (const auto& [c, s] : states) caps[std::string(policy::to_string(c))] = std::string(to_string(s));
    json out = {{"name", name}, {"version", m.version}, {"folder", dest}, {"source", src},
                {"replaced", replacing}, {"capabilities", caps}};
    if (replacing) out["previousVersion"] = old_version;
    if (!waiting.empty()) out["approveCommand"] = approve_cmd;
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%s %s v%s in %s\n", replacing ? "Replaced" : "Installed", name.c_str(), m.version.c_str(), dest.c_str());
  if (!approved.empty()) std::printf("  approved: %s\n", join(approved).c_str());
  if (!denied.empty()) std::printf("  denied:   %s\n", join(denied).c_str());
  if (!waiting.empty()) {
    std::printf("  pending:  %s\n", join(waiting).c_str());
    std::printf("Nothing was approved%s; its tools are denied until you approve. To approve every capability it "
                "declares, run:\n  %s\n",
                asked ? "" : (g.no_prompt ? " (--no-prompt)" : " (no terminal to ask on)"), approve_cmd.c_str());
  } else if (!denied.empty()) {
    std::printf("To approve a denied capability later: dhara config permissions approve %s <capability>\n", name.c_str());
  }
  return 0;
}

// ---------------------------------------------------------------------------------------
// remove

struct remove_options {
  std::string name;
  bool yes = false;
  bool json = false;
};

int remove_extension(const global_options& g, const remove_options& o) {
  int rc = 0;
  auto loaded = load_policy_for_command(rc);
  if (!loaded) return rc;
  const std::string& dhara_home = loaded->where.dhara_home;
  const std::string ext_root = dhara_home + "/extensions";
  const std::string& name = o.name;
  const std::string dest = ext_root + "/" + name;

  // Installed names: the folders under $DHARA_HOME/extensions (a broken manifest included).
  std::vector<std::string> installed;
  {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(ext_root, ec)) {
      std::string n = e.path().filename().string();
      if (n.starts_with('.')) continue;
      std::error_code ec2;
      if (n.starts_with('@')) {
        for (const auto& s : fs::directory_iterator(e.path(), ec2))
          if (!s.path().filename().string().starts_with('.')) installed.push_back(n + "/" + s.path().filename().string());
      } else if (e.is_directory(ec2) || e.is_symlink(ec2)) {
        installed.push_back(n);
      }
    }
  }
  struct stat st {};
  bool present = policy::is_valid_extension_name(name) && ::lstat(dest.c_str(), &st) == 0;
  if (!present) {
    std::string hint;
    for (const broker::discovered_extension& e : loaded->extensions)
      if (e.manifest.name == name)
        hint = "; it is loaded from " + e.folder + ", which 'extensions remove' does not manage (delete that folder yourself)";
    if (hint.empty() && loaded->permissions.entries.count(name))
      hint = "; to forget its recorded permissions run 'dhara config permissions reset " + name + "'";
    std::vector<std::string_view> names(installed.begin(), installed.end());
    std::fprintf(stderr, "dhara: no extension named '%s' is installed in %s%s%s\n", printable(name).c_str(),
                 ext_root.c_str(), policy::did_you_mean(name, names).c_str(), hint.c_str());
    return 2;
  }
  // A scope folder that is a link (@dev -> a development tree): the extension folder lies in
  // what it links to, which is not dhara's to delete (rename(2) through the link moved the
  // user's own folder into the trash; a review).
  if (const std::size_t slash = name.find('/'); slash != std::string::npos) {
    const std::string scope = ext_root + "/" + name.substr(0, slash);
    struct stat scope_st {};
    if (::lstat(scope.c_str(), &scope_st) == 0 && S_ISLNK(scope_st.st_mode)) {
      std::fprintf(stderr, "dhara: %s is a link, so %s lies in the folder it links to, which 'extensions remove' does not "
                           "delete; remove the link yourself (rm %s) and, if wanted, forget its permissions ('dhara config "
                           "permissions reset %s')\n",
                   scope.c_str(), printable(name).c_str(), scope.c_str(), printable(name).c_str());
      return 1;
    }
  }
  std::string version;
  if (auto m = broker::load_manifest(dest)) version = m->version;
  std::string label = name + (version.empty() ? "" : " v" + version);

  if (!o.yes && has_terminal(g)) {
    io::terminal tty;
    if (tty.ok()) {
      char k = tty.ask("Remove " + label + " (" + dest + ") and forget its permissions? (y/n/q) ");
      if (k == 'q' || k == 0) {
        std::fprintf(stderr, "dhara: cancelled; nothing removed\n");
        return 130;
      }
      if (k == 'n') {
        std::fprintf(stderr, "dhara: nothing removed\n");
        return 3;
      }
    }
  }

  // Out of sight first (a session scanning the folder sees it whole or not at all), then deleted.
  interrupt_guard on_signal;
  std::error_code ec;
  if (S_ISLNK(st.st_mode)) {
    if (::unlink(dest.c_str()) != 0) {
      std::fprintf(stderr, "dhara: cannot remove the link %s: %s\n", dest.c_str(), errno_text(errno).c_str());
      return 1;
    }
  } else {
    auto trash = temp_dir::make(ext_root, ".remove-");
    if (!trash) {
      std::fprintf(stderr, "dhara: cannot remove %s: %s\n", dest.c_str(), trash.err().message.c_str());
      return 1;
    }
    // rename(2) replaces the empty temp folder with the extension's folder.
    if (::rename(dest.c_str(), trash->path().c_str()) != 0) {
      std::fprintf(stderr, "dhara: cannot remove %s: %s\n", dest.c_str(), errno_text(errno).c_str());
      return 1;
    }
    // ~temp_dir deletes it.
  }
  std::string parent = fs::path(dest).parent_path().string();
  if (parent != ext_root) ::rmdir(parent.c_str());  // an emptied @scope folder; kept if not empty
  fsync_dir(ext_root);

  bool reset = false;
  auto it = loaded->permissions.entries.find(name);
  if (it != loaded->permissions.entries.end() && policy::entry_applies_to(it->second, name, dest, dhara_home)) {
    auto done = io::update_permissions(io::permissions_path(dhara_home), [&](policy::permissions& p) -> policy::result<bool> {
      auto e = p.entries.find(name);
      if (e == p.entries.end() || !policy::entry_applies_to(e->second, name, dest, dhara_home)) return false;
      return policy::reset(p, name);
    });
    if (!done) {
      std::fprintf(stderr, "dhara: %s was removed, but its permissions could not be forgotten: %s\n", label.c_str(),
                   done.err().message.c_str());
      return 1;
    }
    reset = true;
  }
  int exit_code = 0;
  if (reset && !audit_user_changes(*loaded, {user_change_entry(name, "*", false, "reset")})) exit_code = 1;
  if (o.json) {
    std::printf("%s\n", json{{"name", name}, {"version", version}, {"folder", dest}, {"removed", true},
                             {"permissionsReset", reset}}.dump(2).c_str());
    return exit_code;
  }
  std::printf("Removed %s from %s%s\n", label.c_str(), dest.c_str(),
              reset ? "; its permissions are forgotten" : "");
  if (!reset && it != loaded->permissions.entries.end())
    std::printf("The permissions recorded for '%s' belong to %s and were kept.\n", name.c_str(),
                it->second.folder ? it->second.folder->c_str() : "another folder");
  return exit_code;
}

}  // namespace

void add_install_commands(CLI::App& extensions, command_context& ctx) {
  auto io = std::make_shared<install_options>();
  auto* install_cmd = extensions.add_subcommand(
      "install", "Review an extension folder, approve its capabilities as the security level asks, and copy it to "
                 "$DHARA_HOME/extensions/<name>");
  install_cmd->add_option("folder", io->folder,
                          "The extension's folder (with manifest.json or manifest.yaml), or the name of a bundled "
                          "extension such as 'std'")
      ->required();
  install_cmd->add_flag("--force,--upgrade", io->force,
                        "Replace an installed extension of the same name (approvals kept as the version rules say)");
  install_cmd->add_flag("--json", io->json, "Print the result as JSON (the review still shows on the terminal)");
  install_cmd->footer(
      "Nothing is copied or run before the review screen and the prompts. standard: one prompt for the package; "
      "paranoid: one per capability; trusted: none for a trusted author; yolo: none (everything is granted). "
      "Without a terminal (or with --no-prompt) it installs with nothing approved and prints the approve command.\n"
      "Symlinks are copied as what they point to, and only when that is inside the folder; a link leading outside "
      "refuses the install. Limits: 512 MiB, 50000 entries, 32 folders deep.\n\n"
      "Examples:\n"
      "  dhara extensions install ./web-tools\n"
      "  dhara extensions install std                    # a bundled extension\n"
      "  dhara --no-prompt extensions install ./web-tools && dhara config permissions approve web-tools --all\n"
      "  dhara extensions install ./web-tools --upgrade  # replace an installed older version");
  install_cmd->callback([&ctx, io] { ctx.action = [&ctx, io] { return install_extension(ctx.g, *io); }; });

  auto ro = std::make_shared<remove_options>();
  auto* remove_cmd = extensions.add_subcommand(
      "remove", "Delete an installed extension's folder and forget its permissions");
  remove_cmd->add_option("name", ro->name, "The extension's name, e.g. web-tools or @scope/name")->required();
  remove_cmd->add_flag("-y,--yes", ro->yes, "Do not ask for confirmation (it is never asked without a terminal)");
  remove_cmd->add_flag("--json", ro->json, "Print the result as JSON");
  remove_cmd->footer(
      "Removes $DHARA_HOME/extensions/<name> and its entry in permissions.json (audited as a reset).\n\n"
      "Examples:\n"
      "  dhara extensions remove web-tools\n"
      "  dhara extensions remove @zosmaai/web-tools --yes");
  remove_cmd->callback([&ctx, ro] { ctx.action = [&ctx, ro] { return remove_extension(ctx.g, *ro); }; });
}

}  // namespace dhara::cli
