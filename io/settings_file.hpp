// config.json on disk for `dhara config get|set|unset`: reading a settings file as a session
// does, and a locked read-edit-validate-write that replaces the file atomically or not at all.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/result.hpp"
#include "policy/settings.hpp"

namespace dhara::io {

/// How long update_settings_file waits for another dhara to release the settings lock.
inline constexpr std::chrono::milliseconds settings_lock_wait{10'000};

/// `dhara_home` + "/config.json".
std::string global_settings_path(const std::string& dhara_home);

/// `project_root` + "/.dhara/config.json".
std::string project_settings_path(const std::string& project_root);

/// One settings file as read: its JSON as written (key order kept) and the parsed layer.
struct settings_file {
  bool exists = false;
  nlohmann::ordered_json doc = nlohmann::ordered_json::object();  ///< {} when missing or empty
  policy::parsed_layer parsed;                                    ///< warnings name the path
};

/// Reads and parses a config file exactly as a session does (io::read_text_file, then
/// policy::parse_settings): a missing file is an empty layer, an empty file is `{}`, anything
/// else that does not load is the session's error (FILE:LINE:COLUMN for syntax).
policy::result<settings_file> read_settings_file(const std::string& path, policy::layer_kind kind);

/// An edit of a settings file's JSON: true when it changed something, false for a no-op
/// (nothing is written), or an error (nothing is written; the message is shown as is).
using settings_edit = std::function<policy::result<bool>(nlohmann::ordered_json&)>;

/// What update_settings_file did.
struct settings_update {
  enum class outcome {
    written,    ///< the file was replaced
    unchanged,  ///< the edit was a no-op, or gave the same bytes: nothing was written
    refused,    ///< the file or the edit is at fault (syntax, type, link...): fix the input
    failed,     ///< the system is at fault (lock, folder, temp file, write, rename)
  };
  outcome what = outcome::failed;
  std::string message;  ///< refused/failed: one sentence naming the file and what to do
  settings_file after;  ///< written/unchanged: the file as it now stands
};

/// The transaction behind `config set|unset`. Creates the folder if missing (0700 for the
/// global file's, 0755 for a project's .dhara), takes an exclusive flock on `path` + ".lock"
/// (waiting up to `lock_wait`), reads the file without following a symlink (a link, a
/// directory or another non-regular file is refused: replacing it would cut the link),
/// refuses a file that does not parse (FILE:LINE:COLUMN) or whose top level is not an object,
/// calls `edit` once on the document (key order kept), and then requires the result to load
/// through policy::parse_settings for `kind` before anything is written. The new text is
/// written through a temp file in the same folder, fsynced, renamed over `path`, and the
/// folder fsynced; an existing file keeps its mode (new: 0600 global, 0644 project). No
/// temp file is left behind on failure; a refused or failed update leaves the file untouched.
settings_update update_settings_file(const std::string& path, policy::layer_kind kind, const settings_edit& edit,
                                     std::chrono::milliseconds lock_wait = settings_lock_wait);

}  // namespace dhara::io
