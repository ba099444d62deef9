// grep: a POSIX regex over the lines of a file or a folder tree. The gate checked only the
// root, so every folder entered and file read below it is checked with host/check, and links
// are never followed: what is searched is what dhara allowed.
#include <dirent.h>
#include <fcntl.h>
#include <regex.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "extensions/std/tools.hpp"
#include "policy/path_rules.hpp"

namespace dhara::stdext {
namespace {

constexpr std::int64_t default_results = 100;
constexpr std::int64_t max_results_cap = 1000;
constexpr std::size_t max_file_bytes = 16 * 1024 * 1024;  // larger files are skipped
constexpr std::size_t binary_probe_bytes = 8192;
constexpr std::size_t max_shown_line = 500;               // bytes of a matching line shown
constexpr std::size_t max_output = 64 * 1024;
constexpr int max_depth = 64;
constexpr std::size_t max_files = 20000;                  // files searched in one call

// \d and \D (common in agents' patterns, absent from POSIX) become bracket expressions;
// everything else is POSIX extended syntax with the GNU \w \s \b escapes.
std::string translate_pattern(std::string_view p) {
  std::string out;
  bool in_bracket = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (in_bracket) {
      out.push_back(c);
      if (c == '[' && i + 1 < p.size() && std::strchr(":.=", p[i + 1])) {  // [:alpha:] and kin
        std::size_t close = p.find(std::string{p[i + 1], ']'}, i + 2);
        if (close != std::string_view::npos) {
          out.append(p.substr(i + 1, close + 1 - i));
          i = close + 1;
        }
      } else if (c == ']') {
        in_bracket = false;
      }
    } else if (c == '\\' && i + 1 < p.size()) {
      char e = p[++i];
      if (e == 'd') out += "[0-9]";
      else if (e == 'D') out += "[^0-9]";
      else out += {c, e};
    } else if (c == '[') {
      in_bracket = true;
      out.push_back(c);
      if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
      if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);  // a leading ] is literal
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string_view cut_utf8(std::string_view s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return s.substr(0, end);
}

struct search {
  const call_context& ctx;
  regex_t re;
  std::optional<std::string> glob;
  std::size_t max_results;
  std::string out;
  std::size_t matches = 0, files = 0, binary = 0, large = 0, denied = 0, unreadable = 0;
  std::string first_denial, failure;  // failure: a host check that got no answer
  bool full = false;

  bool stopped() const { return full || !failure.empty() || ctx.call->cancelled; }

  // Asks dhara about an entry below the root; a denial skips it, no answer stops the search.
  bool allowed(const std::string& real) {
    std::string reason;
    switch (host_check(*ctx.call, "filesystem:read", real, reason)) {
      case host_verdict::allowed: return true;
      case host_verdict::denied:
        if (denied++ == 0) first_denial = reason;
        return false;
      case host_verdict::failed:
        if (!ctx.call->cancelled) failure = "cannot check '" + real + "' with dhara: " + reason;
        return false;
    }
    return false;
  }

  void file(int fd, const std::string& shown) {
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
    if (static_cast<std::size_t>(st.st_size) > max_file_bytes) {
      ++large;
      return;
    }
    std::string data;
    data.resize(static_cast<std::size_t>(st.st_size));
    std::size_t have = 0;
    while (have < data.size()) {
      ssize_t n = ::read(fd, data.data() + have, data.size() - have);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        ++unreadable;
        return;
      }
      if (n == 0) break;
      have += static_cast<std::size_t>(n);
    }
    data.resize(have);
    if (std::string_view(data).substr(0, binary_probe_bytes).find('\0') != std::string_view::npos) {
      ++binary;
      return;
    }
    ++files;
    std::size_t line_no = 0;
    for (std::size_t start = 0; start < data.size() && !full;) {
      std::size_t end = data.find('\n', start);
      if (end == std::string::npos) end = data.size();
      ++line_no;
      regmatch_t m[1];
      m[0].rm_so = 0;
      m[0].rm_eo = static_cast<regoff_t>(end - start);
      if (::regexec(&re, data.data() + start, 1, m, REG_STARTEND) == 0) {
        std::string_view line(data.data() + start, end - start);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        std::string_view shown_line = cut_utf8(line, max_shown_line);
        std::string hit = shown + ":" + std::to_string(line_no) + ": " + std::string(shown_line) +
                          (shown_line.size() < line.size() ? " […]" : "") + "\n";
        if (out.size() + hit.size() > max_output) {
          full = true;
          break;
        }
        out += hit;
        if (++matches >= max_results) full = true;
      }
      start = end + 1;
    }
    if (files >= max_files) full = true;
  }

  // Searches the open folder `fd` (taken over), whose path is `real` and is shown as `shown`.
  void folder(int fd, const std::string& real, const std::string& rel, const std::string& shown, int depth) {
    DIR* dir = ::fdopendir(fd);
    if (!dir) {
      ::close(fd);
      ++unreadable;
      return;
    }
    std::vector<std::string> names;
    while (dirent* d = ::readdir(dir))
      if (std::strcmp(d->d_name, ".") != 0 && std::strcmp(d->d_name, "..") != 0) names.emplace_back(d->d_name);
    std::sort(names.begin(), names.end());  // the same tree gives the same output
    for (const std::string& name : names) {
      if (stopped()) break;
      struct stat st;
      if (::fstatat(::dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      std::string child_real = (real == "/" ? "" : real) + "/" + name;
      std::string child_rel = rel + "/" + name;
      std::string child_shown = shown == "." ? name : (shown.ends_with('/') ? shown : shown + "/") + name;
      if (S_ISDIR(st.st_mode)) {
        if (name == ".git" || depth >= max_depth || !allowed(child_real)) continue;
        int sub = open_no_links(::dirfd(dir), name.c_str(), O_RDONLY | O_DIRECTORY);
        if (sub < 0) ++unreadable;
        else folder(sub, child_real, child_rel, child_shown, depth + 1);
      } else if (S_ISREG(st.st_mode)) {  // symlinks and devices are never followed or read
        if (glob && !policy::glob_match(*glob, child_rel)) continue;
        if (!allowed(child_real)) continue;
        int f = open_no_links(::dirfd(dir), name.c_str(), O_RDONLY | O_NONBLOCK);
        if (f < 0) {
          ++unreadable;
          continue;
        }
        file(f, child_shown);
        ::close(f);
      }
    }
    ::closedir(dir);
  }
};

std::string count(std::size_t n, const char* what) { return std::to_string(n) + " " + what; }

}  // namespace

tool_result run_grep(const json& input, const call_context& ctx) {
  std::string pattern = required_string(input, "pattern");
  std::optional<std::string> glob = string_input(input, "glob");
  bool icase = bool_input(input, "ignoreCase", false);
  auto max_results = integer_input(input, "maxResults", 1, max_results_cap).value_or(default_results);
  if (pattern.find('\0') != std::string::npos) return tool_failure("the pattern holds a NUL byte");

  tool_result refused;
  auto root = listing_root(input, ctx, refused);
  if (!root) return refused;
  std::string shown = string_input(input, "path").value_or(".");

  search s{ctx, {}, glob, static_cast<std::size_t>(max_results), {}, 0, 0, 0, 0, 0, 0, {}, {}, false};
  int rc = ::regcomp(&s.re, translate_pattern(pattern).c_str(), REG_EXTENDED | REG_NEWLINE | (icase ? REG_ICASE : 0));
  if (rc != 0) {
    char why[256];
    ::regerror(rc, &s.re, why, sizeof why);
    return tool_failure("the pattern is not a valid regular expression: " + std::string(why));
  }
  int fd = open_no_links(AT_FDCWD, root->real.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd < 0) {
    ::regfree(&s.re);
    return tool_failure("cannot search " + errno_sentence(shown, errno));
  }
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    s.folder(fd, root->real, "", shown, 0);
  } else {
    s.file(fd, shown);  // a file named explicitly is searched whatever the glob says
    ::close(fd);
  }
  ::regfree(&s.re);

  if (ctx.call->cancelled) return cancelled();
  if (!s.failure.empty()) return tool_failure(s.failure);
  std::string text = s.matches ? std::move(s.out) : "no matches\n";
  std::vector<std::string> notes;
  if (s.full && s.files >= max_files && s.matches < s.max_results)
    notes.push_back("stopped after searching " + count(s.files, "files") + "; narrow the search with path or glob");
  else if (s.full)
    notes.push_back("stopped after " + count(s.matches, "matches") + "; narrow the search or raise maxResults");
  if (s.binary) notes.push_back(count(s.binary, "binary files skipped"));
  if (s.large) notes.push_back(count(s.large, "files over 16 MiB skipped"));
  if (s.unreadable) notes.push_back(count(s.unreadable, "entries could not be read"));
  if (s.denied) notes.push_back(count(s.denied, "entries denied by dhara's policy, e.g.: ") + s.first_denial);
  for (const std::string& n : notes) text += "[" + n + "]\n";
  json meta = {{"matches", s.matches}, {"filesSearched", s.files}, {"truncated", s.full},
               {"skippedBinary", s.binary}, {"skippedDenied", s.denied}};
  return {std::move(text), false, std::move(meta), 0, nullptr};
}

}  // namespace dhara::stdext
