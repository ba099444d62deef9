// config.json on disk: the session's read, and a transaction that locks, re-reads, edits,
// validates with the session's parser and replaces the file by rename, or changes nothing.
// The lock/temp/rename steps follow io/permissions_file.cpp (see the reasons there).
#include "io/settings_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <exception>
#include <optional>
#include <string_view>
#include <utility>

#include "io/files.hpp"
#include "policy/json_text.hpp"
#include "policy/text.hpp"

namespace dhara::io {
namespace {

using policy::errc;
using policy::make_error;
using ordered_json = nlohmann::ordered_json;
using outcome = settings_update::outcome;

// What every refusal of the file itself ends with: the user must act, and knows dhara did
// not touch the file.
constexpr std::string_view hands_off = "; fix it by hand (dhara never rewrites a file it could not parse)";
constexpr std::string_view unchanged_note = "; nothing was changed";

std::string errno_text(int err) { return std::strerror(err); }

settings_update refuse(std::string message) { return {outcome::refused, std::move(message), {}}; }
settings_update fail(std::string message) { return {outcome::failed, std::move(message), {}}; }

bool all_space(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

// Closes a descriptor on every path out of a function.
class unique_fd {
 public:
  explicit unique_fd(int fd = -1) : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  /// Closes now and reports close()'s error (a deferred write error on some filesystems).
  int close_checked() {
    int rc = ::close(std::exchange(fd_, -1));
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

std::string_view kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

// The bytes of the file to be edited and its mode, or no bytes when it does not exist.
struct current_file {
  std::optional<std::string> bytes;
  mode_t mode = 0;
};

// O_NOFOLLOW: the rename would replace a symlink rather than write through it, silently
// cutting a link into someone's dotfiles; refusing says so instead. O_NONBLOCK keeps open()
// from hanging on a FIFO.
std::optional<settings_update> read_current(const std::string& path, current_file& out) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) {
    int err = errno;
    if (err == ENOENT) return std::nullopt;
    struct stat st;
    if (err == ELOOP && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      char target[4096];
      ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
      std::string to = n > 0 ? " (to " + policy::printable_excerpt(std::string_view(target, static_cast<std::size_t>(n))) + ")"
                             : std::string();
      return refuse(path + " is a symbolic link" + to +
                    "; dhara does not write through links: edit the file it points to by hand, or replace the "
                    "link with that file" + std::string(unchanged_note));
    }
    return refuse("cannot read " + path + ": " + errno_text(err) + "; check its permissions" + std::string(unchanged_note));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return fail("cannot read " + path + ": " + errno_text(errno) + std::string(unchanged_note));
  if (!S_ISREG(st.st_mode))
    return refuse(path + " is " + std::string(kind_of(st.st_mode)) + ", not a file; move it away" + std::string(unchanged_note));
  if (static_cast<std::size_t>(st.st_size) > max_state_file_bytes)
    return refuse(path + " is larger than " + std::to_string(max_state_file_bytes) +
                  " bytes, so it cannot be a dhara config file; move it away" + std::string(unchanged_note));
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (true) {
    if (done == text.size()) text.resize(text.size() + 4096);
    ssize_t n = ::read(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("cannot read " + path + ": " + errno_text(errno) + std::string(unchanged_note));
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
    if (done > max_state_file_bytes)
      return refuse(path + " grew past " + std::to_string(max_state_file_bytes) + " bytes while being read" +
                    std::string(unchanged_note));
  }
  text.resize(done);
  out.bytes = std::move(text);
  out.mode = st.st_mode & 07777;
  return std::nullopt;
}

// The document of a file's text, by the session's JSON parser (same syntax errors, same
// depth limit), then again with key order kept so an edit reorders nothing.
policy::result<ordered_json> parse_document(const std::string& text, const std::string& path) {
  if (all_space(text)) return ordered_json::object();
  auto checked = policy::parse_json_text(text, path);
  if (!checked) return checked.err();
  if (!checked->is_object())
    return make_error(errc::invalid_type, path + ": the top level must be a JSON object, found " +
                                              std::string(policy::json_type_name(*checked)));
  try {
    return ordered_json::parse(text, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const std::exception& e) {  // the checked parse accepted it: only allocation failure
    return make_error(errc::parse_error, path + ": cannot parse: " + policy::printable_excerpt(e.what()));
  }
}

// mkdir -p; every folder created gets `mode`. Existing folders keep theirs.
std::optional<settings_update> make_folders(const std::string& dir, mode_t mode) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return std::nullopt;
    return refuse(dir + " is not a directory; move it away so dhara can keep its config there" + std::string(unchanged_note));
  }
  for (std::size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST)
      return fail("cannot create " + prefix + ": " + errno_text(errno) + "; create " + dir +
                  " yourself" + std::string(unchanged_note));
  }
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return refuse(dir + " is not a directory; move it away so dhara can keep its config there" + std::string(unchanged_note));
  return std::nullopt;
}

// A separate lock file that is never replaced (locking config.json itself would race the
// rename, which swaps the inode). Bounded wait: flock has no timeout, so poll LOCK_NB.
std::optional<settings_update> take_lock(const std::string& lock_path, std::chrono::milliseconds wait, unique_fd& out) {
  unique_fd fd(::open(lock_path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK, 0600));
  if (fd.get() < 0) {
    int err = errno;
    if (err == ELOOP) return refuse(lock_path + " is a symbolic link; remove it (dhara recreates the lock file)");
    return fail("cannot open the lock file " + lock_path + ": " + errno_text(err) +
                "; check the permissions of its folder" + std::string(unchanged_note));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return refuse(lock_path + " is not a regular file; remove it (dhara recreates the lock file)");
  const auto deadline = std::chrono::steady_clock::now() + wait;
  auto pause = std::chrono::microseconds(200);
  constexpr auto max_pause = std::chrono::microseconds(20'000);
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if (err == EINTR) continue;
    if (err != EWOULDBLOCK) return fail("cannot lock " + lock_path + ": " + errno_text(err) + std::string(unchanged_note));
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      return fail("another dhara is holding the settings lock (" + lock_path + ") for more than " +
                  std::to_string(wait.count()) + " ms; retry, or stop the dhara process that holds it" +
                  std::string(unchanged_note));
    auto nap = std::min(pause, std::chrono::duration_cast<std::chrono::microseconds>(deadline - now));
    struct timespec ts{static_cast<time_t>(nap.count() / 1'000'000), static_cast<long>(nap.count() % 1'000'000) * 1000};
    ::nanosleep(&ts, nullptr);
    pause = std::min(pause * 2, max_pause);
  }
  out = std::move(fd);
  return std::nullopt;
}

// Temp file beside `path` (its name starts with "config.json", which the built-in denied
// path "config.json*" covers), written, fsynced, renamed over `path`; then the folder is
// fsynced so the rename survives a crash.
std::optional<settings_update> replace_file(const std::string& path, const std::string& dir, const std::string& text,
                                            mode_t mode) {
  struct temp_file {
    std::string name;
    bool renamed = false;
    ~temp_file() {
      if (!renamed) ::unlink(name.c_str());
    }
  };
  std::string tmpl = path + ".tmp-XXXXXX";
  unique_fd fd(::mkostemp(tmpl.data(), O_CLOEXEC));
  if (fd.get() < 0)
    return fail("cannot create a temporary file in " + dir + ": " + errno_text(errno) + std::string(unchanged_note));
  temp_file tmp{std::move(tmpl)};
  auto failed = [&](std::string_view what, int err) {
    return fail("cannot write " + path + ": " + std::string(what) + ": " + errno_text(err) + std::string(unchanged_note));
  };
  if (::fchmod(fd.get(), mode) != 0) return failed("chmod of the temporary file", errno);
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return failed("writing the temporary file", errno);
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return failed("syncing the temporary file", errno);
  if (int err = fd.close_checked(); err != 0) return failed("closing the temporary file", err);
  if (::rename(tmp.name.c_str(), path.c_str()) != 0) return failed("renaming the temporary file", errno);
  tmp.renamed = true;
  unique_fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() >= 0) ::fsync(dir_fd.get());
  return std::nullopt;
}

std::string folder_of(const std::string& path) {
  auto cut = path.rfind('/');
  if (cut == std::string::npos) return ".";
  if (cut == 0) return "/";
  return path.substr(0, cut);
}

settings_update update_locked(const std::string& path, policy::layer_kind kind, const settings_edit& edit,
                              std::chrono::milliseconds lock_wait) {
  if (path.empty() || path.front() != '/') return refuse("the settings file path '" + path + "' is not absolute");
  const bool global = kind != policy::layer_kind::project;
  const std::string dir = folder_of(path);
  if (auto r = make_folders(dir, global ? 0700 : 0755)) return *r;
  unique_fd lock;
  if (auto r = take_lock(path + ".lock", lock_wait, lock)) return *r;

  // Under the lock: what another process wrote a moment ago is what we edit.
  current_file cur;
  if (auto r = read_current(path, cur)) return *r;
  ordered_json doc = ordered_json::object();
  if (cur.bytes) {
    auto parsed = parse_document(*cur.bytes, path);
    if (!parsed) return refuse(parsed.err().message + std::string(hands_off) + std::string(unchanged_note));
    doc = std::move(*parsed);
  }

  policy::result<bool> changed = false;
  try {
    changed = edit(doc);
  } catch (const std::exception& e) {
    return fail("editing " + path + " failed: " + policy::printable_excerpt(e.what()) + std::string(unchanged_note));
  }
  if (!changed) return refuse(changed.err().message);

  std::string text;
  try {
    text = doc.dump(2) + "\n";
  } catch (const nlohmann::json::exception&) {  // a string that is not UTF-8
    return refuse(path + ": a value is not valid UTF-8 text" + std::string(unchanged_note));
  }
  // The session's parser is the judge: what does not load is never written.
  auto loaded = policy::parse_settings(text, path, kind);
  if (!loaded) return refuse(loaded.err().message + std::string(unchanged_note));

  settings_update out{outcome::unchanged, {}, {}};
  out.after.exists = cur.bytes.has_value();
  out.after.doc = std::move(doc);
  out.after.parsed = std::move(*loaded);
  if (!*changed || (cur.bytes && *cur.bytes == text)) return out;
  if (auto r = replace_file(path, dir, text, cur.bytes ? cur.mode : (global ? 0600 : 0644))) return *r;
  out.what = outcome::written;
  out.after.exists = true;
  return out;  // `lock` closes here, after the rename: the next writer reads our file
}

}  // namespace

std::string global_settings_path(const std::string& dhara_home) { return dhara_home + "/config.json"; }

std::string project_settings_path(const std::string& project_root) {
  return (project_root == "/" ? std::string() : project_root) + "/.dhara/config.json";
}

policy::result<settings_file> read_settings_file(const std::string& path, policy::layer_kind kind) {
  try {
    settings_file out;
    auto text = read_text_file(path);
    if (!text) {
      if (text.err().code == errc::not_found) return out;
      return text.err();
    }
    out.exists = true;
    auto parsed = policy::parse_settings(*text, path, kind);
    if (!parsed) return parsed.err();
    out.parsed = std::move(*parsed);
    auto doc = parse_document(*text, path);
    if (!doc) return doc.err();
    out.doc = std::move(*doc);
    return out;
  } catch (const std::exception& e) {  // allocation failure
    return make_error(errc::invalid_value, "cannot read " + path + ": " + policy::printable_excerpt(e.what()));
  }
}

settings_update update_settings_file(const std::string& path, policy::layer_kind kind, const settings_edit& edit,
                                     std::chrono::milliseconds lock_wait) {
  try {
    return update_locked(path, kind, edit, lock_wait);
  } catch (const std::exception& e) {  // allocation failure; the temp file is gone already
    return fail("cannot update " + path + ": " + policy::printable_excerpt(e.what()) + std::string(unchanged_note));
  }
}

}  // namespace dhara::io
