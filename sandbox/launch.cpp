// dhara-launch: applies an extension's OS sandbox profile to itself, then execs the command.
//
//   dhara-launch (--profile FILE | --profile-fd N | --profile-json TEXT…) [--status-fd N] [--setsid] -- /abs/cmd args…
//
// `--profile-json` may be given several times: the profile is their texts joined (the kernel
// takes at most 128 KiB in one argument; policy::launcher_argv_inline splits a larger one).
//
// One job, in the order of SANDBOX.md: fd hygiene; a user+mount namespace with every mount
// read-only but the write grants, and masks for denied paths inside granted ones;
// no_new_privs and every capability dropped; Landlock (files, TCP, scoping) at the ABI the
// kernel has; seccomp last; execve. Any failure prints
// `dhara-launch: <phase>: <strerror> (<what to do>)`, writes `<phase> <errno>` to the status
// fd, and exits 126 (127: the command does not exist). The command never runs unsandboxed.
// Single-threaded; it is its own process, so ordinary allocation is fine until execve.
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/path_rules.hpp"
#include "policy/sandbox_profile.hpp"

extern char** environ;

namespace policy = dhara::policy;

namespace {

// The Landlock UAPI up to ABI 6, spelled out: distribution headers lag the kernel.
constexpr long sys_landlock_create_ruleset = 444, sys_landlock_add_rule = 445, sys_landlock_restrict_self = 446;
constexpr std::uint32_t ll_create_ruleset_version = 1u << 0;
constexpr int ll_rule_path_beneath = 1;
struct ll_ruleset_attr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;  // ABI 4
  std::uint64_t scoped;              // ABI 6
};
struct __attribute__((packed)) ll_path_beneath_attr {
  std::uint64_t allowed_access;
  std::int32_t parent_fd;
};
enum : std::uint64_t {
  fs_execute = 1ull << 0, fs_write_file = 1ull << 1, fs_read_file = 1ull << 2, fs_read_dir = 1ull << 3,
  fs_remove_dir = 1ull << 4, fs_remove_file = 1ull << 5, fs_make_char = 1ull << 6, fs_make_dir = 1ull << 7,
  fs_make_reg = 1ull << 8, fs_make_sock = 1ull << 9, fs_make_fifo = 1ull << 10, fs_make_block = 1ull << 11,
  fs_make_sym = 1ull << 12, fs_refer = 1ull << 13, fs_truncate = 1ull << 14, fs_ioctl_dev = 1ull << 15,
  net_bind_tcp = 1ull << 0, net_connect_tcp = 1ull << 1,
  scope_abstract_unix = 1ull << 0, scope_signal = 1ull << 1,
};
constexpr std::uint64_t fs_abi1 = (1ull << 13) - 1;
// Rights a rule on a single file may carry; folder rights there are EINVAL.
constexpr std::uint64_t fs_file_rights = fs_execute | fs_write_file | fs_read_file | fs_truncate | fs_ioctl_dev;
constexpr std::uint64_t fs_read = fs_read_file | fs_read_dir;
constexpr std::uint64_t fs_exec = fs_read | fs_execute;
// Write: no device nodes and no sockets (unix sockets are refused by seccomp anyway).
constexpr std::uint64_t fs_write = fs_read | fs_write_file | fs_remove_dir | fs_remove_file | fs_make_dir |
                                   fs_make_reg | fs_make_fifo | fs_make_sym | fs_refer | fs_truncate | fs_ioctl_dev;

int status_fd = -1;
// DHARA_LAUNCH_TAG=T in the environment: the line reads `dhara-launch[T]: …`, by which the
// one who started the launcher knows the line for its own. Taken out of the environment before
// the exec; not an argument, which /proc/PID/cmdline shows to any process of the user (an
// extension's leftover child could read it at the next start), where /proc/PID/environ is
// refused to a process inside a Landlock domain.
std::string tag;

[[noreturn]] void die(const char* phase, int err, const std::string& hint, int code = 126) {
  const std::string who = tag.empty() ? "dhara-launch" : "dhara-launch[" + tag + "]";
  std::fprintf(stderr, "%s: %s: %s (%s)\n", who.c_str(), phase, std::strerror(err), hint.c_str());
  if (status_fd >= 0) {
    char line[96];
    int n = std::snprintf(line, sizeof line, "%s %d\n", phase, err);
    if (n > 0) (void)!::write(status_fd, line, static_cast<std::size_t>(n));
  }
  std::_Exit(code);
}

[[noreturn]] void usage(const std::string& what) {
  die("usage", EINVAL, what + "; usage: dhara-launch (--profile FILE | --profile-fd N | --profile-json TEXT) [--status-fd N] "
                              "[--setsid] -- /absolute/command [args...]");
}

int parse_fd(const char* s) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (!*s || *end || v < 0 || v > 1 << 20) usage(std::string("not a file descriptor: ") + s);
  return static_cast<int>(v);
}

std::string read_all(int fd, const char* what) {
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      die("profile", errno, std::string("cannot read the profile from ") + what);
    }
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > (1u << 22)) die("profile", EFBIG, "the profile is larger than 4 MiB");
  }
  return out;
}

// The folder glob() could not list, and why: a denied pattern's matches are then unknown.
std::string unlisted_folder;
int unlisted_error = 0;

int note_unlisted(const char* path, int error) {
  if (error == ENOENT || error == ENOTDIR) return 0;  // no such folder: nothing in it to hide
  unlisted_folder = path;
  unlisted_error = error;
  return 1;  // stop: fail closed rather than mask nothing
}

struct rule {
  int fd;
  std::uint64_t rights;
};

// An O_PATH fd for a granted path. Links are followed only on the fixed system paths: every
// other grant was resolved when the profile was computed, and a restart launches from the
// same profile, so a link found on one now was made since (an extension that may write next
// to another's temp dir could swap it for a link to the home). It is refused, not followed.
// `phase` names the step that opens it in the launcher's message: `mask` for the mounts,
// `landlock` for the rules.
int open_grant(const std::string& path, const char* phase) {
  if (policy::sandbox_path_follows_links(path)) return ::open(path.c_str(), O_PATH | O_CLOEXEC);
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS;
  int fd = static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof how));
  if (fd < 0 && errno == ELOOP)
    die(phase, ELOOP, "cannot grant " + path + ": a symbolic link lies on that path now, which was not there "
        "when the session computed this extension's profile, and the sandbox does not follow it; start the "
        "session again if the link is meant to be there");
  if (fd < 0 && errno == ENOSYS) die(phase, ENOSYS, "openat2 needs Linux 5.6 or later");
  return fd;
}

// Where a mask, a pin or a read-only path lies, looked at before its mount: the outermost
// grant it lies under (null: none), a write grant if there is one, and whether a link lies
// on the way from there.
struct target_look {
  const std::string* grant = nullptr;
  bool writable = false;  // `grant` is a write grant: the folders between are pinned
  bool links = false;
};

// A link on the way from a write grant to a mask or read-only path cannot be pinned (a mount
// lands on its target): the extension could replace the link itself (`~/.dhara` a link into a
// dotfiles folder, with the home writable), and the next session would read its config from
// wherever the new link points. So a link between a write grant and a mask or read-only path,
// or the path itself being one, stops the launch, when this user may write the folder that
// holds it (a link in a folder this user cannot write, a root-owned `/home` for a user, stays).
// Under a grant it may only read, a link is noted, not refused: the extension cannot replace it.
target_look look_at(const std::string& path, const policy::sandbox_profile& p) {
  target_look look;
  auto outermost = [&](const std::vector<std::string>& grants) {
    for (const std::string& g : grants)
      if (path != g && policy::is_at_or_under(path, g) && (!look.grant || g.size() < look.grant->size())) look.grant = &g;
  };
  outermost(p.write);
  look.writable = look.grant != nullptr;
  if (!look.writable) {
    outermost(p.read);
    outermost(p.execute);
  }
  if (!look.grant) return look;
  for (std::string a = path; a.size() > look.grant->size(); a.resize(a.rfind('/'))) {
    struct stat st{};
    if (::lstat(a.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) continue;
    const std::string folder = a.substr(0, std::max<std::size_t>(a.rfind('/'), 1));
    if (look.writable && ::faccessat(AT_FDCWD, folder.c_str(), W_OK, AT_EACCESS) == 0)
      die("mask", ELOOP, a + " is a symbolic link inside " + *look.grant + ", which this extension may write, on the way "
          "to a denied or read-only path: the extension could replace the link. Make it the folder or file it "
          "points to, or do not allow writing to " + *look.grant);
    look.links = true;
  }
  return look;
}

// An O_PATH descriptor for `path` as it is now, or -1 with errno (ENOENT: nothing there yet).
// Every mount goes onto such a descriptor, not onto a path looked up again. When the look saw
// no link on the way from the grant, the path is opened from the grant with no link followed:
// a folder swapped for a link after the look (another process that may write there, with
// renameat2's RENAME_EXCHANGE) stops the launch instead of moving the mount onto the link's
// target, which left the real file readable in about one launch of four.
int open_target(const std::string& path, const target_look& look) {
  if (!look.grant) return ::open(path.c_str(), O_PATH | O_CLOEXEC);
  const std::string& grant = *look.grant;
  const int base = open_grant(grant, "mask");
  if (base < 0) return -1;
  const std::string rel = path.substr(grant == "/" ? 1 : grant.size() + 1);
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = look.links ? 0 : RESOLVE_NO_SYMLINKS;
  const int fd = static_cast<int>(::syscall(SYS_openat2, base, rel.c_str(), &how, sizeof how));
  const int err = errno;
  ::close(base);
  if (fd < 0 && err == ELOOP && !look.links)
    die("mask", ELOOP, "a symbolic link appeared on the way from " + grant + " to " + path +
        " while the sandbox was set up; another process may be changing that folder. Start the extension again");
  errno = err;
  return fd;
}

// Binds the tree at `fd` onto itself, made read-only (with what is mounted below it) when asked.
void bind_onto_itself(int fd, bool read_only, const std::string& what) {
  const int tree = ::open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
  if (tree < 0) die("mask", errno, what);
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY;
  if (read_only && ::mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
    die("mask", errno, what);
  if (::move_mount(tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) die("mask", errno, what);
  ::close(tree);
}

// A tmpfs attached to no path, whose read-only open_tree clones are the masks: its root
// (mode 000) for folders, an empty mode-000 file in it for files.
int make_mask_source(bool file) {
  const int fs = ::fsopen("tmpfs", FSOPEN_CLOEXEC);
  if (fs < 0 || ::fsconfig(fs, FSCONFIG_SET_STRING, "mode", file ? "700" : "000", 0) != 0 ||
      ::fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) != 0 ||
      ::fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", file ? "2" : "1", 0) != 0 ||
      ::fsconfig(fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
    die("mask", errno, "cannot make the tmpfs that masks are made of");
  const int source = ::fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
  if (source < 0) die("mask", errno, "cannot mount the tmpfs that masks are made of");
  ::close(fs);
  if (file) {
    const int fd = ::openat(source, "empty", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0);
    if (fd < 0) die("mask", errno, "cannot create the empty mask file");
    ::close(fd);
  }
  return source;
}

// Puts a read-only copy of a mask source (make_mask_source) onto the denied path at `fd`.
void mask_onto(int source, int fd, bool dir, const std::string& path) {
  const int tree = ::open_tree(source, dir ? "" : "empty", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (dir ? AT_EMPTY_PATH : 0));
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
  if (tree < 0 || ::mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0 ||
      ::move_mount(tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    die("mask", errno, std::string("cannot hide the denied ") + (dir ? "folder " : "file ") + path);
  ::close(tree);
}

// Whether enter_namespaces made a PID namespace for this process's children.
bool own_pids = false;

// What the namespace's first process does about /proc (decided by apply_mounts): mount the
// namespace's own, read-only unless /proc lies in a write grant, or keep the one there.
enum class proc_mount { fresh, fresh_writable, keep };
proc_mount proc_plan = proc_mount::fresh;

// "/proc/<pid>…", "/proc/self…", "/proc/thread-self…": one process's files. In the namespace's
// own /proc those are the namespace's processes only: the command's own, and init's, which is
// not dumpable (its magic links, environ and memory are refused to the command).
bool names_one_process(std::string_view path) {
  if (!path.starts_with("/proc/")) return false;
  std::string_view first = path.substr(6);
  first = first.substr(0, first.find('/'));
  return first == "self" || first == "thread-self" ||
         (!first.empty() && first.find_first_not_of("0123456789") == std::string_view::npos);
}

// Why the user and mount namespace could not be made (err 0: it was).
struct namespace_failure {
  int err = 0;
  std::string what;
};

// A user namespace mapping this user to itself, with a private copy of the mounts, in which
// this process may mount, and a System V IPC namespace of its own (a shared memory segment
// of this user's, mode 0600, was writable from inside: its own namespace has none).
// Failing at any step (user namespaces off, or a kernel or security module that gives no
// capabilities in them) leaves what it made: the same user either way.
namespace_failure enter_namespaces() {
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC) != 0) return {errno, "unshare"};
  const std::pair<const char*, std::string> maps[] = {
      {"/proc/self/setgroups", "deny"},
      {"/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1"},
      {"/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1"}};
  for (const auto& [path, text] : maps) {
    const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
    const bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    const int err = errno;
    if (fd >= 0) ::close(fd);
    if (!ok) return {err, std::string("writing ") + path};
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return {errno, "making / private"};
  // The children of this process are born in a PID namespace of their own (see
  // run_in_own_pids). A kernel that refuses it leaves them in this one, as before.
  own_pids = ::unshare(CLONE_NEWPID) == 0;
  return {};
}

// Every mount read-only but the write grants. Landlock governs neither chmod, chown,
// utimensat nor setxattr, and lets any path be looked up, so without this a command with no
// filesystem capability at all changed the mode and times of ~/.ssh/id_rsa; on a read-only
// mount they are EROFS. Each outermost write grant is cloned first, with what is mounted below
// it and its flags as they are, and the clone is put back onto it once / is read-only. The
// masks, pins and read-only binds that follow are made on these clones.
void make_root_read_only(const policy::sandbox_profile& p) {
  struct kept {
    int at, tree;
  };
  std::vector<kept> grants;
  for (const std::string& g : p.write) {
    const bool inside_another = std::any_of(p.write.begin(), p.write.end(), [&](const std::string& o) {
      return o.size() < g.size() ? policy::is_at_or_under(g, o) : o == g && &o < &g;
    });
    if (inside_another) continue;
    const int at = open_grant(g, "mask");
    if (at < 0) continue;  // grants nothing: open_rules skips it too
    // A device or a pipe is written through a read-only mount as well; kept writable, its
    // mode could be changed (`chmod 000 /dev/null` as root, for every process of the machine).
    struct stat st{};
    if (::fstat(at, &st) != 0) die("mask", errno, "cannot look at " + g + ", a path the extension may write");
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
      ::close(at);
      continue;
    }
    const int tree = ::open_tree(at, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    if (tree < 0) die("mask", errno, "cannot keep " + g + " writable while the rest is made read-only");
    grants.push_back({at, tree});
  }
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY;
  if (::mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &attr, sizeof attr) != 0)
    die("mask", errno, "cannot make the mounts read-only outside the paths the extension may write");
  for (const kept& k : grants) {
    if (::move_mount(k.tree, "", k.at, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
      die("mask", errno, "cannot put a write grant back, writable, after making the rest read-only");
    ::close(k.tree);
    ::close(k.at);
  }
}

// What step 2 did: made the namespaces and mounts; needed none (the extension may write `/`
// and nothing is denied inside a grant); or could make no user namespace, and nothing but the
// read-only mounts needed one (the caller then refuses the calls they stop, in seccomp).
enum class mounts { made, not_needed, unavailable };

// Step 2: make every mount read-only but the write grants (make_root_read_only), hide denied
// paths that lie inside granted ones, and make read-only paths inside write grants
// read-only. Landlock cannot deny below an allowed folder, so a read-only mode-000 tmpfs
// covers a denied folder, a read-only bind of an empty mode-000 file covers a denied file,
// and a read-only bind of a folder onto itself keeps it readable but not writable (EROFS).
// The capabilities this gives (inside the new user namespace only) are dropped in step 3,
// after which mode 000 and read-only hold even for root. Every mount is made from a
// descriptor onto a descriptor (open_tree, move_mount): the masks' source is a tmpfs
// attached to no path, and each target is opened once it is looked at (open_target).
// (They were made by path: the empty file on a scratch tmpfs over the temp dir, which an
// extension that may write there could swap for a link to ~/.ssh/id_rsa while another
// started; and a folder swapped for a link between the look for links and the mount would
// have moved the mount onto the link's target.)
mounts apply_mounts(const policy::sandbox_profile& p) {
  std::vector<std::string> masks = p.mask;
  for (const std::string& pattern : p.mask_globs) {
    glob_t g{};
    // Backslash escapes: policy::glob3_pattern. GLOB_PERIOD: dhara's matcher lets `*` match a
    // leading dot, so `*.env` must mask `.env` too. A folder that exists but cannot be listed
    // (mode 0300) would hide what it holds: the launch stops.
    const int rc = ::glob(pattern.c_str(), GLOB_NOSORT | GLOB_PERIOD, note_unlisted, &g);
    if (rc == GLOB_ABORTED)
      die("mask", unlisted_error, "cannot list " + unlisted_folder + " to hide the denied entries matching " + pattern +
                                      " (give its owner read permission on it)");
    if (rc == 0)
      for (std::size_t i = 0; i < g.gl_pathc; ++i) {
        // GLOB_PERIOD lets `*` and `.*` match `.` and `..` too: the globbed folder itself and
        // the one above it, which are not what the pattern denies.
        const std::string_view match = g.gl_pathv[i];
        const std::string_view name = match.substr(match.rfind('/') + 1);
        if (name != "." && name != "..") masks.emplace_back(match);
      }
    ::globfree(&g);
  }
  struct present_path {
    std::string path;
    bool dir = false;
    bool known = true;  // false: could not be looked at before the namespaces, see below
    target_look look;   // taken inside the new namespaces, below
  };
  // What exists now; absent: nothing to hide or protect yet (docs/sandbox.md, limits). Only
  // ENOENT and ENOTDIR say absent: a folder on the way that this user cannot search (EACCES)
  // may be one the extension made so with chmod, which Landlock does not govern, so that its
  // next start would skip the mask and it could chmod the folder back and read what the mask
  // hid. Such a path is looked at again inside the user namespace, where this user's own
  // folders can be searched whatever their mode.
  std::vector<present_path> present, read_only;
  auto look_now = [](const std::string& path, std::vector<present_path>& into) {
    struct stat st{};
    if (::stat(path.c_str(), &st) == 0) into.push_back({path, S_ISDIR(st.st_mode), true, {}});
    else if (errno != ENOENT && errno != ENOTDIR) into.push_back({path, false, false, {}});
  };
  for (const std::string& m : masks) look_now(m, present);
  for (const std::string& r : p.read_only) look_now(r, read_only);
  const bool writes_everywhere = std::find(p.write.begin(), p.write.end(), "/") != p.write.end();
  const bool masks_needed = !present.empty() || !read_only.empty();
  if (!masks_needed && writes_everywhere) return mounts::not_needed;
  // The working folder is a place in one mount: what is mounted onto it or above it later is
  // not seen through it (a relative path from a pinned folder reached the file under its
  // mask). It is entered again by name once the mounts are made, at the end.
  char here[PATH_MAX];
  const int here_error = ::getcwd(here, sizeof here) != nullptr ? 0 : errno;
  if (const namespace_failure f = enter_namespaces(); f.err != 0) {
    if (masks_needed)
      die("namespace", f.err,
          "a user namespace is needed to hide the denied paths and keep the read-only ones inside allowed ones, and " +
              f.what + " failed: user namespaces are off, or this process may not make one (in a chroot, where the "
              "kernel refuses them, or inside another sandbox); enable them (sysctl "
              "kernel.unprivileged_userns_clone=1) or run dhara outside that chroot or sandbox");
    return mounts::unavailable;
  }
  // The paths that could not be looked at: with the capabilities of this namespace over what
  // this user owns, one still out of reach lies behind a folder of another owner, which the
  // extension can neither search nor change: nothing there to hide from it.
  for (std::vector<present_path>* paths : {&present, &read_only})
    std::erase_if(*paths, [](present_path& t) {
      if (t.known) return false;
      struct stat st{};
      if (::stat(t.path.c_str(), &st) == 0) {
        t.dir = S_ISDIR(st.st_mode);
        t.known = true;
        return false;
      }
      if (errno == ENOENT || errno == ENOTDIR || errno == EACCES) return true;
      die("mask", errno, "cannot look at " + t.path + ", a denied or read-only path");
    });
  // A path inside a folder that is masked is hidden with it; its own mount would find nothing
  // there once the folder's mask is on (and stop the launch).
  std::vector<std::string> masked_folders;
  for (const present_path& m : present)
    if (m.dir) masked_folders.push_back(m.path);
  for (std::vector<present_path>* paths : {&present, &read_only})
    std::erase_if(*paths, [&](const present_path& t) {
      return std::any_of(masked_folders.begin(), masked_folders.end(), [&](const std::string& f) {
        return f != t.path && policy::is_at_or_under(t.path, f);
      });
    });
  // Links on the way are looked at here, where this user's capabilities cover what it owns:
  // a link in a folder it owns is one it may replace (it may change the folder's mode).
  for (std::vector<present_path>* paths : {&present, &read_only})
    for (present_path& t : *paths) t.look = look_at(t.path, p);
  // A fresh /proc would lie over what is hidden or kept read-only under /proc, and over a
  // write grant there: then the one there stays (a review: `/proc/cpuinfo` denied, or /proc
  // itself, were readable again). One process's files do not count (names_one_process).
  for (const std::vector<present_path>* paths : {&present, &read_only})
    for (const present_path& t : *paths)
      if (policy::is_at_or_under(t.path, "/proc") && !names_one_process(t.path)) proc_plan = proc_mount::keep;
  for (const std::string& g : p.write) {
    if (policy::is_at_or_under(g, "/proc") && g != "/proc") proc_plan = proc_mount::keep;
    else if (policy::is_at_or_under("/proc", g) && proc_plan == proc_mount::fresh) proc_plan = proc_mount::fresh_writable;
  }
  if (!writes_everywhere) make_root_read_only(p);
  // A mask holds its own path, not the folders above it. With write on the grant around it,
  // an extension could rename a folder between that grant and the mask (`mv config config2`
  // with `config/secrets` denied), and the next start, which finds its masks by path, would
  // hide nothing. Each such folder is bound onto itself first: a mount point cannot be renamed
  // or removed (EBUSY). Outer folders first; each bind takes the mounts below it along (a
  // filesystem mounted inside the project stays visible), and the masks come after.
  std::vector<std::string> pins;
  auto pin_above = [&](const present_path& inner) {
    if (!inner.look.writable) return;
    for (std::string a = inner.path.substr(0, inner.path.rfind('/')); a.size() > inner.look.grant->size();
         a.resize(a.rfind('/')))
      pins.push_back(a);
  };
  for (const present_path& m : present) pin_above(m);
  for (const present_path& r : read_only) pin_above(r);
  std::sort(pins.begin(), pins.end());
  pins.erase(std::unique(pins.begin(), pins.end()), pins.end());
  for (const std::string& a : pins) {
    const std::string what = "cannot keep " + a + ", which holds a denied or read-only path, from being renamed";
    const int fd = open_target(a, look_at(a, p));
    if (fd < 0) die("mask", errno, what);
    bind_onto_itself(fd, false, what);
    ::close(fd);
  }
  // Read-only next: a mask inside a read-only folder is then mounted on top of it. What is
  // mounted below a read-only path is made read-only with it; exec stays as it was, for
  // native extensions.
  for (const present_path& r : read_only) {
    const std::string what = "cannot make " + r.path + " read-only";
    const int fd = open_target(r.path, r.look);
    if (fd < 0) die("mask", errno, what);
    bind_onto_itself(fd, true, what);
    ::close(fd);
  }
  int sources[2] = {-1, -1};  // folders, files
  for (const present_path& m : present) {
    int& source = sources[m.dir ? 0 : 1];
    if (source < 0) source = make_mask_source(!m.dir);
    const int fd = open_target(m.path, m.look);
    if (fd < 0) die("mask", errno, std::string("cannot hide the denied ") + (m.dir ? "folder " : "file ") + m.path);
    mask_onto(source, fd, m.dir, m.path);
    ::close(fd);
  }
  for (int source : sources)
    if (source >= 0) ::close(source);
  if (here_error == ERANGE || here_error == ENAMETOOLONG)
    die("cwd", here_error,
        "the path of the folder the command starts in is longer than " + std::to_string(PATH_MAX) +
            " bytes, so it cannot be entered again through the sandbox's mounts; start it from a shorter path");
  if (here_error != 0)
    die("cwd", here_error,
        "cannot tell which folder the command starts in, to enter it again through the sandbox's mounts; start it "
        "from a folder that exists");
  if (::chdir(here) != 0)
    die("cwd", errno,
        std::string("cannot enter the working folder ") + here +
            " again through the sandbox's mounts; start the command from a folder outside the denied paths");
  return mounts::made;
}

// A terminal passed as fd 0, 1 or 2 (`dhara sandbox exec` in a shell) is a file on the
// caller's mounts, which stay writable: `chmod 666 /proc/self/fd/0` would hand the terminal,
// and what is typed in it, to the other users of the machine. Each is opened again by its
// name here, on this namespace's read-only /dev/pts, and put in its place, with the same
// access mode; the same terminal (one checked by its device number), not a new one. One this
// process cannot open, holding the namespace's capabilities over what this user owns, is
// another user's (`sudo -u` in one's own terminal): only its owner may change its mode.
void reopen_terminals() {
  for (int fd = 0; fd <= 2; ++fd) {
    char name[PATH_MAX];
    struct stat was{}, now{};
    if (!::isatty(fd) || ::fstat(fd, &was) != 0) continue;
    if (::ttyname_r(fd, name, sizeof name) != 0)
      die("fds", errno, "cannot find the name of the terminal at fd " + std::to_string(fd) + " to open it again inside "
                        "the sandbox; run the command with its input and output redirected");
    const int flags = ::fcntl(fd, F_GETFL);
    const int again = ::open(name, (flags & (O_ACCMODE | O_APPEND | O_NONBLOCK)) | O_NOCTTY | O_CLOEXEC);
    if (again < 0 && (errno == EACCES || errno == EPERM)) continue;
    if (again < 0 || ::fstat(again, &now) != 0 || now.st_rdev != was.st_rdev || !S_ISCHR(now.st_mode))
      die("fds", again < 0 ? errno : EXDEV, "cannot open the terminal " + std::string(name) + " again inside the "
                                            "sandbox; run the command with its input and output redirected");
    if (::dup3(again, fd, 0) < 0) die("fds", errno, "cannot put the terminal back as fd " + std::to_string(fd));
    ::close(again);
  }
}

// How the process this one waits for ended, passed on as this process's own end: the same
// exit code, or the same signal (no core file: the program's own was its to make).
[[noreturn]] void end_as(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const rlimit no_core{0, 0};
    (void)::setrlimit(RLIMIT_CORE, &no_core);
    (void)::signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    (void)::sigprocmask(SIG_UNBLOCK, &one, nullptr);
    (void)::kill(::getpid(), sig);
    std::_Exit(128 + sig);
  }
  std::_Exit(WIFEXITED(status) ? WEXITSTATUS(status) : 126);
}

void ignore_signal(int) {}

// Closes every descriptor but those in `keep` (ascending).
void close_all_but(std::initializer_list<int> keep) {
  unsigned from = 0;
  for (int fd : keep) {
    if (fd < 0) continue;
    if (static_cast<unsigned>(fd) > from) (void)::close_range(from, static_cast<unsigned>(fd) - 1, 0);
    from = static_cast<unsigned>(fd) + 1;
  }
  (void)::close_range(from, ~0u, 0);
}

// Step 2b: nothing the command starts outlives it. A process that leaves the command's process
// group (`setsid()` and a fork) escaped every kill, which names a group: it outlived the
// spawn, the session and dhara, with the sandbox and approvals it had, never audited again (a
// review). The command now runs as the second process of a PID namespace of its own, whose
// first one (below, "init") reaps what is left to it and ends when the command ends, and then
// the kernel kills everything else in the namespace. This process, which dhara started and
// waits for, stays outside and ends as the command did; it dies with dhara (PDEATHSIG), init
// dies with it, and so everything inside. Returns in the process that goes on to run the
// command; the other two never return. They keep no descriptor but their pipes' ends.
void run_in_own_pids() {
  int ends[2], alive[2];  // init → launcher: the command's status; launcher → init: held while it lives
  if (::pipe2(ends, O_CLOEXEC) != 0 || ::pipe2(alive, O_CLOEXEC) != 0)
    die("pid namespace", errno, "cannot make a pipe");
  // The signals dhara sends the command's group (SIGTERM first, then SIGKILL) are the
  // command's: the two waiting processes do not die of the catchable ones (a handler that does
  // nothing). They are blocked until the command exists and has the dispositions it came with
  // back, and one that came before is not lost (a review found a SIGTERM while the command was
  // set up swallowed until the SIGKILL): to the launcher before init exists, it ends the launch
  // as that signal would have; to init before the command exists, the same; to init as the
  // command was forked, init passes it on (the command may then get it twice).
  constexpr int quieted[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM};
  sigset_t quiet_set, mask_before;
  sigemptyset(&quiet_set);
  for (int sig : quieted) sigaddset(&quiet_set, sig);
  (void)::sigprocmask(SIG_BLOCK, &quiet_set, &mask_before);
  struct sigaction quiet{}, was[std::size(quieted)]{};
  quiet.sa_handler = ignore_signal;
  sigemptyset(&quiet.sa_mask);
  for (std::size_t i = 0; i < std::size(quieted); ++i) (void)::sigaction(quieted[i], &quiet, &was[i]);
  auto pending_one = [&]() {
    sigset_t pending;
    sigemptyset(&pending);
    (void)::sigpending(&pending);
    for (int sig : quieted)
      if (sigismember(&pending, sig) == 1) return sig;
    return 0;
  };
  const pid_t init = ::fork();
  if (init < 0) die("pid namespace", errno, "cannot start the namespace's first process");
  if (init > 0) {  // outside: wait, then end as the command did
    (void)::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    // The command's pipes close when it ends, and nothing inherited (dhara's log) stays open.
    close_all_but({std::min(ends[0], alive[1]), std::max(ends[0], alive[1])});
    if (const int sig = pending_one(); sig != 0) {
      (void)::kill(init, SIGKILL);
      while (::waitpid(init, nullptr, 0) < 0 && errno == EINTR) {
      }
      end_as(sig);  // a wait status that says "killed by sig"
    }
    (void)::sigprocmask(SIG_SETMASK, &mask_before, nullptr);
    int status = 0;
    while (::waitpid(init, &status, 0) < 0)
      if (errno != EINTR) std::_Exit(126);
    int command_status = 0;
    if (::read(ends[0], &command_status, sizeof command_status) == sizeof command_status) end_as(command_status);
    end_as(status);
  }
  // init: pid 1 of the namespace. It dies with the launcher (PDEATHSIG), and looks once that
  // the launcher did not die before that was set: its end of `alive` is then closed.
  ::close(ends[0]);
  ::close(alive[1]);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) std::_Exit(126);
  if (pollfd gone{alive[0], POLLIN, 0}; ::poll(&gone, 1, 0) != 0) std::_Exit(126);
  (void)::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  // The namespace's own /proc, so that the command's pid (2) names it there and no process
  // outside is listed; read-only as every other mount outside the write grants (a review:
  // writable, a command run as root changed the mode of kernel-wide /proc files). Where a
  // denied or read-only path lies under /proc, the one there stays (apply_mounts). A kernel
  // that refuses the mount leaves it too.
  if (proc_plan != proc_mount::keep)
    (void)::mount("proc", "/proc", "proc",
                  MS_NOSUID | MS_NODEV | MS_NOEXEC | (proc_plan == proc_mount::fresh ? MS_RDONLY : 0), nullptr);
  auto report = [&](int status) {
    (void)!::write(ends[1], &status, sizeof status);
    std::_Exit(0);  // the kernel ends every other process of the namespace
  };
  if (const int sig = pending_one(); sig != 0) report(sig);  // as if the command had died of it
  const pid_t command = ::fork();
  if (command < 0) die("pid namespace", errno, "cannot start the command in its namespace");
  if (command == 0) {
    ::close(ends[1]);
    ::close(alive[0]);
    for (std::size_t i = 0; i < std::size(quieted); ++i) (void)::sigaction(quieted[i], &was[i], nullptr);
    (void)::sigprocmask(SIG_SETMASK, &mask_before, nullptr);
    return;  // goes on to the sandbox's last steps and the exec
  }
  close_all_but({std::min(ends[1], alive[0]), std::max(ends[1], alive[0])});
  if (const int sig = pending_one(); sig != 0) (void)::kill(command, sig);
  (void)::sigprocmask(SIG_SETMASK, &mask_before, nullptr);
  for (;;) {
    int status = 0;
    const pid_t ended = ::waitpid(-1, &status, 0);
    if (ended < 0 && errno == EINTR) continue;
    if (ended == command) report(status);
    if (ended < 0) std::_Exit(126);
  }
}

// O_PATH fds for every granted path, opened before capabilities go (a root launcher may
// need them to reach the path). A path that does not exist grants nothing and is skipped.
std::vector<rule> open_rules(const policy::sandbox_profile& p) {
  std::vector<rule> rules;
  auto add = [&](const std::vector<std::string>& paths, std::uint64_t rights) {
    for (const std::string& path : paths) {
      int fd = open_grant(path, "landlock");
      if (fd < 0) continue;
      struct stat st{};
      if (::fstat(fd, &st) != 0) die("landlock", errno, "cannot stat " + path);
      rules.push_back({fd, S_ISDIR(st.st_mode) ? rights : rights & fs_file_rights});
    }
  };
  add(p.read, fs_read);
  add(p.execute, fs_exec);
  add(p.write, fs_write);
  return rules;
}

// The extension runs under SCHED_BATCH (docs/performance.md): a woken extension does not
// preempt the dhara thread that just wrote its request, which goes on to its next message
// instead of being switched out; the extension runs on an idle core or at the next tick. The
// nice value stays. Only a matter of speed: a kernel that refuses it leaves the default.
void schedule_as_batch() {
  sched_param none{};
  (void)::sched_setscheduler(0, SCHED_BATCH, &none);
}

// Step 3: no_new_privs (Landlock and seccomp need it; setuid bits stop working) and every
// capability gone: bounding set (what a root execve would regain), ambient, then capset 0.
void drop_privileges() {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("privileges", errno, "cannot set no_new_privs");
  for (int cap = 0; cap < 64; ++cap) {
    if (::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) <= 0) continue;  // absent or beyond the last cap
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && !(errno == EPERM && ::geteuid() != 0))
      die("privileges", errno, "cannot drop capability " + std::to_string(cap) + " from the bounding set");
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
    die("privileges", errno, "cannot clear the ambient capabilities");
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capset, &hdr, data) != 0) die("privileges", errno, "cannot drop capabilities");
}

// Step 4: Landlock with every right this ABI knows handled, so what no rule grants is denied.
void apply_landlock(const policy::sandbox_profile& p, const std::vector<rule>& rules) {
  long abi = ::syscall(sys_landlock_create_ruleset, nullptr, 0, ll_create_ruleset_version);
  if (abi < 1)
    die("landlock", errno, errno == EOPNOTSUPP ? "Landlock is not enabled: add 'landlock' to the lsm= boot parameter"
                                               : "this kernel has no Landlock (Linux 5.13 or later is needed)");
  ll_ruleset_attr attr{fs_abi1, 0, 0};
  if (abi >= 2) attr.handled_access_fs |= fs_refer;
  if (abi >= 3) attr.handled_access_fs |= fs_truncate;
  if (abi >= 5) attr.handled_access_fs |= fs_ioctl_dev;
  if (abi >= 4) {
    if (!p.network.bind) attr.handled_access_net |= net_bind_tcp;
    if (!p.network.connect) attr.handled_access_net |= net_connect_tcp;
  }
  if (abi >= 6) attr.scoped = scope_abstract_unix | scope_signal;
  std::size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? 2 * sizeof(std::uint64_t) : sizeof(std::uint64_t);
  int ruleset = static_cast<int>(::syscall(sys_landlock_create_ruleset, &attr, size, 0));
  if (ruleset < 0) die("landlock", errno, "cannot create the Landlock ruleset");
  for (const rule& r : rules) {
    ll_path_beneath_attr pb{r.rights & attr.handled_access_fs, r.fd};
    if (pb.allowed_access == 0) continue;
    if (::syscall(sys_landlock_add_rule, ruleset, ll_rule_path_beneath, &pb, 0) != 0)
      die("landlock", errno, "cannot add a Landlock path rule");
    ::close(r.fd);
  }
  if (::syscall(sys_landlock_restrict_self, ruleset, 0) != 0) die("landlock", errno, "cannot enforce Landlock");
  ::close(ruleset);
}

// Adds a seccomp rule for the syscall `name`, unless this architecture has no such call.
void add_rule(scmp_filter_ctx ctx, std::uint32_t action, const char* name, std::vector<scmp_arg_cmp> args) {
  const int nr = ::seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR) return;  // not a syscall on this architecture
  const int rc = ::seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned>(args.size()), args.data());
  if (rc != 0) die("seccomp", -rc, std::string("cannot add the seccomp rule for ") + name);
}

// Adds an EPERM rule for a system call this libseccomp may not know by name (one numbered
// 424 or above: the same number on every architecture since Linux 5.1).
void add_rule_by_number(scmp_filter_ctx ctx, int nr) {
  if (const int rc = ::seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0); rc != 0 && rc != -EEXIST)
    die("seccomp", -rc, "cannot add the seccomp rule for system call " + std::to_string(nr));
}

// Without the read-only mounts of make_root_read_only (no user namespace could be made, and
// nothing else needed one), every call that changes a file's mode, owner, times or extended
// attributes is refused (EPERM), in the extension's own folders too: the fail-closed side.
// The calls newer than this libseccomp are named by number (fchmodat2 452, setxattrat 463,
// removexattrat 466).
void refuse_attribute_changes(scmp_filter_ctx ctx) {
  for (const char* name : {"chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "utime", "utimes",
                           "futimesat", "utimensat", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
                           "lremovexattr", "fremovexattr"})
    add_rule(ctx, SCMP_ACT_ERRNO(EPERM), name, {});
  for (int nr : {452, 463, 466}) add_rule_by_number(ctx, nr);
  // chattr's ioctls: FS_IOC_SETFLAGS and FS_IOC_SETVERSION (long and 32-bit forms), FS_IOC_FSSETXATTR.
  for (std::uint64_t request : {0x40086602u, 0x40046602u, 0x40087602u, 0x40047602u, 0x401c5820u})
    add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", {SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, request)});
  // No IPC namespace either: the user's System V segments, queues and semaphores stay out of reach.
  for (const char* name : {"shmget", "shmat", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop",
                           "semtimedop", "semctl"})
    add_rule(ctx, SCMP_ACT_ERRNO(EPERM), name, {});
}

// Step 5, built here and loaded last: the syscalls Landlock does not cover.
scmp_filter_ctx build_seccomp(const policy::sandbox_profile& p) {
  scmp_filter_ctx ctx = ::seccomp_init(SCMP_ACT_ALLOW);  // other architectures are killed
  if (!ctx) die("seccomp", ENOMEM, "cannot initialise libseccomp");
  const auto eperm = SCMP_ACT_ERRNO(EPERM);
  auto add = [&](std::uint32_t action, const char* name, std::vector<scmp_arg_cmp> args) {
    add_rule(ctx, action, name, std::move(args));
  };
  // Always refused: debugging and memory of others, kernel attack surface, namespaces, mounts,
  // and fanotify (unprivileged since Linux 5.13, it reports the names of what changes in a
  // folder the extension cannot list).
  for (const char* name :
       {"ptrace", "process_vm_readv", "process_vm_writev", "io_uring_setup", "io_uring_enter", "io_uring_register",
        "bpf", "userfaultfd", "keyctl", "add_key", "request_key", "mount", "umount2", "pivot_root", "move_mount",
        "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "unshare", "setns", "chroot",
        "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "perf_event_open",
        "open_by_handle_at", "name_to_handle_at", "swapon", "swapoff", "reboot", "acct", "quotactl", "syslog",
        "uselib", "iopl", "ioperm", "fanotify_init", "fanotify_mark"})
    add(eperm, name, {});
  add_rule_by_number(ctx, 467);  // open_tree_attr (Linux 6.15), of the mount family too
  // A shared terminal (`dhara sandbox exec` in a shell): no typing into it, no console
  // switch, no other line discipline (a module the kernel may load), no taking it as a
  // controlling terminal, and no handing its foreground (and the user's ^C) to another job.
  for (unsigned long request : {TIOCSTI, TIOCLINUX, TIOCSETD, TIOCSCTTY, TIOCSPGRP})
    add(eperm, "ioctl", {SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, request)});
  // Other processes of the user, dhara among them (Landlock scopes signals only): their
  // resource limits (`prlimit(dhara, RLIMIT_FSIZE, 0)` made every audit write fail, so every
  // request was denied; RLIMIT_CPU killed a process by proxy), nice value, scheduling, CPU
  // affinity and I/O priority. Each call may name only this process (pid 0); glibc's
  // setrlimit and nice do, and the launcher's own SCHED_BATCH comes before the filter.
  add(eperm, "prlimit64", {SCMP_A0(SCMP_CMP_NE, 0)});
  for (const char* name : {"sched_setscheduler", "sched_setparam", "sched_setattr", "sched_setaffinity"})
    add(eperm, name, {SCMP_A0(SCMP_CMP_NE, 0)});
  add(eperm, "setpriority", {SCMP_A0(SCMP_CMP_NE, 0 /* PRIO_PROCESS */)});
  add(eperm, "setpriority", {SCMP_A1(SCMP_CMP_NE, 0)});
  add(eperm, "ioprio_set", {SCMP_A0(SCMP_CMP_NE, 1 /* IOPRIO_WHO_PROCESS */)});
  add(eperm, "ioprio_set", {SCMP_A1(SCMP_CMP_NE, 0)});
  // A lease on a file it may read held the writers outside (dhara, the user's editor) for
  // up to lease-break-time (45 s).
  add(eperm, "fcntl", {SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, F_SETLEASE)});
  // A datagram socketpair can still send to a path (sendto, connect) outside, which Landlock
  // does not check: /dev/log, journald, a notify socket. Stream and seqpacket pairs cannot.
  add(eperm, "socketpair", {SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_DGRAM)});
  for (std::uint64_t f : {CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
                          CLONE_NEWNET, static_cast<decltype(CLONE_NEWNS)>(0x80) /* CLONE_NEWTIME */})
    add(eperm, "clone", {SCMP_A0(SCMP_CMP_MASKED_EQ, f, f)});
  // clone3 passes its flags in memory seccomp cannot read: ENOSYS makes libc use clone.
  add(SCMP_ACT_ERRNO(ENOSYS), "clone3", {});
  if (!p.spawn) {
    add(eperm, "fork", {});
    add(eperm, "vfork", {});
    add(eperm, "clone", {SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0)});  // threads still work
  }
  // listen() on a socket never bound takes a port of its own, which Landlock does not check:
  // with network:fetch alone, a process listened and accepted.
  if (!p.network.bind) add(eperm, "listen", {});
  // socket(): AF_UNIX never (a path socket outside is not covered by Landlock); TCP with a
  // network capability (Landlock then limits connect/bind); UDP and route netlink with
  // network:dns; every other family and type refused. A stream socket must be TCP and a
  // datagram socket UDP: Landlock's TCP rules do not cover MPTCP (IPPROTO_MPTCP connected
  // under a bind-only profile and listened under a connect-only one), nor SCTP.
  // EPROTONOSUPPORT, as on a kernel without them, so that a program (Go's MPTCP listeners)
  // falls back to TCP.
  if (!p.network.connect && !p.network.bind && !p.network.udp) {
    add(eperm, "socket", {});  // one rule: the filter stays short (socketpair is another syscall)
    return ctx;
  }
  for (std::uint64_t domain = 0; domain < 64; ++domain) {
    if (domain == AF_INET || domain == AF_INET6) {
      for (std::uint64_t type = 0; type < 16; ++type) {
        bool ok = (type == SOCK_STREAM && (p.network.connect || p.network.bind)) || (type == SOCK_DGRAM && p.network.udp);
        if (!ok) {
          add(eperm, "socket", {SCMP_A0(SCMP_CMP_EQ, domain), SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, type)});
          continue;
        }
        const std::uint64_t only = type == SOCK_STREAM ? IPPROTO_TCP : IPPROTO_UDP;  // or 0, the default
        const auto unsupported = SCMP_ACT_ERRNO(EPROTONOSUPPORT);
        for (std::uint64_t protocol = 1; protocol < only; ++protocol)
          add(unsupported, "socket", {SCMP_A0(SCMP_CMP_EQ, domain), SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, type),
                                      SCMP_A2(SCMP_CMP_EQ, protocol)});
        add(unsupported, "socket", {SCMP_A0(SCMP_CMP_EQ, domain), SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, type),
                                    SCMP_A2(SCMP_CMP_GT, only)});
      }
    } else if (domain == AF_NETLINK && p.network.udp) {
      add(eperm, "socket", {SCMP_A0(SCMP_CMP_EQ, domain), SCMP_A2(SCMP_CMP_GE, 1)});  // NETLINK_ROUTE only
    } else {
      add(eperm, "socket", {SCMP_A0(SCMP_CMP_EQ, domain)});
    }
  }
  add(eperm, "socket", {SCMP_A0(SCMP_CMP_GE, 64)});
  return ctx;
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* t = std::getenv("DHARA_LAUNCH_TAG")) {
    std::string given = t;
    ::unsetenv("DHARA_LAUNCH_TAG");
    if (given.empty() || given.size() > 64 || given.find_first_not_of("0123456789abcdef") != std::string::npos)
      usage("DHARA_LAUNCH_TAG must be 1 to 64 lowercase hexadecimal digits");
    tag = std::move(given);
  }
  std::string profile_file, profile_json;
  int profile_fd = -1;
  bool new_session = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "--setsid") new_session = true;
    else if (a == "--profile" && i + 1 < argc) profile_file = argv[++i];
    else if (a == "--profile-fd" && i + 1 < argc) profile_fd = parse_fd(argv[++i]);
    else if (a == "--profile-json" && i + 1 < argc) profile_json += argv[++i];
    else if (a == "--status-fd" && i + 1 < argc) status_fd = parse_fd(argv[++i]);
    else usage("unknown option " + a);
  }
  if (i >= argc) usage("no command after --");
  if (int given = !profile_file.empty() + (profile_fd >= 0) + !profile_json.empty(); given != 1)
    usage("give exactly one of --profile, --profile-fd and --profile-json");
  char** command = argv + i;
  if (command[0][0] != '/') usage(std::string("the command must be an absolute path: ") + command[0]);

  // Step 1: die with the parent, and no inherited fd survives the exec (an open fd to a
  // folder outside the profile would bypass Landlock).
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) die("fds", errno, "cannot set the parent-death signal");
  if (new_session && ::setsid() < 0) die("fds", errno, "cannot start a new session");

  std::string text = profile_json;
  if (!profile_json.empty()) {
    // given inline (the extension host: no file to write, so a full disk cannot stop it)
  } else if (profile_fd >= 0) {
    text = read_all(profile_fd, "the profile fd");
    ::close(profile_fd);
  } else {
    int fd = ::open(profile_file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) die("profile", errno, "cannot open " + profile_file);
    text = read_all(fd, profile_file.c_str());
    ::close(fd);
  }
  auto profile = policy::parse_sandbox_profile(text);
  if (!profile) die("profile", EINVAL, profile.err().message);

  struct stat st{};
  if (::stat(command[0], &st) != 0)
    die("exec", errno, std::string("cannot find ") + command[0], errno == ENOENT || errno == ENOTDIR ? 127 : 126);

  if (::close_range(3, ~0u, CLOSE_RANGE_CLOEXEC) != 0)
    die("fds", errno, "close_range(CLOSE_RANGE_CLOEXEC) needs Linux 5.11 or later");
  schedule_as_batch();
  scmp_filter_ctx filter = build_seccomp(*profile);
  switch (apply_mounts(*profile)) {
    case mounts::made: reopen_terminals(); break;
    case mounts::unavailable: refuse_attribute_changes(filter); break;
    case mounts::not_needed: break;
  }
  if (own_pids) run_in_own_pids();
  std::vector<rule> rules = open_rules(*profile);
  drop_privileges();
  apply_landlock(*profile, rules);
  if (int rc = ::seccomp_load(filter); rc != 0)
    die("seccomp", -rc, "cannot load the seccomp filter (is seccomp enabled in this kernel?)");
  ::execve(command[0], command, environ);
  int err = errno;
  die("exec", err, std::string("cannot run ") + command[0] + " in the sandbox", err == ENOENT ? 127 : 126);
}
