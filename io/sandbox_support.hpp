// What the running kernel offers for the OS sandbox (Landlock, seccomp, user namespaces),
// probed for real, and what the sandbox loses without each piece. `dhara doctor` prints it;
// the OS sandbox launcher decides from it which restrictions it can enforce.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dhara::io {

/// Landlock features by the ABI version that brought them (SANDBOX.md, step 4). The launcher
/// handles a right only when `landlock_abi >= min_landlock_abi(feature)`.
enum class landlock_feature {
  filesystem,  ///< ABI 1: read, write, execute, make, remove under granted paths
  refer,       ///< ABI 2: rename and link across folders (always refused below)
  truncate,    ///< ABI 3: truncate(2) and O_TRUNC checked as a write
  tcp,         ///< ABI 4: TCP bind and connect
  ioctl_dev,   ///< ABI 5: ioctl on device files
  scoping,     ///< ABI 6: abstract unix sockets and signals scoped to the sandbox
};

/// The Landlock ABI version that brought `f`.
int min_landlock_abi(landlock_feature f);

/// The Landlock ABI the sandbox needs for `sandbox_level::full` (every feature above).
inline constexpr int landlock_abi_for_full = 6;

/// What the kernel lets this process do, as probed by probe_sandbox_support().
struct sandbox_support {
  /// Landlock ABI version (`landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`);
  /// 0 when Landlock is unavailable.
  int landlock_abi = 0;
  /// Why Landlock is unavailable, one sentence ("" when landlock_abi > 0).
  std::string landlock_detail;

  /// A seccomp filter can be installed and filters: a probe child set no_new_privs, loaded a
  /// filter failing getppid(2) with an errno, and saw that errno.
  bool seccomp = false;
  /// Why seccomp filtering is unavailable ("" when it works).
  std::string seccomp_detail;
  /// This process already runs under a seccomp filter (a container, a parent sandbox): the
  /// launcher's filter stacks on top of it, and the outer one may refuse what it allows.
  bool seccomp_inherited = false;

  /// A probe child could unshare a user and a mount namespace, map its own uid and gid,
  /// make `/` private and mount a read-only mode-000 tmpfs: everything the launcher needs to
  /// mask denied paths inside allowed ones (SANDBOX.md, step 2). Probed as the current user,
  /// so a root dhara may succeed where unprivileged user namespaces are disabled.
  bool user_namespaces = false;
  /// The failing step and its errno ("" when every step worked).
  std::string user_namespaces_detail;
};

/// Probes the kernel: the Landlock version query in this process, seccomp and user
/// namespaces each in a throwaway forked child, so nothing changes in the caller. The
/// children run raw syscalls only (no allocation, no locks), so this is safe to call from a
/// multi-threaded process; it waits for its own children by pid and leaves others alone.
/// Costs two fork()s, about a millisecond. Never throws.
sandbox_support probe_sandbox_support();

/// How much of the OS sandbox this kernel can enforce.
enum class sandbox_level {
  none,             ///< neither Landlock nor seccomp: the broker's checks are all there is
  filesystem_only,  ///< Landlock without seccomp: files confined, sockets and spawning not
  partial,          ///< seccomp with Landlock missing or older than landlock_abi_for_full,
                    ///< or without user namespaces
  full,             ///< Landlock >= landlock_abi_for_full, seccomp and user namespaces
};

/// "none", "filesystem-only", "partial", "full".
std::string_view to_string(sandbox_level level);

/// The level `s` allows.
sandbox_level level_of(const sandbox_support& s);

/// One piece the kernel lacks and what the sandbox loses without it.
struct sandbox_loss {
  std::string missing;  ///< "no Landlock", "Landlock ABI 5 < 6: no scoping", "no user namespaces"
  std::string loses;    ///< what extensions can then do that the full sandbox stops, one sentence
};

/// Every missing piece of `s`, most serious first (empty at sandbox_level::full).
std::vector<sandbox_loss> losses_of(const sandbox_support& s);

/// What keeps `dhara-launch` from applying a profile on this kernel, in words with the
/// probe's detail ("no Landlock (…)"), or "" when nothing does. It needs Landlock and seccomp,
/// and user namespaces when the profile masks a denied path (`needs_masks`).
std::string launch_blocker(const sandbox_support& s, bool needs_masks);

}  // namespace dhara::io
