// config.json on disk: the session's read, and a transaction that locks, re-reads, edits,
// validates with the session's parser and replaces the file by rename, or changes nothing.
// The folder, lock and temp/rename steps are io/atomic_file.hpp's (see the reasons there).
#include "io/settings_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <optional>
#include <string_view>
#include <utility>

#include "io/atomic_file.hpp"
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

settings_update refuse(std::string message) { return {outcome::refused, std::move(message), {}}; }
settings_update fail(std::string message) { return {outcome::failed, std::move(message), {}}; }

bool all_space(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
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
    return refuse(path + " is " + std::string(file_kind(st.st_mode)) + ", not a file; move it away" + std::string(unchanged_note));
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
  auto checked = policy::parse_json_document(text, path);
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

// A failed folder, lock or replace step (io/atomic_file.hpp) in this store's words.
settings_update step_failed(const file_failure& f) {
  switch (f.step) {
    case file_step::folder_in_the_way: return refuse(f.message + std::string(unchanged_note));
    case file_step::lock_in_the_way: return refuse(f.message);
    case file_step::create_folder:
    case file_step::lock:
    case file_step::replace: return fail(f.message + std::string(unchanged_note));
  }
  return fail(f.message + std::string(unchanged_note));
}

settings_update update_locked(const std::string& path, policy::layer_kind kind, const settings_edit& edit,
                              std::chrono::milliseconds lock_wait) {
  if (path.empty() || path.front() != '/') return refuse("the settings file path '" + path + "' is not absolute");
  const bool global = kind != policy::layer_kind::project;
  const std::string dir = folder_of(path);
  if (auto f = make_folders(dir, global ? 0700 : 0755, "config")) return step_failed(*f);
  unique_fd lock;
  if (auto f = take_lock(path + ".lock", lock_wait, "settings", lock)) return step_failed(*f);

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
  // The temp name starts with "config.json", which the built-in denied path "config.json*" covers.
  if (auto f = replace_file(path, dir, text, cur.bytes ? cur.mode : (global ? 0600 : 0644))) return step_failed(*f);
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
