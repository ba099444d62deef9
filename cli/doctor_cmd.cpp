// `dhara doctor` (DESIGN §6): the health report — config files, warnings, extensions,
// permissions, the audit trail and what the kernel offers the OS sandbox — and
// `dhara doctor --audit-log [--extension X] [--denied-only] [--since 1h] [-n N] [--json]
// [--follow] [--verify]`: the audit trail across rotated files as an aligned table (in colour
// on a terminal, never with NO_COLOR) or raw JSON lines, followed live, or its hash chain
// checked. Doctor only reads: it never creates, repairs or rewrites a file, and never starts
// an extension. Every file it reads may have been edited by anyone: every audit line goes
// through the untrusted parser, and text from files is shown through printable_excerpt, so a
// crafted line cannot send escape sequences to the terminal.
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include "broker/policy_loader.hpp"
#include "cli/commands.hpp"
#include "io/audit_log.hpp"
#include "io/files.hpp"
#include "io/path_resolver.hpp"
#include "io/permissions_file.hpp"
#include "io/sandbox_support.hpp"
#include "policy/audit_entry.hpp"
#include "policy/json_text.hpp"
#include "policy/text.hpp"
#include "sandbox/launcher.hpp"
#include "policy/settings.hpp"

namespace dhara::cli {
namespace {

using json = nlohmann::json;


// ---- terminal output ------------------------------------------------------------------------

// ANSI styling, only on a terminal and never with NO_COLOR set (https://no-color.org).
struct style {
  bool colour = false;

  static style for_stdout() { return {::isatty(1) == 1 && std::getenv("NO_COLOR") == nullptr}; }
  std::string wrap(const char* code, std::string_view s) const {
    if (!colour) return std::string(s);
    return std::string("\033[") + code + "m" + std::string(s) + "\033[0m";
  }
  std::string bold(std::string_view s) const { return wrap("1", s); }
  std::string dim(std::string_view s) const { return wrap("2", s); }
  std::string red(std::string_view s) const { return wrap("31", s); }
  std::string green(std::string_view s) const { return wrap("32", s); }
  std::string yellow(std::string_view s) const { return wrap("33", s); }
};

// `s` padded with spaces to `width` columns (after styling, which adds no columns).
std::string pad(std::string_view shown, std::size_t visible, std::size_t width) {
  std::string out(shown);
  if (visible < width) out.append(width - visible, ' ');
  return out;
}

// `s` (printable ASCII) cut to `width` columns with "..." when longer.
std::string fit(std::string s, std::size_t width) {
  if (s.size() <= width) return s;
  if (width <= 3) return s.substr(0, width);
  return s.substr(0, width - 3) + "...";
}

// A value as one word a shell reads back: as it is when plain, else in single quotes.
std::string shell_word(const std::string& value) {
  const bool plain = !value.empty() && value.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                               "0123456789@%+=:,./_-") == std::string::npos;
  if (plain) return value;
  std::string out = "'";
  for (char c : value) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return policy::terminal_safe(out + "'");
}

// The terminal's width in columns (stdout), else $COLUMNS, else 120.
std::size_t terminal_columns() {
  winsize ws{};
  if (::ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS")) {
    long n = std::strtol(c, nullptr, 10);
    if (n > 20 && n < 10000) return static_cast<std::size_t>(n);
  }
  return 120;
}

// What the result of a verification says about a chain whose first line is not seq 1: older
// files were rotated away. (A lone audit.jsonl that does not start at seq 1 is a break:
// io::verify_audit.)
std::string anchored_note(const io::audit_verification& v) {
  if (!v.anchored) return {};
  return " (older files were rotated away: the first kept line anchors the chain)";
}

std::string human_bytes(std::uint64_t n) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

// ---- the audit table --------------------------------------------------------------------------

/// Options of `dhara doctor --audit-log`.
struct audit_log_options {
  std::string extension;      ///< only this extension
  bool denied_only = false;
  std::string since;          ///< "1h", "30m", "2d", or an ISO time
  std::size_t limit = 50;     ///< the last N matching entries (0: all)
  bool json = false;          ///< raw JSON lines
  bool verify = false;        ///< check seq and the hash chain instead of listing
  bool follow = false;        ///< after the listing, stream new entries until SIGINT/SIGTERM
};

// An ISO 8601 time as people type it → milliseconds since the epoch: a date (YYYY-MM-DD),
// or a date and a time ('T' or a space between; HH, HH:MM, HH:MM:SS or HH:MM:SS.fraction)
// with a zone (Z, +HH:MM, -HHMM, +HH) or none (UTC, as the trail writes its timestamps).
// nullopt for anything else, an impossible date or time included.
std::optional<std::int64_t> parse_iso_time(std::string_view s) {
  std::size_t i = 0;
  auto number = [&](int width, int& out) {
    if (i + static_cast<std::size_t>(width) > s.size()) return false;
    out = 0;
    for (int k = 0; k < width; ++k, ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      out = out * 10 + (s[i] - '0');
    }
    return true;
  };
  auto take = [&](char c) {
    if (i >= s.size() || s[i] != c) return false;
    ++i;
    return true;
  };
  int year = 0, month = 0, day = 0;
  if (!number(4, year) || !take('-') || !number(2, month) || !take('-') || !number(2, day)) return std::nullopt;
  const std::chrono::year_month_day date{std::chrono::year{year}, std::chrono::month{static_cast<unsigned>(month)},
                                         std::chrono::day{static_cast<unsigned>(day)}};
  if (!date.ok()) return std::nullopt;
  std::int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::sys_days{date}.time_since_epoch()).count();
  if (i == s.size()) return ms;
  if (!take('T') && !take('t') && !take(' ')) return std::nullopt;
  int hour = 0, minute = 0, second = 0, millis = 0;
  if (!number(2, hour)) return std::nullopt;
  if (take(':')) {  // HH alone is an hour (`date -Ihours`)
    if (!number(2, minute)) return std::nullopt;
    if (take(':')) {
      if (!number(2, second)) return std::nullopt;
      if (take('.') || take(',')) {
        const std::size_t first = i;
        for (int scale = 100; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, scale /= 10) millis += (s[i] - '0') * scale;
        if (i == first) return std::nullopt;
      }
    }
  }
  if (hour > 23 || minute > 59 || second > 59) return std::nullopt;
  ms += ((hour * 60 + minute) * 60 + second) * std::int64_t{1000} + millis;
  if (i == s.size()) return ms;
  if (take('Z') || take('z')) return i == s.size() ? std::optional<std::int64_t>(ms) : std::nullopt;
  const int sign = take('+') ? 1 : take('-') ? -1 : 0;
  int zone_hours = 0, zone_minutes = 0;
  if (sign == 0 || !number(2, zone_hours)) return std::nullopt;
  if (i < s.size()) {  // +HH, +HH:MM or +HHMM
    take(':');
    if (!number(2, zone_minutes)) return std::nullopt;
  }
  if (i != s.size() || zone_hours > 23 || zone_minutes > 59) return std::nullopt;
  return ms - sign * (zone_hours * 60 + zone_minutes) * std::int64_t{60000};
}

// "1h", "30m", "2d", "45s" → the trail's timestamp that long ago; an ISO time → the trail's
// timestamp of that instant (the trail's timestamps, all alike, compare as text).
std::optional<std::string> since_timestamp(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char unit = text.back();
  std::string number = text.substr(0, text.size() - 1);
  if (!number.empty() && number.size() < 12 && std::all_of(number.begin(), number.end(), ::isdigit) &&
      std::string("smhd").find(unit) != std::string::npos) {
    long long n = std::stoll(number);
    long long seconds = unit == 's' ? n : unit == 'm' ? n * 60 : unit == 'h' ? n * 3600 : n * 86400;
    auto now = io::wall_clock_ms();
    return policy::format_timestamp(now - seconds * 1000);
  }
  if (auto ms = parse_iso_time(text)) return policy::format_timestamp(*ms);
  return std::nullopt;
}

std::string field(const json& line, const char* key) {
  auto it = line.find(key);
  return it != line.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string subject_of(const json& line) {
  auto d = line.find("details");
  if (d != line.end() && d->is_object())
    for (const char* key : {"path", "url", "command", "change", "prompt"})
      if (auto it = d->find(key); it != d->end() && it->is_string()) return it->get<std::string>();
  return field(line, "tool");
}

// The audit filters of the command line.
struct audit_filter {
  std::string extension;
  bool denied_only = false;
  std::optional<std::string> since;

  bool matches(const json& line) const {
    if (!extension.empty() && field(line, "extension") != extension) return false;
    if (denied_only && field(line, "action") != "denied") return false;
    if (since && field(line, "timestamp") < *since) return false;
    return true;
  }
};

// One row's cells, made printable (escape sequences in a crafted line are shown, not sent).
struct audit_row {
  std::string time, extension, capability, action, subject, reason;
};

// The aligned table: on a terminal, times without milliseconds, columns capped so a row fits
// the window, the reason cut at its edge, the action in colour; on a pipe, plain text with
// full timestamps (what scripts and the tests read).
class audit_table {
 public:
  audit_table(bool terminal, style st, bool following) : terminal_(terminal), style_(st) {
    // Rows streamed later cannot widen the columns: leave room for the catalog's longest
    // capability ("process:system-info") and a typical extension name.
    if (following) {
      w_time_ = terminal ? 19 : 24;  // a whole timestamp (the header alone was 4 wide on an empty trail)
      w_ext_ = 16;
      w_cap_ = 19;
      w_subject_ = terminal ? 24 : 7;
    }
    columns_ = terminal ? terminal_columns() : 0;
  }

  audit_row cells(const json& line) const {
    audit_row r;
    std::string ts = field(line, "timestamp");
    // "2026-05-14T10:00:00.123Z" → "2026-05-14 10:00:00" on a terminal (the header says UTC).
    if (terminal_ && ts.size() >= 19 && ts[10] == 'T') ts = ts.substr(0, 10) + " " + ts.substr(11, 8);
    r.time = policy::printable_excerpt(ts, terminal_ ? 19 : 40);
    r.extension = policy::printable_excerpt(field(line, "extension"), 64);
    r.capability = policy::printable_excerpt(field(line, "capability"), 64);
    r.action = policy::printable_excerpt(field(line, "action"), 7);
    r.subject = policy::printable_excerpt(subject_of(line), 200);
    r.reason = policy::printable_excerpt(field(line, "reason"), terminal_ ? 1000 : 200);
    return r;
  }

  // Widens the columns for the rows about to be printed.
  void measure(const audit_row& r) {
    w_time_ = std::max(w_time_, r.time.size());
    w_ext_ = std::max(w_ext_, r.extension.size());
    w_cap_ = std::max(w_cap_, r.capability.size());
    w_subject_ = std::max(w_subject_, r.subject.size());
  }

  void print_header() {
    if (terminal_) {
      w_ext_ = std::min<std::size_t>(w_ext_, 24);
      w_cap_ = std::min<std::size_t>(w_cap_, 20);
      w_subject_ = std::min<std::size_t>(w_subject_, 40);
      // A narrow window: the subject, then the extension give way, so the reason keeps at
      // least 20 columns and a row stays on one line.
      std::size_t need = w_time_ + w_ext_ + w_cap_ + 7 + w_subject_ + 5 + 20;
      if (need > columns_) {
        std::size_t over = need - columns_;
        std::size_t cut = std::min(over, w_subject_ > 12 ? w_subject_ - 12 : 0);
        w_subject_ -= cut;
        over -= cut;
        w_ext_ -= std::min(over, w_ext_ > 9 ? w_ext_ - 9 : 0);
      }
    } else {
      w_subject_ = std::min<std::size_t>(w_subject_, 48);
    }
    audit_row h{terminal_ ? "TIME (UTC)" : "TIME", "EXTENSION", "CAPABILITY", "ACTION", "SUBJECT", "REASON"};
    std::string line = pad(h.time, h.time.size(), w_time_) + " " + pad(h.extension, 9, w_ext_) + " " +
                       pad(h.capability, 10, w_cap_) + " " + pad(h.action, 6, 7) + " " +
                       pad(h.subject, 7, w_subject_) + " " + h.reason;
    std::printf("%s\n", style_.bold(line).c_str());
  }

  void print_row(const audit_row& r) const {
    std::string ext = terminal_ ? fit(r.extension, w_ext_) : r.extension;
    std::string cap = terminal_ ? fit(r.capability, w_cap_) : r.capability;
    std::string subject = fit(r.subject, w_subject_);
    std::string action = r.action == "denied"    ? style_.red(r.action)
                         : r.action == "allowed" ? style_.green(r.action)
                                                 : r.action;
    std::string reason = r.reason;
    if (terminal_) {
      std::size_t used = w_time_ + w_ext_ + w_cap_ + 7 + w_subject_ + 5;
      reason = fit(reason, columns_ > used + 12 ? columns_ - used : 12);
    }
    std::string line = pad(terminal_ ? style_.dim(r.time) : r.time, r.time.size(), w_time_) + " " +
                       pad(ext, ext.size(), w_ext_) + " " + pad(cap, cap.size(), w_cap_) + " " +
                       pad(action, r.action.size(), 7) + " " + pad(subject, subject.size(), w_subject_) + " " +
                       reason;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::printf("%s\n", line.c_str());
  }

 private:
  bool terminal_;
  style style_;
  std::size_t columns_ = 0;
  std::size_t w_time_ = 4, w_ext_ = 9, w_cap_ = 10, w_subject_ = 7;
};

// ---- reading and following the trail ------------------------------------------------------------

// An open file and its identity.
struct open_file {
  int fd = -1;
  dev_t dev = 0;
  ino_t ino = 0;
};

// Opens a trail file for reading without following a symlink or blocking on a FIFO; only a
// regular file is accepted (nullopt otherwise: it cannot be an audit file dhara wrote).
std::optional<open_file> open_trail_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return std::nullopt;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return std::nullopt;
  }
  return open_file{fd, st.st_dev, st.st_ino};
}

// The N of every audit.N.jsonl in `dir`, ascending.
std::vector<int> rotated_numbers(const std::string& dir) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    int n = 0;
    if (std::sscanf(name.c_str(), "audit.%d.jsonl", &n) == 1 && n > 0 && name == "audit." + std::to_string(n) + ".jsonl")
      out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Holds a shared lock on audit.lock while trail files are opened, so a writer's rotation
// (done under the exclusive lock) is seen whole or not at all. Opening the lock file read-only
// never creates it: without one, no writer ever ran.
class shared_trail_lock {
 public:
  explicit shared_trail_lock(const std::string& dir) {
    fd_ = ::open((dir + "/audit.lock").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd_ >= 0)
      while (::flock(fd_, LOCK_SH) != 0 && errno == EINTR) {
      }
  }
  ~shared_trail_lock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  shared_trail_lock(const shared_trail_lock&) = delete;
  shared_trail_lock& operator=(const shared_trail_lock&) = delete;

 private:
  int fd_ = -1;
};

using line_sink = std::function<void(std::string_view)>;

// Reads the trail oldest first and then keeps reading what is appended: audit.jsonl from
// where the last read stopped, and, when it was rotated away (renamed to audit.1.jsonl, a new
// audit.jsonl started), the rest of the old file, any rotated file newer than it (several
// rotations between two reads), then the new file from its start. Only complete lines are
// passed on while following; a torn line that recovery truncated away is dropped.
class trail_reader {
 public:
  explicit trail_reader(std::string dir) : dir_(std::move(dir)) {}
  ~trail_reader() { close_current(); }
  trail_reader(const trail_reader&) = delete;
  trail_reader& operator=(const trail_reader&) = delete;

  // Every line of every file, oldest first. `final_partial`: pass on a last line without a
  // newline too (a one-shot listing shows what is there; a follower waits for the rest).
  void read_all(const line_sink& sink, bool final_partial) {
    std::vector<open_file> files;
    {
      shared_trail_lock lock(dir_);
      auto numbers = rotated_numbers(dir_);
      std::vector<std::string> paths;
      for (auto it = numbers.rbegin(); it != numbers.rend(); ++it)
        paths.push_back(dir_ + "/audit." + std::to_string(*it) + ".jsonl");
      paths.push_back(dir_ + "/audit.jsonl");
      for (const std::string& path : paths) {
        if (auto f = open_trail_file(path)) {
          files.push_back(*f);
        } else {
          struct stat st;
          if (::lstat(path.c_str(), &st) == 0) skipped_.push_back(path);
        }
      }
    }
    for (std::size_t i = 0; i < files.size(); ++i) {
      bool last = i + 1 == files.size();
      if (last) {
        // The newest file stays open: following continues exactly where this read ends.
        current_ = files[i];
        offset_ = 0;
        drain(sink);
        if (final_partial && !partial_.empty()) sink(std::exchange(partial_, {}));
      } else {
        read_whole(files[i].fd, sink, final_partial);
        ::close(files[i].fd);
      }
    }
  }

  // Trail files read_all() left out: a symbolic link, not a regular file, or unreadable.
  const std::vector<std::string>& skipped() const { return skipped_; }

  // Passes on what was appended since the last read, across rotations.
  void read_new(const line_sink& sink) {
    drain(sink);
    std::vector<open_file> newer;
    std::optional<open_file> fresh;
    {
      shared_trail_lock lock(dir_);
      struct stat st;
      if (::stat((dir_ + "/audit.jsonl").c_str(), &st) != 0) return;  // not started yet
      if (current_.fd >= 0 && st.st_dev == current_.dev && st.st_ino == current_.ino) return;
      // Rotated (or started): the files newer than ours are the rotated ones numbered below
      // it, or all of them when ours is gone (deleted past `keep`) or there was none.
      auto numbers = rotated_numbers(dir_);
      std::vector<std::pair<int, open_file>> rotated;
      int ours = 0;
      for (int n : numbers) {
        auto f = open_trail_file(dir_ + "/audit." + std::to_string(n) + ".jsonl");
        if (!f) continue;
        if (current_.fd >= 0 && f->dev == current_.dev && f->ino == current_.ino) {
          ours = n;
          ::close(f->fd);
          continue;
        }
        rotated.emplace_back(n, *f);
      }
      for (auto it = rotated.rbegin(); it != rotated.rend(); ++it) {
        if (ours == 0 || it->first < ours)
          newer.push_back(it->second);
        else
          ::close(it->second.fd);
      }
      fresh = open_trail_file(dir_ + "/audit.jsonl");
    }
    drain(sink);  // the old file is complete now: nothing is written to a rotated file
    partial_.clear();
    for (const open_file& f : newer) {
      read_whole(f.fd, sink, false);
      ::close(f.fd);
    }
    close_current();
    if (fresh) {
      current_ = *fresh;
      offset_ = 0;
      drain(sink);
    }
  }

 private:
  // Complete lines appended to the current file since the last read.
  void drain(const line_sink& sink) {
    if (current_.fd < 0) return;
    struct stat st;
    if (::fstat(current_.fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) < offset_) {
      // Recovery truncated a torn last line away: it was never a decision's record.
      offset_ = static_cast<std::uint64_t>(st.st_size);
      partial_.clear();
    }
    char buf[65536];
    while (true) {
      ssize_t n = ::pread(current_.fd, buf, sizeof buf, static_cast<off_t>(offset_));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      offset_ += static_cast<std::uint64_t>(n);
      split(std::string_view(buf, static_cast<std::size_t>(n)), sink);
    }
  }

  void read_whole(int fd, const line_sink& sink, bool final_partial) {
    partial_.clear();
    char buf[65536];
    while (true) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      split(std::string_view(buf, static_cast<std::size_t>(n)), sink);
    }
    if (final_partial && !partial_.empty()) sink(partial_);
    partial_.clear();
  }

  void split(std::string_view chunk, const line_sink& sink) {
    while (!chunk.empty()) {
      auto nl = chunk.find('\n');
      if (nl == std::string_view::npos) {
        // A hostile file without newlines must not grow this without bound.
        if (partial_.size() + chunk.size() <= io::max_audit_line_bytes) partial_.append(chunk);
        return;
      }
      if (partial_.empty()) {
        sink(chunk.substr(0, nl));
      } else {
        partial_.append(chunk.substr(0, nl));
        sink(partial_);
        partial_.clear();
      }
      chunk.remove_prefix(nl + 1);
    }
  }

  void close_current() {
    if (current_.fd >= 0) ::close(current_.fd);
    current_ = {};
  }

  std::string dir_;
  std::vector<std::string> skipped_;
  open_file current_;
  std::uint64_t offset_ = 0;
  std::string partial_;
};

// Waits for the trail to change (inotify on the folder, or a short poll where inotify is not
// available), for SIGINT/SIGTERM, or for the reader of a stdout pipe to go away.
class follow_waiter {
 public:
  enum class event { changed, stop };

  explicit follow_waiter(std::string dir) : dir_(std::move(dir)) {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    ::sigprocmask(SIG_BLOCK, &mask, nullptr);  // delivered through the signalfd instead
    signal_fd_ = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (signal_fd_ < 0) ::sigprocmask(SIG_UNBLOCK, &mask, nullptr);  // Ctrl-C must still stop it
    inotify_fd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    watch();
    struct stat st;
    watch_stdout_ = ::fstat(1, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
  }
  ~follow_waiter() {
    if (signal_fd_ >= 0) ::close(signal_fd_);
    if (inotify_fd_ >= 0) ::close(inotify_fd_);
  }
  follow_waiter(const follow_waiter&) = delete;
  follow_waiter& operator=(const follow_waiter&) = delete;

  event wait() {
    pollfd fds[3];
    nfds_t n = 0;
    int sig = -1, ino = -1, out = -1;
    if (signal_fd_ >= 0) {
      fds[n] = {signal_fd_, POLLIN, 0};
      sig = static_cast<int>(n++);
    }
    if (inotify_fd_ >= 0 && watching_) {
      fds[n] = {inotify_fd_, POLLIN, 0};
      ino = static_cast<int>(n++);
    }
    if (watch_stdout_) {
      fds[n] = {1, 0, 0};  // POLLERR/POLLHUP come unasked when the reader closes the pipe
      out = static_cast<int>(n++);
    }
    // With inotify, the timeout is only a safety net (a filesystem that sends no events).
    int rc = ::poll(fds, n, ino >= 0 ? 1000 : 250);
    if (rc < 0 && errno != EINTR) return event::stop;
    if (rc > 0 && sig >= 0 && (fds[sig].revents & POLLIN)) return event::stop;
    if (rc > 0 && out >= 0 && (fds[out].revents & (POLLERR | POLLHUP))) return event::stop;
    if (rc > 0 && ino >= 0 && (fds[ino].revents & POLLIN)) {
      char buf[8192];
      while (::read(inotify_fd_, buf, sizeof buf) > 0) {
      }  // the events only say "look again"
    }
    if (!watching_) watch();
    return event::changed;
  }

 private:
  void watch() {
    if (inotify_fd_ < 0) return;
    watching_ = ::inotify_add_watch(inotify_fd_, dir_.c_str(),
                                    IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE |
                                        IN_CLOSE_WRITE | IN_ONLYDIR) >= 0;
  }

  std::string dir_;
  int signal_fd_ = -1;
  int inotify_fd_ = -1;
  bool watching_ = false;
  bool watch_stdout_ = false;
};

int doctor_verify(const std::string& dir) {
  auto v = io::verify_audit(dir);
  if (!v) {
    // A machine where dhara never ran has no folder yet: nothing was written, nothing broken
    // (plain `doctor` calls it healthy; this said "does not exist", exit 1, a broken chain's code).
    std::error_code ec;
    if (v.err().code == policy::errc::not_found && !std::filesystem::exists(dir, ec) && !ec) {
      std::printf("audit trail OK: no entries yet in %s (the folder does not exist yet)\n", dir.c_str());
      return 0;
    }
    std::fprintf(stderr, "dhara: %s\n", v.err().message.c_str());
    return 1;
  }
  if (!v->ok) {
    std::printf("audit trail broken: %s line %llu: %s\n", v->first_bad_file.c_str(),
                static_cast<unsigned long long>(v->first_bad_line), v->why.c_str());
    return 1;
  }
  if (v->lines == 0) {  // nothing to chain: no "seq 0 to 0"
    std::printf("audit trail OK: no entries yet in %s\n", dir.c_str());
    return 0;
  }
  std::printf("audit trail OK: %llu line%s in %zu file%s, seq %llu to %llu%s\n", static_cast<unsigned long long>(v->lines),
              v->lines == 1 ? "" : "s", v->files.size(), v->files.size() == 1 ? "" : "s",
              static_cast<unsigned long long>(v->first_seq), static_cast<unsigned long long>(v->last_seq),
              anchored_note(*v).c_str());
  return 0;
}

int doctor_audit_log(const global_options&, const audit_log_options& o) {
  auto where = io::discover_locations();
  if (!where) {
    std::fprintf(stderr, "dhara: %s\n", where.err().message.c_str());
    return 2;
  }
  const std::string& dir = where->dhara_home;
  if (o.verify) return doctor_verify(dir);
  audit_filter filter{o.extension, o.denied_only, std::nullopt};
  if (!o.since.empty()) {
    filter.since = since_timestamp(o.since);
    if (!filter.since) {
      std::fprintf(stderr, "dhara: --since '%s' is not a duration (30s, 15m, 1h, 2d) or an ISO time (2026-12-07, 2026-12-07T14:30, 2026-12-07T14:30:00+01:00); give one of those\n", o.since.c_str());
      return 2;
    }
  }
  // Following: SIGINT/SIGTERM are taken from now on (a signal during the listing still ends
  // it cleanly), and a closed stdout pipe is an error to notice, not a signal that kills.
  std::unique_ptr<follow_waiter> waiter;
  if (o.follow) {
    std::signal(SIGPIPE, SIG_IGN);
    waiter = std::make_unique<follow_waiter>(dir);
  }

  // The last N matching lines, kept (raw) while streaming through every file. With -n 0 every
  // matching line is printed as it is read instead, in bounded memory, the table's columns
  // fixed as --follow's are (a trail of 150 MB held parsed took 1.1 GB).
  const bool stream = o.limit == 0;
  const bool terminal = ::isatty(1) == 1;
  audit_table table(terminal, style::for_stdout(), o.follow || stream);
  std::deque<std::string> kept;
  std::size_t matched = 0;
  std::size_t unreadable = 0;
  // With --extension, the names the trail holds (a few hundred at most are kept), so that a
  // name no entry carries (a typo) is told apart from entries that do not match.
  std::set<std::string, std::less<>> named;
  constexpr std::size_t max_names = 512;
  // The seq of the last line read, whatever the filters: following, a jump says what it missed.
  std::uint64_t last_seq = 0;
  bool following = false;
  const auto select = [&](std::string_view raw, const std::function<void(std::string_view, json&)>& take) {
    auto parsed = policy::parse_json_text(raw, "");
    if (!parsed || !parsed->is_object()) {
      ++unreadable;
      return;
    }
    if (auto seq = parsed->find("seq"); seq != parsed->end() && seq->is_number_unsigned()) {
      const auto n = seq->get<std::uint64_t>();
      if (following && last_seq != 0 && n > last_seq + 1) {
        std::fprintf(stderr, "dhara: warning: entries %llu to %llu were rotated away before they could be read\n",
                     static_cast<unsigned long long>(last_seq + 1), static_cast<unsigned long long>(n - 1));
      } else if (following && last_seq != 0 && n <= last_seq) {
        std::fprintf(stderr,
                     "dhara: warning: the entries from %llu on were taken back (a batch that could not be written "
                     "whole) and are written again: those shown before from there are not in the trail\n",
                     static_cast<unsigned long long>(n));
      }
      last_seq = n;
    }
    if (!filter.extension.empty() && named.size() < max_names)
      if (const std::string name = field(*parsed, "extension"); !name.empty()) named.insert(name);
    if (filter.matches(*parsed)) take(raw, *parsed);
  };
  const auto print_now = [&](std::string_view raw, const json& line, bool first) {
    if (o.json) {
      std::fwrite(raw.data(), 1, raw.size(), stdout);
      std::fputc('\n', stdout);
      return;
    }
    const audit_row row = table.cells(line);
    if (first) {
      table.measure(row);  // the time's width: every timestamp has it
      table.print_header();
    }
    table.print_row(row);
  };
  trail_reader reader(dir);
  reader.read_all(
      [&](std::string_view raw) {
        select(raw, [&](std::string_view r, json& line) {
          ++matched;
          if (stream) return print_now(r, line, matched == 1);
          kept.emplace_back(r);
          if (kept.size() > o.limit) kept.pop_front();
        });
      },
      !o.follow);
  for (const std::string& path : reader.skipped())
    std::fprintf(stderr, "dhara: warning: %s was not read: it is a symbolic link, not a regular file, or unreadable\n",
                 path.c_str());
  if (unreadable)
    std::fprintf(stderr, "dhara: warning: %zu audit %s not JSON; run 'dhara doctor --audit-log --verify'\n", unreadable,
                 unreadable == 1 ? "line is" : "lines are");

  if (matched == 0 && !o.extension.empty() && !named.contains(o.extension)) {
    std::vector<std::string> shown;  // printable: a crafted line cannot reach the terminal raw
    for (const std::string& n : named) shown.push_back(policy::printable_excerpt(n));
    std::vector<std::string_view> names(shown.begin(), shown.end());
    std::fprintf(stderr, "dhara: note: no audit entry names the extension '%s'%s%s\n",
                 policy::printable_excerpt(o.extension).c_str(), o.follow ? " so far" : "",
                 policy::did_you_mean(o.extension, names).c_str());
  }

  if (matched == 0 && !o.follow && !o.json) {
    std::printf("No audit entries%s.\n", o.extension.empty() && !o.denied_only && o.since.empty() ? "" : " match");
    return 0;
  }
  if (o.json) {
    for (const std::string& raw : kept) {
      std::fwrite(raw.data(), 1, raw.size(), stdout);
      std::fputc('\n', stdout);
    }
  } else if (!stream) {
    std::vector<audit_row> rows;
    for (const std::string& raw : kept) {
      auto line = policy::parse_json_text(raw, "");  // it parsed when it was kept
      rows.push_back(table.cells(line ? *line : json::object()));
      table.measure(rows.back());
    }
    table.print_header();
    for (const audit_row& r : rows) table.print_row(r);
  } else if (matched == 0) {
    table.print_header();  // following an empty listing
  }
  if (!o.follow) return 0;

  if (::isatty(2) == 1) std::fprintf(stderr, "dhara: following %s/audit.jsonl; Ctrl-C to stop\n", dir.c_str());
  while (true) {
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      if (errno == EPIPE) return 0;  // the reader went away: following is over
      std::fprintf(stderr, "dhara: cannot write the audit entries: %s\n", std::strerror(errno));
      return 1;
    }
    if (waiter->wait() == follow_waiter::event::stop) return 0;
    unreadable = 0;
    following = true;
    reader.read_new([&](std::string_view raw) {
      select(raw, [&](std::string_view r, json& line) {
        if (o.json) {
          std::fwrite(r.data(), 1, r.size(), stdout);
          std::fputc('\n', stdout);
        } else {
          table.print_row(table.cells(line));
        }
      });
    });
    if (unreadable)
      std::fprintf(stderr, "dhara: warning: %zu new audit %s not JSON\n", unreadable, unreadable == 1 ? "line is" : "lines are");
  }
}

// ---- the health report ----------------------------------------------------------------------------

// What a file check found.
enum class file_state {
  absent,      ///< no such file (a default applies)
  valid,       ///< read and understood
  unreadable,  ///< cannot be read: permissions, a symlink, not a regular file
  invalid,     ///< read, but malformed or with wrong values
};

std::string_view to_string(file_state s) {
  switch (s) {
    case file_state::absent: return "absent";
    case file_state::valid: return "valid";
    case file_state::unreadable: return "unreadable";
    case file_state::invalid: return "invalid";
  }
  return "invalid";
}

struct file_check {
  std::string path;
  file_state state = file_state::absent;
  std::string error;  ///< why it is unreadable or invalid (names the file, line and column)
};

/// Whether an extension would start, judged without starting it.
enum class readiness {
  ready,    ///< the command is found and every declared capability is approved
  blocked,  ///< it would start, but some capabilities are pending or denied
  failed,   ///< it cannot start (its command is not found)
};

std::string_view to_string(readiness r) {
  switch (r) {
    case readiness::ready: return "ready";
    case readiness::blocked: return "blocked";
    case readiness::failed: return "failed";
  }
  return "failed";
}

struct extension_check {
  std::string name, version, folder, command, executable;
  bool from_project = false;
  readiness state = readiness::failed;
  std::string reason;  ///< why it is not ready
  policy::capability_set approved, pending, denied;
};

struct audit_check {
  bool present = false;  ///< any audit file exists
  std::vector<std::pair<std::string, std::uint64_t>> files;  ///< path, bytes (oldest first)
  std::uint64_t bytes = 0;
  std::optional<io::audit_verification> verification;
  std::string error;   ///< the trail could not be read at all
  double millis = 0;   ///< how long the verification took
};

struct health_report {
  io::locations where;
  // Config.
  file_check global_config, project_config;
  bool has_project_config = true;  ///< false when the project is DHARA_HOME itself
  std::optional<policy::settings> settings;
  std::vector<std::string> warnings;
  // Extensions.
  bool extensions_checked = false;
  std::string extensions_not_checked;
  std::vector<std::pair<std::string, bool>> extension_dirs;  ///< folder, exists
  std::vector<extension_check> extensions;
  std::vector<broker::skipped_extension> skipped;
  // State files.
  file_check permissions;
  std::size_t permission_entries = 0;
  audit_check audit;
  io::sandbox_support sandbox;
  std::string launcher;      // dhara-launch next to this binary
  bool launcher_ok = false;
  std::vector<std::string> notes;     ///< facts worth knowing that are not problems
  std::vector<std::string> problems;  ///< each makes the exit code 1
};

// A file or folder of dhara's state that another user could change: they could approve
// anything, or lower the level.
std::optional<std::string> unsafe_mode(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    return path + " belongs to uid " + std::to_string(st.st_uid) + ", not to you: another user controls it";
  if ((st.st_mode & 022) != 0)
    return path + " is writable by " + ((st.st_mode & 002) ? "every user" : "its group") + ": run 'chmod go-w " +
           path + "'";
  return std::nullopt;
}

// A config file: absent, unreadable, or parsed (invalid with file:line:column).
std::optional<policy::parsed_layer> check_config_file(file_check& c, policy::layer_kind kind) {
  auto text = io::read_text_file(c.path);
  if (!text) {
    if (text.err().code == policy::errc::not_found) {
      c.state = file_state::absent;
      return policy::parsed_layer{};
    }
    c.state = file_state::unreadable;
    c.error = text.err().message;
    return std::nullopt;
  }
  auto parsed = policy::parse_settings(*text, c.path, kind);
  if (!parsed) {
    c.state = file_state::invalid;
    c.error = parsed.err().message;
    return std::nullopt;
  }
  c.state = file_state::valid;
  return std::move(*parsed);
}

// permissions.json: absent, unreadable (open/stat refused: mode, symlink, not a file) or
// corrupt (read, but not a valid permissions file).
std::optional<policy::parsed_permissions> check_permissions_file(health_report& r) {
  file_check& c = r.permissions;
  c.path = io::permissions_path(r.where.dhara_home);
  struct stat st;
  if (::lstat(c.path.c_str(), &st) != 0 && errno == ENOENT) {
    c.state = file_state::absent;
    return policy::parsed_permissions{};
  }
  bool openable = false;
  if (int fd = ::open(c.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY); fd >= 0) {
    struct stat fst;
    openable = ::fstat(fd, &fst) == 0 && S_ISREG(fst.st_mode);
    ::close(fd);
  }
  auto perms = io::read_permissions(c.path);
  if (!perms) {
    c.state = openable ? file_state::invalid : file_state::unreadable;
    c.error = perms.err().message;
    return std::nullopt;
  }
  c.state = file_state::valid;
  r.permission_entries = perms->value.entries.size();
  return std::move(*perms);
}

void check_config(health_report& r, std::vector<std::string>& own_warnings, bool& config_ok) {
  const auto& w = r.where;
  r.global_config.path = w.dhara_home + "/config.json";
  r.project_config.path = w.project_root + "/.dhara/config.json";
  // Not when the project's `.dhara` is dhara's own folder or not the user's: sessions read none.
  r.has_project_config = w.project_root != w.dhara_home && w.project_dhara_usable();
  auto global = check_config_file(r.global_config, policy::layer_kind::global);
  std::optional<policy::parsed_layer> project = policy::parsed_layer{};
  if (r.has_project_config) project = check_config_file(r.project_config, policy::layer_kind::project);
  for (const file_check* c : {&r.global_config, &r.project_config})
    if (c->state == file_state::invalid || c->state == file_state::unreadable) r.problems.push_back(c->error);
  if (auto unsafe = unsafe_mode(r.global_config.path)) r.problems.push_back(*unsafe);
  config_ok = global && project;
  if (!config_ok) return;
  own_warnings = global->warnings;
  own_warnings.insert(own_warnings.end(), project->warnings.begin(), project->warnings.end());
  policy::merge_context ctx{w.home, w.dhara_home, w.project_root};
  auto merged = policy::merge_settings(global->layer, r.has_project_config ? &project->layer : nullptr, nullptr, ctx);
  own_warnings.insert(own_warnings.end(), merged.warnings.begin(), merged.warnings.end());
  r.settings = std::move(merged.effective);
}

// Whether a skipped folder is a problem: untrusted project extensions and a second extension
// of the same name are skipped by design (and warned about); anything else is a broken one.
bool skip_is_problem(const health_report& r, const broker::skipped_extension& s) {
  const std::string project_dir = r.where.project_root + "/.dhara/extensions/";
  if (r.settings && !r.settings->project_trusted && s.folder.rfind(project_dir, 0) == 0) return false;
  return s.reason.rfind("another extension named", 0) != 0;
}

void check_extensions(health_report& r, const broker::loaded_policy& loaded) {
  r.extensions_checked = true;
  for (const std::string& d : loaded.settings.extension_dirs) {
    std::error_code ec;
    r.extension_dirs.emplace_back(d, std::filesystem::is_directory(d, ec));
  }
  std::string project_dir = r.where.project_root + "/.dhara/extensions";
  if (r.where.project_dhara_usable() && std::find_if(r.extension_dirs.begin(), r.extension_dirs.end(), [&](const auto& d) { return d.first == project_dir; }) ==
      r.extension_dirs.end()) {
    std::error_code ec;
    r.extension_dirs.emplace_back(project_dir, std::filesystem::is_directory(project_dir, ec));
  }
  const char* path_env = std::getenv("PATH");
  const auto& snap = *loaded.snapshot;
  for (const broker::discovered_extension& e : loaded.extensions) {
    extension_check x;
    x.name = e.manifest.name;
    x.version = e.manifest.version;
    x.folder = e.folder;
    x.command = e.manifest.runtime_command;
    x.from_project = e.from_project;
    // The command is located as the session would (PATH, or relative to the folder), but not
    // run: doctor starts no extension, since starting one runs its code and writes the audit.
    io::path_executable_locator locator(path_env ? path_env : "/usr/local/bin:/usr/bin:/bin", e.folder);
    auto exe = e.manifest.argv.empty() ? policy::result<std::string>(policy::make_error(policy::errc::invalid_value,
                                                                                         "runtime.command is empty"))
                                       : locator.locate(e.manifest.argv.front());
    policy::capability_set declared = e.manifest.capabilities;
    if (snap.level == policy::security_level::yolo) {
      x.approved = declared;
    } else if (auto it = snap.extensions.find(x.name); it != snap.extensions.end()) {
      const policy::extension_policy& p = it->second;
      x.denied = declared & p.denied;
      x.approved = (declared & (p.approved_by_user | p.approved_by_author)).minus(x.denied);
      x.pending = declared.minus(x.approved).minus(x.denied);
    } else {
      x.pending = declared;
    }
    if (!exe) {
      x.state = readiness::failed;
      x.reason = "cannot start: " + exe.err().message;
      r.problems.push_back("extension '" + x.name + "' (" + x.folder + ") " + x.reason);
    } else {
      x.executable = *exe;
      if (x.pending.empty() && x.denied.empty()) {
        x.state = readiness::ready;
      } else {
        x.state = readiness::blocked;
        if (!x.pending.empty())
          x.reason = "pending " + policy::join_names(x.pending) + ": run 'dhara config permissions approve " + x.name +
                     " --all'";
        if (!x.denied.empty())
          x.reason += std::string(x.reason.empty() ? "" : "; ") + "denied " + policy::join_names(x.denied) +
                      ": tools that need it are refused";
      }
    }
    r.extensions.push_back(std::move(x));
  }
  r.skipped = loaded.skipped;
  for (const auto& s : r.skipped)
    if (skip_is_problem(r, s)) r.problems.push_back("extension folder " + s.folder + " skipped: " + s.reason);
  for (const std::string& p : snap.problems) r.problems.push_back(p);
}

void check_audit(health_report& r) {
  const std::string& dir = r.where.dhara_home;
  audit_check& a = r.audit;
  std::vector<std::string> paths;
  for (int n : rotated_numbers(dir)) paths.push_back(dir + "/audit." + std::to_string(n) + ".jsonl");
  std::reverse(paths.begin(), paths.end());
  paths.push_back(dir + "/audit.jsonl");
  for (const std::string& p : paths) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) continue;
    a.present = true;
    a.files.emplace_back(p, static_cast<std::uint64_t>(st.st_size));
    a.bytes += static_cast<std::uint64_t>(st.st_size);
  }
  if (!a.present) return;
  // The whole chain is verified: SHA-256 runs at hundreds of MiB/s, so even the default
  // ceiling (maxBytes × (keep + 1) = 600 MiB) takes seconds, not minutes; the report says how
  // long it took.
  auto start = std::chrono::steady_clock::now();
  auto v = io::verify_audit(dir);
  a.millis = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!v) {
    a.error = v.err().message;
    r.problems.push_back("the audit trail cannot be read: " + a.error);
    return;
  }
  a.verification = std::move(*v);
  const auto& ver = *a.verification;
  if (!ver.ok) {
    r.problems.push_back("the audit trail is broken at " + ver.first_bad_file + " line " +
                         std::to_string(ver.first_bad_line) + ": " + ver.why +
                         " (see 'dhara doctor --audit-log --verify'; move the trail away to start a new one)");
  }
  if (auto unsafe = unsafe_mode(dir + "/audit.jsonl")) r.problems.push_back(*unsafe);
}

void check_sandbox(health_report& r) {
  r.sandbox = io::probe_sandbox_support();
  r.launcher = sandbox::launcher_path();
  r.launcher_ok = !r.launcher.empty() && ::access(r.launcher.c_str(), X_OK) == 0;
  if (!r.settings || r.settings->level == policy::security_level::yolo) return;
  // Every extension starts through the launcher, which needs Landlock and seccomp; where they
  // are missing and the sandbox is required, no extension starts (fail closed).
  bool required = policy::os_sandbox_required(*r.settings);
  if (!r.launcher_ok)
    r.problems.push_back("the sandbox launcher " + (r.launcher.empty() ? std::string("dhara-launch") : r.launcher) +
                         " is missing, so no extension can start; it is built and installed next to dhara");
  // The same rule the extension host applies at start (io::launch_blocker).
  if (std::string blocker = io::launch_blocker(r.sandbox, false); required && !blocker.empty())
    r.problems.push_back(std::string("the OS sandbox is required (") +
                         (r.settings->level == policy::security_level::paranoid ? "level paranoid"
                                                                                 : "security.requireOsSandbox") +
                         ") but the launcher cannot apply it: " + blocker +
                         ", so no extension starts; enable it, or set security.requireOsSandbox to false in " +
                         r.where.dhara_home + "/config.json to let extensions run confined by the broker only");
}

health_report gather(const io::locations& where) {
  health_report r;
  r.where = where;
  if (auto unsafe = unsafe_mode(where.dhara_home)) r.problems.push_back(*unsafe);
  std::vector<std::string> own_warnings;
  bool config_ok = false;
  check_config(r, own_warnings, config_ok);
  auto perms = check_permissions_file(r);
  if (!perms) r.problems.push_back(r.permissions.error);
  if (auto unsafe = unsafe_mode(r.permissions.path)) r.problems.push_back(*unsafe);
  if (perms) own_warnings.insert(own_warnings.end(), perms->warnings.begin(), perms->warnings.end());

  if (config_ok && perms) {
    // The loader a session uses, so the report shows what a session would load.
    auto loaded = broker::load_policy(where, false);
    if (loaded) {
      r.warnings = loaded->warnings;
      // A skipped extension is reported with the extensions (and as a problem): its start's
      // warning would name it a third time.
      for (const broker::skipped_extension& sk : loaded->skipped)
        std::erase_if(r.warnings, [&](const std::string& w) {
          return w.starts_with("the extension in " + sk.folder + " is skipped: ");
        });
      check_extensions(r, *loaded);
    } else {
      r.warnings = own_warnings;
      r.extensions_not_checked = "dhara cannot load its policy: " + loaded.err().message;
      r.problems.push_back(loaded.err().message);
    }
  } else {
    r.warnings = own_warnings;
    r.extensions_not_checked = std::string("not checked: dhara refuses to start until ") +
                               (config_ok ? "permissions.json" : "the config") + " is fixed";
  }
  check_audit(r);
  check_sandbox(r);
  return r;
}

// ---- rendering ------------------------------------------------------------------------------------

json file_json(const file_check& c) {
  json j = {{"path", c.path}, {"state", to_string(c.state)}};
  if (!c.error.empty()) j["error"] = c.error;
  return j;
}

json names_json(policy::capability_set caps) {
  json a = json::array();
  caps.for_each([&](policy::capability c) { a.push_back(std::string(policy::to_string(c))); });
  return a;
}

json report_json(const health_report& r) {
  json out;
  out["healthy"] = r.problems.empty();
  out["dharaHome"] = r.where.dhara_home;
  json cfg = {{"global", file_json(r.global_config)}, {"projectRoot", r.where.project_root}};
  cfg["project"] = r.has_project_config ? file_json(r.project_config) : json(nullptr);
  if (r.settings) {
    cfg["level"] = std::string(policy::to_string(r.settings->level));
    cfg["projectTrusted"] = r.settings->project_trusted;
    cfg["requireOsSandbox"] = r.settings->require_os_sandbox;
  }
  out["config"] = cfg;
  out["warnings"] = r.warnings;
  json ext = {{"checked", r.extensions_checked}, {"started", false}};
  if (!r.extensions_checked) ext["reason"] = r.extensions_not_checked;
  json dirs = json::array();
  for (const auto& [d, exists] : r.extension_dirs) dirs.push_back({{"path", d}, {"exists", exists}});
  ext["dirs"] = dirs;
  json found = json::array();
  for (const auto& x : r.extensions) {
    json e = {{"name", x.name},
              {"version", x.version},
              {"folder", x.folder},
              {"fromProject", x.from_project},
              {"manifest", "valid"},
              {"command", x.command},
              {"state", std::string(to_string(x.state))},
              {"ready", x.state == readiness::ready},
              {"capabilities",
               {{"approved", names_json(x.approved)}, {"pending", names_json(x.pending)}, {"denied", names_json(x.denied)}}}};
    if (!x.executable.empty()) e["executable"] = x.executable;
    if (!x.reason.empty()) e["reason"] = x.reason;
    found.push_back(std::move(e));
  }
  ext["found"] = found;
  json skipped = json::array();
  for (const auto& s : r.skipped) skipped.push_back({{"folder", s.folder}, {"reason", s.reason}});
  ext["skipped"] = skipped;
  out["extensions"] = ext;
  json perms = file_json(r.permissions);
  if (r.permissions.state == file_state::valid) perms["entries"] = r.permission_entries;
  out["permissions"] = perms;
  json audit = {{"dir", r.where.dhara_home}, {"present", r.audit.present}, {"bytes", r.audit.bytes}};
  json files = json::array();
  for (const auto& [p, n] : r.audit.files) files.push_back({{"path", p}, {"bytes", n}});
  audit["files"] = files;
  if (!r.audit.error.empty()) audit["error"] = r.audit.error;
  if (const auto& v = r.audit.verification) {
    audit["verified"] = v->ok;
    audit["entries"] = v->lines;
    audit["firstSeq"] = v->first_seq;
    audit["lastSeq"] = v->last_seq;
    audit["anchored"] = v->anchored;
    audit["verifyMillis"] = r.audit.millis;
    if (!v->ok) audit["break"] = {{"file", v->first_bad_file}, {"line", v->first_bad_line}, {"why", v->why}};
  }
  out["audit"] = audit;
  const auto& s = r.sandbox;
  json sb = {{"level", std::string(io::to_string(io::level_of(s)))},
             {"applied", r.launcher_ok && !(r.settings && r.settings->level == policy::security_level::yolo)},
             {"launcher", r.launcher},
             {"landlockAbi", s.landlock_abi},
             {"seccomp", s.seccomp},
             {"seccompInherited", s.seccomp_inherited},
             {"userNamespaces", s.user_namespaces}};
  if (!s.landlock_detail.empty()) sb["landlockDetail"] = s.landlock_detail;
  if (!s.seccomp_detail.empty()) sb["seccompDetail"] = s.seccomp_detail;
  if (!s.user_namespaces_detail.empty()) sb["userNamespacesDetail"] = s.user_namespaces_detail;
  json losses = json::array();
  for (const auto& l : io::losses_of(s)) losses.push_back({{"missing", l.missing}, {"loses", l.loses}});
  sb["losses"] = losses;
  out["sandbox"] = sb;
  out["problems"] = r.problems;
  return out;
}

// One line of the text report: a status word in its colour, then the text.
class report_printer {
 public:
  explicit report_printer(style st) : st_(st) {}

  void section(std::string_view title) { std::printf("\n%s\n", st_.bold(title).c_str()); }
  void ok(std::string_view text) { line(st_.green("ok"), 2, text); }
  void info(std::string_view word, std::string_view text) { line(std::string(word), word.size(), text); }
  void warn(std::string_view word, std::string_view text) { line(st_.yellow(word), word.size(), text); }
  void bad(std::string_view word, std::string_view text) { line(st_.red(word), word.size(), text); }
  void more(std::string_view text) { std::printf("  %-9s %s\n", "", std::string(text).c_str()); }

 private:
  void line(const std::string& word, std::size_t visible, std::string_view text) {
    std::printf("  %s %s\n", pad(word, visible, 9).c_str(), std::string(text).c_str());
  }
  style st_;
};

void print_file(report_printer& p, std::string_view what, const file_check& c, std::string_view extra = {}) {
  std::string text = what.empty() ? c.path : std::string(what) + " " + c.path;
  switch (c.state) {
    case file_state::valid: p.ok(text + std::string(extra)); break;
    case file_state::absent: p.info("absent", text + " (defaults apply)"); break;
    case file_state::unreadable: p.bad("UNREADABLE", c.error); break;
    case file_state::invalid: p.bad("INVALID", c.error); break;
  }
}

void print_report(const health_report& r) {
  style st = style::for_stdout();
  report_printer p(st);
  std::printf("%s %s\n", st.bold("dhara doctor:").c_str(), r.where.dhara_home.c_str());

  p.section("Config");
  print_file(p, "global", r.global_config);
  if (r.has_project_config) print_file(p, "project", r.project_config);
  if (r.settings) {
    p.info("level", std::string(policy::to_string(r.settings->level)) +
                        (r.settings->require_os_sandbox ? "; OS sandbox required" : "; OS sandbox not required"));
    if (r.settings->project_trusted)
      p.info("project", r.where.project_root + " (trusted: its config may loosen security)");
    else
      p.info("project", r.where.project_root +
                            " (not trusted: its config may only tighten, its extensions are skipped)");
  } else {
    p.bad("level", "unknown until the config is fixed");
  }

  p.section("Warnings");
  if (r.warnings.empty()) p.ok("none");
  for (const std::string& w : r.warnings) p.warn("warn", w);

  p.section("Extensions (checked, not started: manifest, command and approvals)");
  if (!r.extensions_checked) {
    p.bad("skipped", r.extensions_not_checked);
  } else {
    for (const auto& [d, exists] : r.extension_dirs) p.info("dir", d + (exists ? "" : " (absent)"));
    if (r.extensions.empty() && r.skipped.empty()) p.info("none", "no extension found");
    for (const auto& x : r.extensions) {
      std::string head = x.name + " " + x.version + " (" + x.folder + ")";
      if (x.state == readiness::ready)
        p.ok(head + " ready to start");
      else if (x.state == readiness::blocked)
        p.warn("blocked", head);
      else
        p.bad("FAILED", head);
      if (!x.approved.empty()) p.more("approved: " + policy::join_names(x.approved));
      if (!x.reason.empty()) p.more(x.reason);
    }
    for (const auto& s : r.skipped) {
      if (skip_is_problem(r, s))
        p.bad("SKIPPED", s.folder + ": " + s.reason);
      else
        p.info("skipped", s.folder + ": " + s.reason);
    }
  }

  p.section("Permissions");
  print_file(p, "", r.permissions,
             r.permissions.state == file_state::valid
                 ? ": " + std::to_string(r.permission_entries) + (r.permission_entries == 1 ? " extension" : " extensions") +
                       " recorded"
                 : std::string());

  p.section("Audit trail");
  const audit_check& a = r.audit;
  if (!a.present) {
    p.info("absent", r.where.dhara_home + "/audit.jsonl (no entries yet)");
  } else {
    for (const auto& [path, bytes] : a.files) p.info("file", path + "  " + human_bytes(bytes));
    char took[64];
    std::snprintf(took, sizeof took, "%.0f ms", a.millis);
    if (!a.error.empty()) {
      p.bad("UNREADABLE", a.error);
    } else if (const auto& v = a.verification) {
      const std::string entries = std::to_string(v->lines) + (v->lines == 1 ? " entry" : " entries");
      std::string counts = entries + ", seq " + std::to_string(v->first_seq) + " to " +
                           std::to_string(v->last_seq) + ", " + human_bytes(a.bytes);
      if (v->ok) {
        p.ok(counts + "; hash chain verified in " + took +
             anchored_note(*v));
      } else {
        p.bad("BROKEN", v->first_bad_file + " line " + std::to_string(v->first_bad_line) + ": " + v->why);
        if (v->lines > 0)
          p.more("the " + entries + " before it verified (seq " + std::to_string(v->first_seq) +
                 " to " + std::to_string(v->last_seq) + ") in " + took);
      }
    }
  }

  const auto& s = r.sandbox;
  io::sandbox_level level = io::level_of(s);
  std::string level_text(io::to_string(level));
  p.section("OS sandbox: " + (level == io::sandbox_level::full ? st.green(level_text) : st.yellow(level_text)));
  if (s.landlock_abi > 0)
    p.ok("Landlock ABI " + std::to_string(s.landlock_abi));
  else
    p.warn("missing", "Landlock: " + s.landlock_detail);
  if (s.seccomp)
    p.ok(std::string("seccomp filters") +
         (s.seccomp_inherited ? " (dhara already runs under a seccomp filter, e.g. a container's: ours stack on it)" : ""));
  else
    p.warn("missing", "seccomp: " + s.seccomp_detail);
  if (s.user_namespaces)
    p.ok("user namespaces (unshare, id maps and a tmpfs mask probed in a child)");
  else
    p.warn("missing", "user namespaces: " + s.user_namespaces_detail);
  for (const auto& l : io::losses_of(s)) p.warn("loses", l.missing + ": " + l.loses);
  if (r.settings && r.settings->level == policy::security_level::yolo)
    p.info("note", "level yolo: extensions start without an OS sandbox");
  else if (r.launcher_ok)
    p.ok("extensions start through " + r.launcher + ", confined as far as this kernel allows");

  std::printf("\n");
  if (r.problems.empty()) {
    std::printf("%s\n", st.green("No problems found.").c_str());
    return;
  }
  std::printf("%s\n", st.red(st.bold("Problems (" + std::to_string(r.problems.size()) + "):")).c_str());
  for (std::size_t i = 0; i < r.problems.size(); ++i) std::printf("  %zu. %s\n", i + 1, r.problems[i].c_str());
}

int doctor_report(bool as_json) {
  auto where = io::discover_locations();
  if (!where) {
    std::fprintf(stderr, "dhara: %s\n", where.err().message.c_str());
    return 2;
  }
  health_report r = gather(*where);
  if (as_json)
    std::printf("%s\n", report_json(r).dump(2, ' ', false, json::error_handler_t::replace).c_str());
  else
    print_report(r);
  return r.problems.empty() ? 0 : 1;
}

}  // namespace

void add_doctor_command(CLI::App& app, command_context& ctx) {
  struct options {
    bool audit_log = false;
    audit_log_options audit;
    std::vector<CLI::Option*> audit_only;  // flags that mean nothing without --audit-log
  };
  auto o = std::make_shared<options>();
  auto* doctor = app.add_subcommand("doctor", "Health report; --audit-log shows, follows and verifies the audit trail");
  doctor->add_flag("--audit-log", o->audit_log, "Show recent audit entries (all rotated files)");
  o->audit_only = {
      doctor->add_option("--extension", o->audit.extension, "Only this extension"),
      doctor->add_flag("--denied-only", o->audit.denied_only, "Only denials"),
      doctor->add_option("--since", o->audit.since, "Only entries since a duration ago (30s, 15m, 1h, 2d) or an ISO time"),
      doctor->add_option("-n", o->audit.limit, "The last N entries (0: all)")->capture_default_str()->check(CLI::Range(0, 100000000)),
      doctor->add_flag("--follow,-f", o->audit.follow,
                       "After the listing, print new entries as they are appended (across rotation) until Ctrl-C"),
      doctor->add_flag("--verify", o->audit.verify, "Check seq and the hash chain; name the first bad line"),
  };
  doctor->add_flag("--json", o->audit.json, "One JSON object (the report), or raw JSON lines (--audit-log)");
  doctor->footer("Exit codes: 0 healthy, 1 problems found (listed at the end), 2 usage error.\n"
                 "Examples:\n  dhara doctor\n  dhara doctor --json\n  dhara doctor --audit-log\n"
                 "  dhara doctor --audit-log --extension web-tools\n"
                 "  dhara doctor --audit-log --denied-only --since 1h\n  dhara doctor --audit-log --follow\n"
                 "  dhara doctor --audit-log --verify");
  doctor->callback([&ctx, o] {
    ctx.action = [&ctx, o] {
      if (!o->audit_log) {
        // The suggestion is the whole command again, every filter given and its value included
        // (a review: copied as printed, it failed for the value it lacked, or dropped `-n 5`).
        std::string again;
        const CLI::Option* first = nullptr;
        for (const CLI::Option* opt : o->audit_only) {
          if (opt->count() == 0) continue;
          if (!first) first = opt;
          const bool takes_value = opt == o->audit_only[0] || opt == o->audit_only[2] || opt == o->audit_only[3];
          again += " " + opt->get_name();
          if (takes_value && !opt->results().empty()) again += " " + shell_word(opt->results().back());
        }
        if (first) {
          std::fprintf(stderr, "dhara: %s works only with --audit-log; run: dhara doctor --audit-log%s\n",
                       first->get_name().c_str(), again.c_str());
          return 2;
        }
        return doctor_report(o->audit.json);
      }
      // An empty value (a script's unset variable) would filter nothing and list every entry.
      for (const auto& [given, what] : {std::pair{o->audit_only[0], "an extension's name"},
                                        std::pair{o->audit_only[2], "a duration (30s, 15m, 1h, 2d) or an ISO time"}})
        if (given->count() > 0 && !given->results().empty() && given->results().back().empty()) {
          std::fprintf(stderr, "dhara: %s was given an empty value; give it %s, or leave it out\n",
                       given->get_name().c_str(), what);
          return 2;
        }
      if (o->audit.follow && o->audit.verify) {
        std::fprintf(stderr, "dhara: --follow and --verify do not go together; run them one after the other\n");
        return 2;
      }
      return doctor_audit_log(ctx.g, o->audit);
    };
  });
}

}  // namespace dhara::cli
