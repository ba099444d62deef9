// What the running kernel offers for the OS sandbox (see sandbox_support.hpp). Each probe
// does what the launcher will do, for real: a feature that is compiled in but refused at
// run time (a container's seccomp profile, an LSM restricting user namespaces) shows up as
// missing, with the step that failed.
#include "io/sandbox_support.hpp"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444  // the same number on every architecture but alpha
#endif
#ifndef SYS_seccomp
#error "this platform has no seccomp syscall number"
#endif

namespace dhara::io {
namespace {

// What a probe child reports over its pipe: the step it is at, and the errno that step
// failed with (0 while it runs). A last record with err == 0 and step != 0 means the child
// died inside that step (an outer seccomp filter may kill with SIGSYS).
struct probe_record {
  int step;
  int err;
};

// Writes one record. Async-signal-safe: called between fork and _exit.
void report(int fd, int step, int err) {
  const probe_record r{step, err};
  while (::write(fd, &r, sizeof r) < 0 && errno == EINTR) {
  }
}

// The outcome of one probe child.
struct probe_outcome {
  bool ok = false;
  int step = 0;     // the failing step (0: before the first, i.e. fork itself)
  int err = 0;      // its errno (0: the child died, see `signal`)
  int signal = 0;   // the signal that killed the child, if one did
};

// Runs `body(fd)` in a forked child; the body reports its steps through report() and
// returns 0 when everything worked. The child runs only async-signal-safe code (the body
// must too), so a multi-threaded caller is safe: nothing is allocated or locked after fork.
template <class Body>
probe_outcome run_probe_child(Body&& body) {
  probe_outcome out;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    out.err = errno;
    return out;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    out.err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return out;
  }
  if (pid == 0) {
    ::close(fds[0]);
    // The probe must never outlive the doctor: if the parent dies, so does the child.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int rc = body(fds[1]);
    if (rc == 0) report(fds[1], 0, 0);
    ::_exit(rc == 0 ? 0 : 1);
  }
  ::close(fds[1]);
  probe_record last{0, 0};
  bool finished = false;
  probe_record r;
  while (true) {
    const ssize_t n = ::read(fds[0], &r, sizeof r);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof r)) break;
    last = r;
    if (r.step == 0 || r.err != 0) finished = true;
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
  out.step = last.step;
  out.err = last.err;
  out.ok = finished && last.step == 0 && last.err == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return out;
}

std::string errno_text(int err) { return std::strerror(err); }

std::string died_text(const probe_outcome& o) {
  if (o.signal != 0) return "the probe child was killed by signal " + std::to_string(o.signal) + " (" +
                            ::strsignal(o.signal) + "), likely by an outer seccomp filter";
  return "the probe child ended without reporting";
}

// ---- Landlock ------------------------------------------------------------------------------

void probe_landlock(sandbox_support& s) {
  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi > 0) {
    s.landlock_abi = static_cast<int>(abi);
    return;
  }
  const int err = abi < 0 ? errno : 0;
  switch (err) {
    case ENOSYS:
      s.landlock_detail =
          "the kernel has no Landlock (Linux older than 5.13 or built without CONFIG_SECURITY_LANDLOCK), "
          "or a container's seccomp profile hides the system call";
      break;
    case EOPNOTSUPP:
      s.landlock_detail =
          "Landlock is built into the kernel but not enabled at boot: add 'landlock' to the lsm= kernel "
          "parameter";
      break;
    default:
      s.landlock_detail = "the Landlock version query failed: " + (err ? errno_text(err) : "it returned 0");
  }
}

// ---- seccomp -------------------------------------------------------------------------------

// The errno the probe filter makes getppid(2) fail with; getppid never fails on its own.
constexpr int seccomp_probe_errno = ENOTRECOVERABLE;

enum seccomp_step { seccomp_no_new_privs = 1, seccomp_load = 2, seccomp_effect = 3 };

void probe_seccomp(sandbox_support& s) {
  errno = 0;
  const int mode = ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
  if (mode < 0 && errno == EINVAL) {
    s.seccomp_detail = "the kernel is built without seccomp (CONFIG_SECCOMP)";
    return;
  }
  s.seccomp_inherited = mode == SECCOMP_MODE_FILTER;

  // The whole program is built before fork: the child only loads it.
  static const sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (seccomp_probe_errno & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  const sock_fprog prog{static_cast<unsigned short>(sizeof code / sizeof code[0]), const_cast<sock_filter*>(code)};
  const probe_outcome o = run_probe_child([&prog](int fd) {
    report(fd, seccomp_no_new_privs, 0);
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
      report(fd, seccomp_no_new_privs, errno);
      return 1;
    }
    report(fd, seccomp_load, 0);
    if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
      const int err = errno;
      // Kernels before 3.17 have only the prctl interface.
      if (err != ENOSYS || ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) {
        report(fd, seccomp_load, err == ENOSYS ? errno : err);
        return 1;
      }
    }
    report(fd, seccomp_effect, 0);
    errno = 0;
    if (::syscall(SYS_getppid) != -1 || errno != seccomp_probe_errno) {
      report(fd, seccomp_effect, EPROTO);
      return 1;
    }
    return 0;
  });
  if (o.ok) {
    s.seccomp = true;
    return;
  }
  if (o.err == 0) {
    s.seccomp_detail = (o.step == 0 ? std::string("the probe child could not start") : died_text(o));
    return;
  }
  switch (o.step) {
    case seccomp_no_new_privs:
      s.seccomp_detail = "prctl(PR_SET_NO_NEW_PRIVS) failed: " + errno_text(o.err);
      break;
    case seccomp_load:
      s.seccomp_detail = o.err == EINVAL
                             ? "the kernel refuses seccomp filters (built without CONFIG_SECCOMP_FILTER)"
                             : "loading a seccomp filter failed: " + errno_text(o.err);
      break;
    case seccomp_effect:
      s.seccomp_detail = "a loaded seccomp filter did not take effect";
      break;
    default:
      s.seccomp_detail = "the seccomp probe could not start: " + errno_text(o.err);
  }
}

// ---- user namespaces -----------------------------------------------------------------------

enum userns_step {
  userns_unshare = 1,
  userns_setgroups = 2,
  userns_uid_map = 3,
  userns_gid_map = 4,
  userns_private = 5,
  userns_tmpfs = 6,
  userns_file_mask = 7,
};

// Writes `text` to a /proc file in one write(2), as the kernel requires for id maps.
// Async-signal-safe. Returns 0 or an errno.
int write_proc(const char* path, const char* text, std::size_t len) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const ssize_t n = ::write(fd, text, len);
  const int err = n == static_cast<ssize_t>(len) ? 0 : (n < 0 ? errno : EIO);
  ::close(fd);
  return err;
}

void probe_user_namespaces(sandbox_support& s) {
  // Identity maps, formatted before fork.
  char uid_map[64];
  char gid_map[64];
  const int uid_len = std::snprintf(uid_map, sizeof uid_map, "%u %u 1\n", ::geteuid(), ::geteuid());
  const int gid_len = std::snprintf(gid_map, sizeof gid_map, "%u %u 1\n", ::getegid(), ::getegid());
  const probe_outcome o = run_probe_child([&](int fd) {
    const auto step = [fd](int n, int err) {
      report(fd, n, err);
      return err;
    };
    step(userns_unshare, 0);
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return step(userns_unshare, errno);
    step(userns_setgroups, 0);
    if (int err = write_proc("/proc/self/setgroups", "deny", 4)) return step(userns_setgroups, err);
    step(userns_uid_map, 0);
    if (int err = write_proc("/proc/self/uid_map", uid_map, static_cast<std::size_t>(uid_len)))
      return step(userns_uid_map, err);
    step(userns_gid_map, 0);
    if (int err = write_proc("/proc/self/gid_map", gid_map, static_cast<std::size_t>(gid_len)))
      return step(userns_gid_map, err);
    step(userns_private, 0);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return step(userns_private, errno);
    // The mask the launcher binds over a denied file, made by descriptor on a tmpfs that is
    // never attached to a path (sandbox/launch.cpp), here over /dev/null of this namespace.
    step(userns_file_mask, 0);
    {
      const int fs = ::fsopen("tmpfs", FSOPEN_CLOEXEC);
      if (fs < 0 || ::fsconfig(fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) return step(userns_file_mask, errno);
      const int scratch = ::fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
      if (scratch < 0) return step(userns_file_mask, errno);
      const int file = ::openat(scratch, "empty", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0);
      if (file < 0) return step(userns_file_mask, errno);
      mount_attr ro{};
      ro.attr_set = MOUNT_ATTR_RDONLY;
      const int tree = ::open_tree(scratch, "empty", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
      if (tree < 0 || ::mount_setattr(tree, "", AT_EMPTY_PATH, &ro, sizeof ro) != 0 ||
          ::move_mount(tree, "", AT_FDCWD, "/dev/null", MOVE_MOUNT_F_EMPTY_PATH) != 0)
        return step(userns_file_mask, errno);
    }
    // The mask the launcher puts over a denied folder, here over `/` of this throwaway
    // namespace: nobody else sees it, and it is gone when the child exits.
    step(userns_tmpfs, 0);
    if (::mount("tmpfs", "/", "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=000") != 0)
      return step(userns_tmpfs, errno);
    return 0;
  });
  if (o.ok) {
    s.user_namespaces = true;
    return;
  }
  if (o.err == 0) {
    s.user_namespaces_detail = o.step == 0 ? std::string("the probe child could not start") : died_text(o);
    return;
  }
  const std::string why = errno_text(o.err);
  switch (o.step) {
    case userns_unshare:
      if (o.err == EPERM)
        s.user_namespaces_detail = "unshare(CLONE_NEWUSER|CLONE_NEWNS) failed (" + why +
                                   "): unprivileged user namespaces are disabled (sysctl "
                                   "kernel.unprivileged_userns_clone=0), dhara runs in a chroot (where the "
                                   "kernel refuses them), or a container's seccomp profile refuses them";
      else if (o.err == ENOSPC)
        s.user_namespaces_detail = "unshare(CLONE_NEWUSER|CLONE_NEWNS) failed (" + why +
                                   "): sysctl user.max_user_namespaces is 0 or its limit is reached";
      else if (o.err == EINVAL)
        s.user_namespaces_detail = "unshare(CLONE_NEWUSER|CLONE_NEWNS) failed (" + why +
                                   "): the kernel is built without CONFIG_USER_NS";
      else
        s.user_namespaces_detail = "unshare(CLONE_NEWUSER|CLONE_NEWNS) failed: " + why;
      break;
    case userns_setgroups:
      s.user_namespaces_detail = "writing /proc/self/setgroups in the new namespace failed: " + why;
      break;
    case userns_uid_map:
    case userns_gid_map:
      s.user_namespaces_detail = std::string("writing /proc/self/") + (o.step == userns_uid_map ? "uid" : "gid") +
                                 "_map in the new namespace failed (" + why +
                                 "): an LSM may restrict unprivileged user namespaces (e.g. AppArmor's "
                                 "kernel.apparmor_restrict_unprivileged_userns=1)";
      break;
    case userns_private:
      s.user_namespaces_detail = "making / private in the new mount namespace failed: " + why;
      break;
    case userns_tmpfs:
      s.user_namespaces_detail = "mounting a tmpfs in the new mount namespace failed (" + why +
                                 "): an LSM may restrict mounts in user namespaces";
      break;
    case userns_file_mask:
      s.user_namespaces_detail = "masking a file with the new mount API (fsopen, fsmount, open_tree, mount_setattr, "
                                 "move_mount) failed (" + why + "): Linux 5.12 or later is needed, and no seccomp "
                                 "filter or LSM may refuse these calls";
      break;
    default:
      s.user_namespaces_detail = "the user namespace probe could not start: " + why;
  }
}

}  // namespace

int min_landlock_abi(landlock_feature f) {
  switch (f) {
    case landlock_feature::filesystem: return 1;
    case landlock_feature::refer: return 2;
    case landlock_feature::truncate: return 3;
    case landlock_feature::tcp: return 4;
    case landlock_feature::ioctl_dev: return 5;
    case landlock_feature::scoping: return 6;
  }
  return landlock_abi_for_full;
}

sandbox_support probe_sandbox_support() {
  sandbox_support s;
  probe_landlock(s);
  probe_seccomp(s);
  probe_user_namespaces(s);
  return s;
}

std::string launch_blocker(const sandbox_support& s, bool needs_masks) {
  if (s.landlock_abi < 1) return "no Landlock (" + s.landlock_detail + ")";
  if (!s.seccomp) return "no seccomp filters (" + s.seccomp_detail + ")";
  if (needs_masks && !s.user_namespaces)
    return "a denied path (or an extensions folder, kept read-only) lies inside an allowed one and user namespaces, "
           "which the kernel needs for that, are missing (" +
           s.user_namespaces_detail + ")";
  return {};
}

std::string_view to_string(sandbox_level level) {
  switch (level) {
    case sandbox_level::none: return "none";
    case sandbox_level::filesystem_only: return "filesystem-only";
    case sandbox_level::partial: return "partial";
    case sandbox_level::full: return "full";
  }
  return "none";
}

sandbox_level level_of(const sandbox_support& s) {
  const bool landlock = s.landlock_abi > 0;
  if (!s.seccomp) return landlock ? sandbox_level::filesystem_only : sandbox_level::none;
  if (s.landlock_abi >= landlock_abi_for_full && s.user_namespaces) return sandbox_level::full;
  return sandbox_level::partial;
}

std::vector<sandbox_loss> losses_of(const sandbox_support& s) {
  std::vector<sandbox_loss> out;
  if (s.landlock_abi <= 0) {
    out.push_back({"no Landlock",
                   "file access of extensions is checked only by the broker: an extension that calls open() "
                   "itself can read and write whatever the user can"});
  }
  if (!s.seccomp) {
    out.push_back({"no seccomp",
                   "sockets and process spawning are not confined: an extension can open any socket (UDP, raw, "
                   "netlink), fork and exec without network or process:spawn, and call ptrace, bpf, io_uring "
                   "or mount"});
  }
  if (!s.user_namespaces) {
    out.push_back({"no user namespaces",
                   "a denied path inside an allowed folder (a .env in the project) cannot be masked, so only the "
                   "broker keeps an extension from opening it itself; and changing a file's mode, owner, times "
                   "or extended attributes is refused everywhere, in the extension's own folders too, and so is "
                   "System V IPC"});
  }
  if (s.landlock_abi > 0) {
    struct feature_loss {
      landlock_feature feature;
      const char* name;
      const char* loses;
    };
    static const feature_loss features[] = {
        {landlock_feature::scoping, "no signal and abstract-socket scoping",
         "an extension can signal other processes of the user and connect to abstract unix sockets (D-Bus, "
         "X11)"},
        {landlock_feature::truncate, "no truncate control",
         "an extension can truncate any file the user can write, even outside its allowed paths"},
        {landlock_feature::tcp, "no TCP rules",
         "TCP bind and connect are confined by seccomp alone (socket families, not ports)"},
        {landlock_feature::ioctl_dev, "no device ioctl control",
         "an extension can issue ioctls on the device files it may open"},
        {landlock_feature::refer, "no cross-folder rename",
         "renaming or linking files between folders is always refused inside the sandbox (a limit, not a "
         "hole)"},
    };
    for (const feature_loss& f : features) {
      const int needed = min_landlock_abi(f.feature);
      if (s.landlock_abi >= needed) continue;
      out.push_back({"Landlock ABI " + std::to_string(s.landlock_abi) + " < " + std::to_string(needed) + ": " + f.name,
                     f.loses});
    }
  }
  return out;
}

}  // namespace dhara::io
