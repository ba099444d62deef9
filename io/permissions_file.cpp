// permissions.json on disk: reads that refuse links and non-files, and a transaction that
// locks, re-reads, changes and replaces the file by rename so no update is lost or torn.
#include "io/permissions_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <optional>
#include <string_view>
#include <utility>

#include "io/atomic_file.hpp"
#include "io/files.hpp"
#include "policy/json_text.hpp"

namespace dhara::io {
namespace {

using policy::errc;
using policy::make_error;

// What every refusal ends with: the user must act, and knows dhara did not touch the file.
constexpr std::string_view advice = "; fix or move it (dhara does not change a file it cannot read)";

// The parser names its source "permissions.json"; messages should name the real path.
constexpr std::string_view parser_source = "permissions.json";

policy::error refused(const std::string& path, std::string_view what) {
  return make_error(errc::invalid_value, path + " " + std::string(what) + std::string(advice));
}

std::string with_path(const std::string& message, const std::string& path) {
  if (message.compare(0, parser_source.size(), parser_source) == 0)
    return path + message.substr(parser_source.size());
  return path + ": " + message;
}

// The file's bytes, or nullopt when it does not exist. O_NOFOLLOW refuses a symlink as the
// last component: a link would let whoever placed it point dhara's approvals at another file
// (and the rename in update_permissions would replace the link, not its target, anyway).
// O_NONBLOCK keeps open() from hanging on a FIFO; it does not affect reading a regular file.
policy::result<std::optional<std::string>> read_bytes(const std::string& path) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) {
    int err = errno;
    if (err == ENOENT) return std::optional<std::string>{};
    if (err == ELOOP) {
      struct stat st;
      if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
        return make_error(errc::invalid_value,
                          path + " is a symbolic link, and dhara does not follow links for its own state; "
                                 "replace the link with the file it points to, or move it (dhara changed nothing)");
      return refused(path, "cannot be opened: its path has too many symbolic links");
    }
    return refused(path, "cannot be read: " + errno_text(err));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return refused(path, "cannot be read: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) return refused(path, "is " + std::string(file_kind(st.st_mode)) + ", not a file");
  if (static_cast<std::size_t>(st.st_size) > max_state_file_bytes)
    return refused(path, "is larger than " + std::to_string(max_state_file_bytes) + " bytes");

  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (true) {
    if (done == out.size()) out.resize(out.size() + 4096);  // someone may be appending to it
    ssize_t n = ::read(fd.get(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return refused(path, "cannot be read: " + errno_text(errno));
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
    if (done > max_state_file_bytes)
      return refused(path, "grew past " + std::to_string(max_state_file_bytes) + " bytes while being read");
  }
  out.resize(done);
  return std::optional<std::string>(std::move(out));
}

policy::result<policy::parsed_permissions> parse_bytes(const std::optional<std::string>& bytes,
                                                       const std::string& path) {
  if (!bytes) return policy::parsed_permissions{};  // no file yet: nothing recorded
  auto parsed = policy::parse_permissions(*bytes);
  if (!parsed) {
    std::string message = with_path(parsed.err().message, path);
    // A syntax error already says to fix the file by hand and that dhara will not overwrite it.
    if (parsed.err().code != errc::parse_error) message += advice;
    return make_error(parsed.err().code, std::move(message));
  }
  for (auto& w : parsed->warnings) w = with_path(w, path);
  return parsed;
}

// A failed folder, lock or replace step (io/atomic_file.hpp) in this store's words.
policy::error step_failed(const file_failure& f) {
  switch (f.step) {
    case file_step::create_folder: return make_error(errc::invalid_value, f.message + " or set DHARA_HOME");
    case file_step::replace: return make_error(errc::invalid_value, f.message + "; nothing was changed");
    case file_step::folder_in_the_way:
    case file_step::lock_in_the_way:
    case file_step::lock: return make_error(errc::invalid_value, f.message);
  }
  return make_error(errc::invalid_value, f.message);
}

policy::result<policy::permissions> update_locked(const std::string& path, const permissions_change& change,
                                                  std::chrono::milliseconds lock_wait) {
  if (path.empty()) return make_error(errc::invalid_path, "the permissions file path is empty");
  const std::string dir = folder_of(path);
  // 0700 for every folder created: DHARA_HOME holds approvals and the audit trail, which are
  // nobody else's business.
  if (auto f = make_folders(dir, 0700, "state")) return step_failed(*f);
  unique_fd lock;
  if (auto f = take_lock(path + ".lock", lock_wait, "permissions", lock)) return step_failed(*f);

  // Read under the lock: what another process wrote a moment ago is what we change.
  auto bytes = read_bytes(path);
  if (!bytes) return bytes.err();
  auto parsed = parse_bytes(*bytes, path);
  if (!parsed) return parsed.err();

  // `change` works on a copy so that a no-op (or an error) returns the file as read, even if
  // the callback touched its argument before deciding.
  policy::permissions working = parsed->value;
  policy::result<bool> changed = false;
  try {
    changed = change(working);
  } catch (const std::exception& e) {
    return make_error(errc::invalid_value, "updating " + path + " failed: " + policy::printable_excerpt(e.what()) +
                                               "; nothing was changed");
  } catch (...) {
    return make_error(errc::invalid_value, "updating " + path + " failed; nothing was changed");
  }
  if (!changed) return changed.err();
  if (!*changed) return std::move(parsed->value);

  std::string text = policy::serialize_permissions(working);
  // Same bytes: skip the rename, which would only wake every session's file watch.
  if (*bytes && **bytes == text) return working;
  // 0600: approvals are the user's alone. The temp name starts with "permissions.json", so
  // the built-in denied path "permissions.json*" covers it too.
  if (auto f = replace_file(path, dir, text, 0600)) return step_failed(*f);
  return working;  // `lock` closes here, after the rename: the next writer reads our file
}

}  // namespace

std::string permissions_path(const std::string& dhara_home) { return dhara_home + "/permissions.json"; }

policy::result<policy::parsed_permissions> read_permissions(const std::string& path) {
  try {
    if (path.empty()) return make_error(errc::invalid_path, "the permissions file path is empty");
    auto bytes = read_bytes(path);
    if (!bytes) return bytes.err();
    return parse_bytes(*bytes, path);
  } catch (const std::exception& e) {  // allocation failure
    return make_error(errc::invalid_value, "cannot read " + path + ": " + policy::printable_excerpt(e.what()));
  }
}

policy::result<policy::permissions> update_permissions(const std::string& path, const permissions_change& change,
                                                       std::chrono::milliseconds lock_wait) {
  try {
    return update_locked(path, change, lock_wait);
  } catch (const std::exception& e) {  // allocation failure; the temp file is gone already
    return make_error(errc::invalid_value, "cannot update " + path + ": " + policy::printable_excerpt(e.what()) +
                                               "; nothing was changed");
  }
}

}  // namespace dhara::io
