// $DHARA_HOME/permissions.json on disk (DESIGN §3.2): strict reading that refuses what it
// cannot trust, and a locked read-modify-write that replaces the file atomically or not at all.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "policy/permissions.hpp"
#include "policy/result.hpp"

namespace dhara::io {

/// How long update_permissions waits for another dhara to release the permissions lock.
inline constexpr std::chrono::milliseconds permissions_lock_wait{10'000};

/// `dhara_home` + "/permissions.json".
std::string permissions_path(const std::string& dhara_home);

/// Reads the permissions file without taking the lock: writers replace the file by rename,
/// so a reader sees the old or the new file whole, never a torn one. A missing file (or a
/// missing folder) and an empty file are `{}`. A symlink at `path` is refused (dhara's own
/// state must not be redirected; symlinked parent folders are followed), as are a directory,
/// a FIFO or other non-regular file, an unreadable or oversized file and malformed content:
/// each is an error naming `path` and what to do. Parse warnings name `path` too.
policy::result<policy::parsed_permissions> read_permissions(const std::string& path);

/// What a transaction does to the permissions it is given: true when it changed something,
/// false for a no-op (nothing is written), or an error that aborts (nothing is written).
using permissions_change = std::function<policy::result<bool>(policy::permissions&)>;

/// The read-modify-write transaction behind `config permissions approve/revoke/reset`,
/// install and the approval prompt. Creates the file's folder (0700) if missing, takes an
/// exclusive lock on `path` + ".lock" (waiting up to `lock_wait`, then an error saying
/// another dhara holds it), reads the file as read_permissions does (any error: nothing is
/// written), calls `change` exactly once (an exception it throws becomes an error), and
/// when it reports a change whose bytes differ from the file, writes a temp file in the same
/// folder (0600), fsyncs it, renames it over `path` and fsyncs the folder. No temp file is
/// left behind on failure. Returns the permissions as written, or as read on a no-op.
/// `change` runs under the lock: it must not wait for the user (ask first, then update).
policy::result<policy::permissions> update_permissions(const std::string& path,
                                                       const permissions_change& change,
                                                       std::chrono::milliseconds lock_wait = permissions_lock_wait);

}  // namespace dhara::io
