// Paths exactly as the broker's tool gate checked them (DESIGN §4 "Path rules"), and file
// operations that refuse symbolic links, so the file opened is the file that was checked.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "policy/result.hpp"

namespace dhara::stdext {

/// A tool input path after the gate's resolution.
struct checked_path {
  std::string shown;  ///< as the caller wrote it, for messages
  std::string real;   ///< absolute, normalized, every symlink resolved: what the gate allowed
};

/// Resolves `raw` as policy::check_path does: a leading `~` with $HOME, relative paths against
/// `cwd` (the call's context.cwd), `.`/`..` applied lexically, then every symlink resolved by
/// io::real_path_resolver. Empty, NUL, relative without an absolute `cwd`, or unresolvable is
/// an error sentence.
policy::result<checked_path> resolve_input_path(std::string_view raw, std::string_view cwd);

/// openat() that refuses a symlink in any component of `path` (openat2 RESOLVE_NO_SYMLINKS;
/// O_NOFOLLOW on kernels without openat2). Used on resolved paths, which hold no symlink, so
/// one swapped in after the check fails with ELOOP instead of redirecting the open. O_CLOEXEC
/// is added. Returns the fd, or -1 with errno.
int open_no_links(int dirfd, const char* path, int flags, mode_t mode = 0);

/// One sentence for a failed operation on `shown`, from errno `err`.
std::string errno_sentence(std::string_view shown, int err);

/// The contents of the regular file at `p`: a directory, a device or a file over `max_bytes`
/// is an error sentence.
policy::result<std::string> read_regular_file(const checked_path& p, std::size_t max_bytes);

/// Opens the regular file at `p` for reading (O_NONBLOCK, so a FIFO cannot hang the open).
/// A directory or any other non-regular file is an error sentence.
policy::result<int> open_regular_file(const checked_path& p);

/// True when `head` (the first bytes of a file) holds a NUL byte: treated as binary.
bool looks_binary(std::string_view head);

/// Replaces the file at `p` with `content` atomically: a temporary file in the same folder,
/// fsync, rename over the target, fsync of the folder. An existing file keeps its mode; a new
/// one gets 0666 minus the umask. Missing parent folders are created when `make_parents`.
/// Returns true when the file is new.
policy::result<bool> replace_file(const checked_path& p, std::string_view content, bool make_parents);

}  // namespace dhara::stdext
