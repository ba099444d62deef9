// What a process that starts sandboxed commands needs besides the pure profile
// (policy/sandbox_profile.hpp): where `dhara-launch` is, the ELF loader an interpreter needs
// to execute, a private folder, and the profile handed over as a file or a sealed memfd.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "policy/result.hpp"
#include "policy/sandbox_profile.hpp"

namespace dhara::sandbox {

/// `<folder of /proc/self/exe>/dhara-launch` ("" when /proc/self/exe cannot be read).
std::string launcher_path();

/// The resolved ELF loader (PT_INTERP) of an executable, e.g.
/// `/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2`; "" for a static or non-ELF file, and
/// for a loader that is relative or not a regular file (nothing is granted for it).
std::string elf_interpreter(const std::string& executable);

/// policy::sandbox_inputs_for on this machine: with `program`'s ELF loader, and the
/// extension's folder at its real path (`~/.dhara/extensions/x` may be a link): the launcher
/// follows no link on a grant that is not a system path. A folder that cannot be resolved is
/// given as it is (the launcher then grants it only if it is there without a link).
policy::sandbox_inputs sandbox_inputs_here(const policy::policy_snapshot& snapshot,
                                           const policy::extension_policy& ext, const std::string& program,
                                           std::string temp_dir);

/// The symbolic links met while resolving `path` as the kernel would, each named where it
/// really is (its folder resolved, then its name): `/home/u/.dhara` for `/homelink/.dhara/x`
/// when `/homelink` → `/home/u` and `/home/u/.dhara` is a link. At most 40.
std::vector<std::string> links_on_the_way(const std::string& path);

/// A symbolic link met on the way to a path that must lead where it led when the session began.
struct guarded_link {
  std::string link;     ///< where the link really is (links_on_the_way)
  std::string guarded;  ///< the path it was met on the way to
};

/// The links met on the way to every path the snapshot denies (its forms as written
/// included), every glob denial's folder and every extension's folder: once a session.
std::vector<guarded_link> links_to_guard(const policy::policy_snapshot& snapshot);

/// "" or why an extension with `profile` must not start: one of `links` lies in a folder the
/// profile lets it write, and this user may write that folder: the extension could replace
/// the link, and the next session would follow its choice (`~/.dhara` a link into a dotfiles
/// folder, the home writable: its own config). Links inside read-only paths and masks of the
/// profile cannot be replaced.
std::string replaceable_link(const policy::sandbox_profile& profile, const std::vector<guarded_link>& links);

/// A private folder (make_private_dir), held by this process until the object goes: a lock on
/// the folder says it is in use, and the destructor removes it with everything in it. A folder
/// of a process that died without removing it (killed) holds no lock, and the next
/// make_private_dir with its prefix removes it. Move-only.
class private_dir {
 public:
  /// `fd`: the folder, opened; locked unless its file system has no flock.
  private_dir(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  private_dir(private_dir&& other) noexcept;
  private_dir& operator=(private_dir&& other) noexcept;
  private_dir(const private_dir&) = delete;
  private_dir& operator=(const private_dir&) = delete;
  ~private_dir() { remove(); }

  const std::string& path() const { return path_; }

 private:
  void remove() noexcept;

  std::string path_;
  int fd_ = -1;  // the folder, locked (flock) while held; -1: moved from
};

/// A new private folder (mode 0700) `<$TMPDIR or /tmp>/<prefix>XXXXXX`, resolved, locked and
/// marked as dhara's. The first call of a process for a prefix first removes that prefix's
/// abandoned folders (remove_abandoned_private_dirs).
policy::result<private_dir> make_private_dir(const std::string& prefix);

/// Removes the folders `<base>/<prefix>XXXXXX` that make_private_dir made for a process that
/// ended without removing them: this user's, marked as dhara's, and locked by nobody. Folders
/// in use, unmarked (not dhara's, or made by a dhara before the mark) or another user's are
/// left alone. Returns how many were removed.
std::size_t remove_abandoned_private_dirs(const std::string& base, const std::string& prefix);

/// Writes the profile to `<dir>/profile.json` (mode 0400) and returns that path: the
/// launcher's `--profile FILE`. `dir` should not be granted to the extension.
policy::result<std::string> write_profile_file(const policy::sandbox_profile& profile, const std::string& dir);

/// The profile in a sealed memfd (close-on-exec; dup2 it in the child and pass
/// `--profile-fd N`). Returns the fd.
policy::result<int> profile_memfd(const policy::sandbox_profile& profile);

}  // namespace dhara::sandbox
