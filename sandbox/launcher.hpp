// What a process that starts sandboxed commands needs besides the pure profile
// (policy/sandbox_profile.hpp): where `dhara-launch` is, the ELF loader an interpreter needs
// to execute, a private folder, and the profile handed over as a file or a sealed memfd.
#pragma once

#include <string>
#include <vector>

#include "policy/result.hpp"
#include "policy/sandbox_profile.hpp"

namespace dhara::sandbox {

/// `<folder of /proc/self/exe>/dhara-launch` ("" when /proc/self/exe cannot be read).
std::string launcher_path();

/// The resolved ELF loader (PT_INTERP) of an executable, e.g.
/// `/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2`; "" for a static or non-ELF file.
std::string elf_interpreter(const std::string& executable);

/// A new private folder (mode 0700) `<$TMPDIR or /tmp>/<prefix>XXXXXX`, resolved.
policy::result<std::string> make_private_dir(const std::string& prefix);

/// Removes a folder made by make_private_dir and everything in it (errors ignored).
void remove_private_dir(const std::string& dir);

/// Writes the profile to `<dir>/profile.json` (mode 0400) and returns that path: the
/// launcher's `--profile FILE`. `dir` should not be granted to the extension.
policy::result<std::string> write_profile_file(const policy::sandbox_profile& profile, const std::string& dir);

/// The profile in a sealed memfd (close-on-exec; dup2 it in the child and pass
/// `--profile-fd N`). Returns the fd.
policy::result<int> profile_memfd(const policy::sandbox_profile& profile);

}  // namespace dhara::sandbox
