// The audit line serializer (a hot path: hand-written JSON appended straight into the
// caller's buffer, no nlohmann, no gmtime) and the ignore-pattern filter.
#include "policy/audit_entry.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "policy/json_bytes.hpp"
#include "policy/path_rules.hpp"

namespace dhara::policy {

std::string_view to_string(audit_action a) {
  switch (a) {
    case audit_action::allowed: return "allowed";
    case audit_action::denied: return "denied";
  }
  return "denied";  // an out-of-range value is treated as a denial everywhere in this file
}

namespace {

// ---- JSON string escaping -------------------------------------------------------------

using json_bytes::copy_plain;
using json_bytes::next_utf8;
using json_bytes::skip_plain;
using json_bytes::utf8_step;

constexpr char hex_digits[] = "0123456789abcdef";

// Writes `s` at `p` (a literal: its length is known where this is inlined) and returns the end.
[[gnu::always_inline]] inline char* put(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

// Where escape() writes. `in` is where the input stands; escaped() replaces the `n` bytes
// from there with `e`. Bytes that go out unchanged are written as they are passed, or later.
//
// room_out: through a pointer, into room made beforehand for the worst case (an audit line).
struct room_out {
  char* p;
  void plain(const char*& in, const char* end) { copy_plain(in, end, p); }
  void unchanged(const char*& in, std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) *p++ = in[k];
    in += n;
  }
  void escaped(const char*, std::size_t, std::string_view e) { p = put(p, e); }
  void done(const char*) {}
};

// string_out: appended to a std::string, each run of unchanged bytes at once
// (append_json_string, whose callers make no room).
struct string_out {
  std::string& s;
  const char* run;  // the first unchanged byte not yet appended
  void plain(const char*& in, const char* end) { in = skip_plain(in, end); }
  void unchanged(const char*& in, std::size_t n) { in += n; }
  void escaped(const char* in, std::size_t n, std::string_view e) {
    s.append(run, static_cast<std::size_t>(in - run));
    s.append(e.data(), e.size());
    run = in + n;
  }
  void done(const char* in) { s.append(run, static_cast<std::size_t>(in - run)); }
};

// Room a room_out needs: 6 bytes a byte escaped at worst (`\u001f`, or `\ufffd` for an
// invalid byte), and past the end of what it writes, 8 for the whole words copy_plain stores.
constexpr std::size_t escaped_bytes_at_most = 6;
constexpr std::size_t store_slack = 8;

// Writes the bytes [p, end) to `out` as the inside of a JSON string literal (see
// append_json_string).
template <class Out>
void escape(Out& out, const char* p, const char* const end) {
  for (;;) {
    out.plain(p, end);
    if (p == end) return out.done(p);
    const auto c = static_cast<unsigned char>(*p);
    if (c < 0x80) {
      switch (c) {
        case '"': out.escaped(p, 1, "\\\""); break;
        case '\\': out.escaped(p, 1, "\\\\"); break;
        case '\n': out.escaped(p, 1, "\\n"); break;
        case '\r': out.escaped(p, 1, "\\r"); break;
        case '\t': out.escaped(p, 1, "\\t"); break;
        case '\b': out.escaped(p, 1, "\\b"); break;
        case '\f': out.escaped(p, 1, "\\f"); break;
        default: {
          const char u[6] = {'\\', 'u', '0', '0', hex_digits[c >> 4], hex_digits[c & 0xF]};
          out.escaped(p, 1, {u, sizeof u});
        }
      }
      ++p;
      continue;
    }
    const auto* u = reinterpret_cast<const unsigned char*>(p);
    const utf8_step step = next_utf8(u, reinterpret_cast<const unsigned char*>(end));
    if (!step.valid) {
      out.escaped(p, step.length, "\\ufffd");
    } else if (step.length == 3 && c == 0xE2 && u[1] == 0x80 && (u[2] == 0xA8 || u[2] == 0xA9)) {
      // U+2028/U+2029 are valid JSON but end a line in JavaScript: escaped.
      out.escaped(p, 3, u[2] == 0xA8 ? std::string_view("\\u2028") : std::string_view("\\u2029"));
    } else {
      out.unchanged(p, step.length);
      continue;
    }
    p += step.length;
  }
}

// A JSON string literal of `s` at `out`: at most 6 * s.size() + 2 bytes, and store_slack more
// of room past them.
inline char* put_json_string(char* out, std::string_view s) {
  *out++ = '"';
  room_out r{out};
  escape(r, s.data(), s.data() + s.size());
  *r.p++ = '"';
  return r.p;
}

// ---- timestamps (Howard Hinnant's civil calendar algorithms) ----------------------------

struct civil_date {
  std::int64_t year;
  unsigned month;
  unsigned day;
};

constexpr civil_date civil_from_days(std::int64_t z) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2 ? 1 : 0), m, d};
}

constexpr std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

constexpr std::int64_t ms_per_day = 86'400'000;
constexpr std::int64_t min_timestamp_ms = days_from_civil(0, 1, 1) * ms_per_day;
constexpr std::int64_t max_timestamp_ms = days_from_civil(10000, 1, 1) * ms_per_day - 1;
static_assert(min_timestamp_ms == -62'167'219'200'000);
static_assert(max_timestamp_ms == 253'402'300'799'999);
static_assert(civil_from_days(0).year == 1970 && civil_from_days(-1).day == 31);

inline void put2(char* p, unsigned v) {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
}

// Writes the calendar part, "YYYY-MM-DDTHH:MM:" (17 characters), of minute `minute` since
// the epoch (floor), within the clamp.
void write_minute(char* p, std::int64_t minute) {
  constexpr std::int64_t minutes_per_day = 1440;
  std::int64_t days = minute / minutes_per_day;
  std::int64_t in_day = minute % minutes_per_day;
  if (in_day < 0) in_day += minutes_per_day, --days;  // floor, so 1969 counts forward from midnight
  const civil_date date = civil_from_days(days);
  const auto year = static_cast<unsigned>(date.year);  // 0..9999 after the clamp
  const auto t = static_cast<unsigned>(in_day);
  put2(p, year / 100);
  put2(p + 2, year % 100);
  p[4] = '-';
  put2(p + 5, date.month);
  p[7] = '-';
  put2(p + 8, date.day);
  p[10] = 'T';
  put2(p + 11, t / 60);
  p[13] = ':';
  put2(p + 14, t % 60);
  p[16] = ':';
}

constexpr std::size_t minute_bytes = 17;

// The calendar part of the last minute this thread wrote: a session's lines mostly share it,
// and the calendar arithmetic was most of a timestamp's cost. Per thread, so no lock; the
// key is the whole minute, so a clock that steps back or forth only misses the cache.
struct minute_cache {
  std::int64_t minute = std::numeric_limits<std::int64_t>::min();  // no clamped time is this
  char text[minute_bytes];
};
thread_local minute_cache last_minute;

// Writes exactly audit_timestamp_bytes characters.
void write_timestamp(char* p, std::int64_t unix_ms) {
  const std::int64_t ms = std::clamp(unix_ms, min_timestamp_ms, max_timestamp_ms);
  std::int64_t minute = ms / 60'000;
  std::int64_t in_minute = ms % 60'000;
  if (in_minute < 0) in_minute += 60'000, --minute;  // floor, as for days
  minute_cache& cache = last_minute;
  if (cache.minute != minute) {
    write_minute(cache.text, minute);
    cache.minute = minute;
  }
  std::memcpy(p, cache.text, minute_bytes);
  const auto t = static_cast<unsigned>(in_minute);
  put2(p + 17, t / 1000);
  p[19] = '.';
  const unsigned milli = t % 1000;
  p[20] = static_cast<char>('0' + milli / 100);
  put2(p + 21, milli % 100);
  p[23] = 'Z';
}

// ---- the line ---------------------------------------------------------------------------

inline void append_literal(std::string& out, std::string_view s) { out.append(s.data(), s.size()); }

// The path part of "scheme://authority/path?query#fragment" ("/" when absent), or empty
// when `url` has no "://".
std::string_view url_path(std::string_view url) {
  const std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return {};
  const std::size_t start = url.find_first_of("/?#", scheme_end + 3);
  if (start == std::string_view::npos || url[start] != '/') return "/";
  const std::size_t stop = url.find_first_of("?#", start);
  return url.substr(start, stop == std::string_view::npos ? std::string_view::npos : stop - start);
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  string_out o{out, s.data()};
  escape(o, s.data(), s.data() + s.size());
  out.push_back('"');
}

std::string format_timestamp(std::int64_t unix_ms) {
  std::string s(audit_timestamp_bytes, '\0');
  write_timestamp(s.data(), unix_ms);
  return s;
}

namespace {

// Where a line is written. A line whose strings hold at most line_bytes_limit bytes is written
// through a pointer into room made for its worst case at once (no capacity check a piece: the
// usual line); a longer one through std::string's appends, so that its room is never six times
// a large string.
struct room_sink {
  char* p;
  void literal(std::string_view s) { p = put(p, s); }
  void text(std::string_view s) { p = put_json_string(p, s); }
  void byte(char c) { *p++ = c; }
  void timestamp(std::int64_t ms) {
    write_timestamp(p, ms);
    p += audit_timestamp_bytes;
  }
};

struct string_sink {
  std::string& out;
  void literal(std::string_view s) { append_literal(out, s); }
  void text(std::string_view s) {
    if (s.size() <= audit_string_bytes_max) return append_json_string(out, s);
    // Cut at a character's first byte, and said so: a call's input of megabytes (a path, a
    // URL of U+2028, each escaped to 6 bytes) made a line longer than dhara's own readers
    // take, and every later session refused the trail (a review).
    std::size_t keep = audit_string_bytes_max;
    while (keep > 0 && (static_cast<unsigned char>(s[keep]) & 0xC0) == 0x80) --keep;
    std::string cut(s.substr(0, keep));
    cut += "… (cut by dhara: " + std::to_string(s.size()) + " bytes in all)";
    append_json_string(out, cut);
  }
  void byte(char c) { out.push_back(c); }
  void timestamp(std::int64_t ms) {
    char t[audit_timestamp_bytes];
    write_timestamp(t, ms);
    out.append(t, sizeof t);
  }
};

constexpr std::string_view key_timestamp = R"({"timestamp":")";
constexpr std::string_view key_extension = R"(","extension":)";
constexpr std::string_view key_capability = R"(,"capability":)";
constexpr std::string_view key_denied = R"(,"action":"denied","details":{)";
constexpr std::string_view key_allowed = R"(,"action":"allowed","details":{)";
constexpr std::string_view key_reason = R"(,"reason":)";
constexpr std::string_view key_decided_by = R"(,"decidedBy":")";
constexpr std::string_view key_tool = R"(,"tool":)";
constexpr std::string_view key_tool_call_id = R"(,"toolCallId":)";
constexpr std::string_view key_session = R"(,"session":)";
constexpr std::string_view key_seq = R"(,"seq":)";

// Every byte a line has besides its strings and its decider's name: the keys, the timestamp,
// the closing brace of details, the missing reason with its quotes, the decider's closing
// quote.
constexpr std::size_t line_fixed_room =
    key_timestamp.size() + audit_timestamp_bytes + key_extension.size() + key_capability.size() +
    std::max(key_denied.size(), key_allowed.size()) + 1 + key_reason.size() + audit_missing_reason.size() + 2 +
    key_decided_by.size() + 1 + key_tool.size() + key_tool_call_id.size() + key_session.size() + key_seq.size();
constexpr std::size_t line_bytes_limit = 16 * 1024;

// The most bytes line `e` can take with store_slack past them, or 0 when its strings hold more
// than line_bytes_limit.
template <class Entry>
std::size_t line_room(const Entry& e) {
  std::size_t bytes = e.extension.size() + e.capability.size() + e.reason.size() + e.tool.size() +
                      e.tool_call_id.size() + e.session.size();
  std::size_t strings = 6;
  for (const auto& [key, value] : e.details) {
    bytes += key.size() + value.size();
    strings += 2;
    if (bytes > line_bytes_limit) return 0;
  }
  if (bytes > line_bytes_limit) return 0;
  // Each string's two quotes, each detail's ',' and ':'.
  return line_fixed_room + to_string(e.decided_by).size() + escaped_bytes_at_most * bytes + 2 * strings +
         2 * e.details.size() + store_slack;
}

// The line up to `"seq":`, for an audit_entry or an audit_entry_view (the same members).
template <class Entry, class Sink>
void write_prefix(Sink& out, const Entry& entry) {
  const bool denied = entry.action != audit_action::allowed;
  out.literal(key_timestamp);
  out.timestamp(entry.timestamp_ms);
  out.literal(key_extension);
  out.text(entry.extension);
  out.literal(key_capability);
  out.text(entry.capability);
  out.literal(denied ? key_denied : key_allowed);
  bool first = true;
  for (const auto& [key, value] : entry.details) {
    if (!first) out.byte(',');
    first = false;
    out.text(key);
    out.byte(':');
    out.text(value);
  }
  out.byte('}');
  if (!entry.reason.empty()) {
    out.literal(key_reason);
    out.text(entry.reason);
  } else if (denied) {
    out.literal(key_reason);
    out.byte('"');
    out.literal(audit_missing_reason);
    out.byte('"');
  }
  out.literal(key_decided_by);
  out.literal(to_string(entry.decided_by));
  out.byte('"');
  if (!entry.tool.empty()) out.literal(key_tool), out.text(entry.tool);
  if (!entry.tool_call_id.empty()) out.literal(key_tool_call_id), out.text(entry.tool_call_id);
  if (!entry.session.empty()) out.literal(key_session), out.text(entry.session);
  out.literal(key_seq);
}

// Appends the line to `out`, or, should an allocation fail, leaves `out` as it was.
template <class Entry>
void append_prefix(std::string& out, const Entry& entry) {
  const std::size_t at = out.size();
  try {
    const std::size_t room = line_room(entry);
    if (room == 0) {
      string_sink sink{out};
      write_prefix(sink, entry);
      return;
    }
    // Grown geometrically, so that a caller batching many lines never copies a line.
    if (out.capacity() - at < room) out.reserve(std::max(at + room, 2 * out.capacity()));
    out.resize(at + room);
    room_sink sink{out.data() + at};
    write_prefix(sink, entry);
    const auto written = static_cast<std::size_t>(sink.p - (out.data() + at));
    // After the fact, so for tests (ASan sees the write itself): line_room was too small.
    if (written + store_slack > room) std::abort();
    out.resize(at + written);
  } catch (...) {
    out.resize(at);
    throw;
  }
}

// A line into `text` and its end into `ends`, both or neither.
template <class Entry>
void add_line(std::string& text, std::vector<std::size_t>& ends, const Entry& entry) {
  const std::size_t at = text.size();
  append_prefix(text, entry);
  try {
    ends.push_back(text.size());
  } catch (...) {
    text.resize(at);
    throw;
  }
}

}  // namespace

void append_audit_body(std::string& out, const audit_entry& entry) {
  append_prefix(out, entry);
  char digits[20];  // 2^64-1 has 20 digits
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, entry.seq);
  (void)ec;  // cannot fail: the buffer holds any uint64
  out.append(digits, end);
}

void audit_lines::add(const audit_entry& entry) { add_line(text_, ends_, entry); }

void audit_lines::add(const audit_entry_view& entry) { add_line(text_, ends_, entry); }

void audit_lines::add(const audit_lines& other) {
  const std::size_t base = text_.size();
  text_.append(other.text_);
  ends_.reserve(ends_.size() + other.ends_.size());
  for (const std::size_t end : other.ends_) ends_.push_back(base + end);
}

void audit_lines::move_tail(std::size_t first, audit_lines& into) {
  if (first >= ends_.size()) return;
  const std::size_t begin = first == 0 ? 0 : ends_[first - 1];
  const std::size_t at = into.text_.size();
  into.text_.append(text_, begin, std::string::npos);
  for (std::size_t i = first; i < ends_.size(); ++i) into.ends_.push_back(at + (ends_[i] - begin));
  text_.resize(begin);
  ends_.resize(first);
}

void audit_lines::reserve(std::size_t lines, std::size_t bytes) {
  ends_.reserve(lines);
  // A line is written into room made for its worst case, ~6 times its strings: room for that
  // past `bytes`, or the last of `lines` lines as long as their average would grow the text,
  // copying every line before it.
  const std::size_t average = lines == 0 ? 0 : bytes / lines;
  text_.reserve(bytes + 6 * average + line_fixed_room + 256);
}

void audit_lines::clear() {
  text_.clear();
  ends_.clear();
}

void append_audit_suffix(std::string& out, std::string_view hash_hex) {
  append_literal(out, R"(,"hash":")");
  append_literal(out, hash_hex);
  append_literal(out, "\"}\n");
}

namespace {

// A subject matches an ignore pattern only in the form a reader of the trail would take it
// for: an agent or an extension chooses what it writes, so nothing it could add (a `..`, a
// link, a query) may carry an allowed check out of the trail (two reviews, 2026-12-07).
bool path_ignored(std::string_view value, std::string_view resolved, const std::vector<std::string>& patterns) {
  auto matches = [&](std::string_view subject) {
    for (const std::string& pattern : patterns)
      if (!pattern.empty() && glob_match_at_or_under(pattern, subject)) return true;
    return false;
  };
  // The path the check resolved (links followed, `..` taken) must match: a link under
  // node_modules that leads to `.env`, or `node_modules/../.env`, is audited as `.env`.
  if (!resolved.empty() && !matches(resolved)) return false;
  // As written, normalized: an absolute path must match too; a relative one without a
  // resolution is kept (what it names depends on a folder this entry does not say).
  std::string normalized;
  if (!value.empty() && value.front() == '/') return normalize_path_into(value, "/", normalized) && matches(normalized);
  return !resolved.empty();
}

// Whether `pattern` names a URL's scheme and host literally (`https://registry.npmjs.org/**`):
// its first glob character comes after the slash that ends the host. Only such a pattern drops
// a URL's entry. A folder glob matched the path of a fetch to any host, so the seed's own
// `**/node_modules/**` kept `http://203.0.113.7/node_modules/<secret>` out of the trail: the
// host is what a reader of the trail must see (a review).
bool names_its_host(std::string_view pattern) {
  const std::size_t scheme_end = pattern.find("://");
  if (scheme_end == std::string_view::npos || scheme_end == 0) return false;
  const std::size_t host_end = pattern.find('/', scheme_end + 3);
  if (host_end == std::string_view::npos || host_end == scheme_end + 3) return false;
  const std::size_t glob = first_glob_char(pattern);
  return glob == std::string_view::npos || glob > host_end;
}

bool url_ignored(std::string_view value, const std::vector<std::string>& patterns) {
  // Matched without its query and fragment, and never with a '%' or a dot segment in its path,
  // which the server may read as another path than the one matched.
  const std::size_t cut = value.find_first_of("?#");
  const std::string_view url = value.substr(0, cut);
  const std::string_view path = url_path(url);
  if (url.find('%') != std::string_view::npos) return false;
  std::string normalized;
  if (!path.empty() && (!normalize_path_into(path, "/", normalized) ||
                        (normalized != path && normalized + "/" != path)))
    return false;
  for (const std::string& pattern : patterns)
    if (names_its_host(pattern) && glob_match(pattern, url)) return true;
  return false;
}

template <class Entry>
bool ignored(const Entry& entry, const std::vector<std::string>& patterns, std::string_view resolved) {
  if (entry.action != audit_action::allowed || patterns.empty()) return false;
  for (const auto& [key, value] : entry.details) {
    if (key == "path" ? path_ignored(value, resolved, patterns) : key == "url" && url_ignored(value, patterns))
      return true;
  }
  return false;
}

}  // namespace

bool is_ignored(const audit_entry& entry, const std::vector<std::string>& patterns, std::string_view resolved) {
  return ignored(entry, patterns, resolved);
}
bool is_ignored(const audit_entry_view& entry, const std::vector<std::string>& patterns, std::string_view resolved) {
  return ignored(entry, patterns, resolved);
}

audit_entry user_decision_entry(std::int64_t timestamp_ms, std::string extension, std::string capability,
                                bool allowed, std::string detail_key, std::string detail_value,
                                std::string denial_reason) {
  audit_entry e;
  e.timestamp_ms = timestamp_ms;
  e.extension = std::move(extension);
  e.capability = std::move(capability);
  e.action = allowed ? audit_action::allowed : audit_action::denied;
  e.details = {{std::move(detail_key), std::move(detail_value)}};
  if (!allowed) e.reason = std::move(denial_reason);
  e.decided_by = decider::user;
  return e;
}

}  // namespace dhara::policy
