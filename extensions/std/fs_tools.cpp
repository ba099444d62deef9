// read, write, edit, ls: file tools on paths resolved exactly as the gate checked them.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <vector>

#include "extensions/std/tools.hpp"

namespace dhara::stdext {
namespace {

constexpr std::int64_t read_default_lines = 2000;
constexpr std::size_t read_max_bytes = 256 * 1024;     // text one read returns
constexpr std::size_t binary_probe_bytes = 8192;       // a NUL in these means binary
constexpr std::size_t edit_max_bytes = 16 * 1024 * 1024;
constexpr std::size_t ls_max_entries = 2000;

// `s` cut to at most `max` bytes without splitting a UTF-8 sequence.
std::string_view cut_utf8(std::string_view s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return s.substr(0, end);
}

std::string plural(std::size_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// Collects the lines [offset, offset + limit) of a stream within read_max_bytes.
struct line_window {
  std::int64_t offset = 1, limit = read_default_lines;
  std::int64_t line = 0;        // lines seen so far
  std::int64_t last_shown = 0;  // 0: none yet
  std::string text;
  std::string note;             // why it stopped early, "" when it did not
  std::int64_t next_offset = 0;

  // Takes one whole line (without its newline); false once the window is full.
  bool take(std::string_view content, bool newline) {
    ++line;
    if (line < offset) return true;
    if (line >= offset + limit) return stop(line, "the limit of " + plural(std::size_t(limit), "line") + " was reached");
    if (text.size() + content.size() + 1 > read_max_bytes) {
      if (last_shown == 0) {  // a single line over the cap: show its start
        text = cut_utf8(content, read_max_bytes);
        last_shown = line;
        return stop(line + 1, "line " + std::to_string(line) + " is longer than 256 KiB; only its start is shown");
      }
      return stop(line, "the 256 KiB output limit was reached");
    }
    text.append(content);
    if (newline) text.push_back('\n');
    last_shown = line;
    return true;
  }

  bool stop(std::int64_t next, std::string why) {
    next_offset = next;
    note = std::move(why);
    return false;
  }
};

std::string format_ls_entry(const std::string& name, const struct stat& st, const std::string& link_target) {
  if (S_ISDIR(st.st_mode)) return name + "/";
  if (S_ISLNK(st.st_mode)) return name + " -> " + link_target;
  if (S_ISREG(st.st_mode)) return name + " (" + plural(std::size_t(st.st_size), "byte") + ")";
  return name + " (other)";
}

const char* type_name(mode_t mode) {
  if (S_ISREG(mode)) return "file";
  if (S_ISDIR(mode)) return "dir";
  if (S_ISLNK(mode)) return "symlink";
  return "other";
}

}  // namespace

tool_result run_read(const json& input, const call_context& ctx) {
  std::string raw = required_string(input, "path");
  line_window w;
  w.offset = integer_input(input, "offset", 1, INT64_MAX - 1'000'000).value_or(1);
  w.limit = integer_input(input, "limit", 1, 1'000'000).value_or(read_default_lines);
  auto path = resolve_input_path(raw, ctx.cwd);
  if (!path) return tool_failure(path.err().message);
  auto fd = open_regular_file(*path);
  if (!fd) return tool_failure(fd.err().message);

  std::string partial;  // the current line so far, kept only up to what could be shown
  bool first_chunk = true, more = true;
  char buf[65536];
  while (more) {
    ssize_t n = ::read(*fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int saved = errno;
      ::close(*fd);
      return tool_failure("cannot read " + errno_sentence(raw, saved));
    }
    std::string_view chunk(buf, static_cast<std::size_t>(n));
    if (first_chunk && looks_binary(chunk.substr(0, binary_probe_bytes))) {
      ::close(*fd);
      return tool_failure("'" + raw + "' looks like a binary file (it holds NUL bytes); read only shows text");
    }
    first_chunk = false;
    if (n == 0) {
      if (!partial.empty()) w.take(partial, false);
      break;
    }
    while (more && !chunk.empty()) {
      std::size_t nl = chunk.find('\n');
      std::string_view piece = chunk.substr(0, nl);
      if (partial.size() <= read_max_bytes) partial.append(piece.substr(0, read_max_bytes + 1 - partial.size()));
      if (nl == std::string_view::npos) break;
      more = w.take(partial, true);
      partial.clear();
      chunk.remove_prefix(nl + 1);
    }
  }
  ::close(*fd);

  if (w.last_shown == 0 && w.line > 0 && w.offset > w.line)
    return tool_failure("offset " + std::to_string(w.offset) + " is past the end of '" + raw + "', which has " +
                        plural(std::size_t(w.line), "line"));
  json meta = {{"path", raw}, {"startLine", w.last_shown ? w.offset : 0}, {"endLine", w.last_shown},
               {"truncated", !w.note.empty()}};
  std::string text = std::move(w.text);
  if (!w.note.empty()) {
    meta["nextOffset"] = w.next_offset;
    if (!text.empty() && text.back() != '\n') text.push_back('\n');
    text += "[showing lines " + std::to_string(w.offset) + "-" + std::to_string(w.last_shown) + ": " + w.note +
            "; continue with offset=" + std::to_string(w.next_offset) + "]";
  }
  return {std::move(text), false, std::move(meta), 0, nullptr};
}

tool_result run_write(const json& input, const call_context& ctx) {
  std::string raw = required_string(input, "path");
  std::string content = required_string(input, "content");
  auto path = resolve_input_path(raw, ctx.cwd);
  if (!path) return tool_failure(path.err().message);
  auto created = replace_file(*path, content, /*make_parents=*/true);
  if (!created) return tool_failure(created.err().message);
  return {"wrote " + plural(content.size(), "byte") + " to '" + raw + "'" + (*created ? " (new file)" : ""), false,
          json{{"path", raw}, {"bytesWritten", content.size()}, {"created", *created}}, 0, nullptr};
}

tool_result run_edit(const json& input, const call_context& ctx) {
  std::string raw = required_string(input, "path");
  std::string old_text = required_string(input, "oldText");
  std::string new_text = required_string(input, "newText");
  bool all = bool_input(input, "replaceAll", false);
  if (old_text.empty()) return tool_failure("oldText is empty; give the exact text to replace");
  auto path = resolve_input_path(raw, ctx.cwd);
  if (!path) return tool_failure(path.err().message);
  auto content = read_regular_file(*path, edit_max_bytes);
  if (!content) return tool_failure(content.err().message);
  if (looks_binary(std::string_view(*content).substr(0, binary_probe_bytes)))
    return tool_failure("'" + raw + "' looks like a binary file (it holds NUL bytes); edit only changes text");

  std::vector<std::size_t> hits;
  for (std::size_t at = content->find(old_text); at != std::string::npos; at = content->find(old_text, at + old_text.size()))
    hits.push_back(at);
  if (hits.empty())
    return tool_failure("oldText was not found in '" + raw + "'; it must match the file exactly, whitespace included");
  if (hits.size() > 1 && !all)
    return tool_failure("oldText occurs " + std::to_string(hits.size()) + " times in '" + raw +
                        "'; include more surrounding text to make it unique, or set replaceAll to replace every one");
  std::string updated;
  updated.reserve(content->size() + hits.size() * new_text.size());
  std::size_t from = 0;
  for (std::size_t at : hits) {
    updated.append(*content, from, at - from);
    updated.append(new_text);
    from = at + old_text.size();
  }
  updated.append(*content, from);
  auto written = replace_file(*path, updated, /*make_parents=*/false);
  if (!written) return tool_failure(written.err().message);
  return {"replaced " + plural(hits.size(), "occurrence") + " in '" + raw + "'", false,
          json{{"path", raw}, {"replacements", hits.size()}, {"bytesWritten", updated.size()}}, 0, nullptr};
}

tool_result run_ls(const json& input, const call_context& ctx) {
  tool_result refused;
  auto root = listing_root(input, ctx, refused);
  if (!root) return refused;
  std::string shown = string_input(input, "path").value_or(".");

  struct entry {
    std::string name, line;
    json meta;
  };
  std::vector<entry> entries;
  auto add = [&](int dirfd, const std::string& name, const std::string& at) {
    struct stat st;
    if (::fstatat(dirfd, at.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;  // gone meanwhile
    std::string target;
    if (S_ISLNK(st.st_mode)) {
      char buf[PATH_MAX];
      ssize_t n = ::readlinkat(dirfd, at.c_str(), buf, sizeof buf);
      if (n > 0) target.assign(buf, static_cast<std::size_t>(n));
    }
    json meta = {{"name", name}, {"type", type_name(st.st_mode)}, {"size", st.st_size}};
    if (S_ISLNK(st.st_mode)) meta["target"] = target;
    entries.push_back({name, format_ls_entry(name, st, target), std::move(meta)});
  };

  int fd = open_no_links(AT_FDCWD, root->real.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0 && errno == ENOTDIR) {  // a file: list just that entry
    add(AT_FDCWD, shown, root->real);
  } else if (fd < 0) {
    return tool_failure("cannot list " + errno_sentence(shown, errno));
  } else {
    DIR* dir = ::fdopendir(fd);
    if (!dir) {
      int saved = errno;
      ::close(fd);
      return tool_failure("cannot list " + errno_sentence(shown, saved));
    }
    while (dirent* d = ::readdir(dir)) {
      std::string name = d->d_name;
      if (name != "." && name != "..") add(::dirfd(dir), name, name);
    }
    ::closedir(dir);
  }

  std::sort(entries.begin(), entries.end(), [](const entry& a, const entry& b) { return a.name < b.name; });
  std::size_t total = entries.size();
  if (entries.size() > ls_max_entries) entries.resize(ls_max_entries);
  std::string text;
  json list = json::array();
  for (entry& e : entries) {
    text += e.line + "\n";
    list.push_back(std::move(e.meta));
  }
  if (total == 0) text = "(empty folder)\n";
  if (total > entries.size())
    text += "[showing the first " + std::to_string(entries.size()) + " of " + std::to_string(total) + " entries]\n";
  return {std::move(text), false, json{{"path", shown}, {"entries", std::move(list)}, {"total", total}}, 0, nullptr};
}

}  // namespace dhara::stdext
