// Real symlink resolution and executable lookup for the policy's path and command rules.
#include "io/path_resolver.hpp"

#include "io/open_batch.hpp"

#include <fcntl.h>
#include <glob.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

namespace dhara::io {
namespace {

constexpr int max_links = 40;  // as the kernel's MAXSYMLINKS

// Pushes the components of `path` onto `stack` so the first component is on top.
void push_components(std::string_view path, std::vector<std::string>& stack) {
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    std::size_t start = i;
    while (i < path.size() && path[i] != '/') ++i;
    if (i > start) parts.push_back(path.substr(start, i - start));
  }
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) stack.emplace_back(*it);
}

policy::error fail(std::string_view path, std::string_view why) {
  return policy::make_error(policy::errc::resolve_failed,
                            "cannot resolve '" + std::string(path) + "': " + std::string(why));
}

// Copies `path` into `out` as a C string; false, with errno ENAMETOOLONG when it does not fit
// or EINVAL when it holds a NUL byte (the system call would see only the part before it).
bool to_c_path(std::string_view path, char (&out)[PATH_MAX]) {
  if (path.size() >= PATH_MAX) {
    errno = ENAMETOOLONG;
    return false;
  }
  if (std::memchr(path.data(), '\0', path.size()) != nullptr) {
    errno = EINVAL;
    return false;
  }
  std::memcpy(out, path.data(), path.size());
  out[path.size()] = '\0';
  return true;
}

// openat2(dir, path, O_PATH | flags, resolve): a descriptor that opens nothing (no device, FIFO or
// file is touched), or -1 with errno (ENAMETOOLONG for a path too long to copy).
int open_path(std::string_view path, std::uint64_t resolve, std::uint64_t flags = 0, int dir = AT_FDCWD) {
  char name[PATH_MAX];
  if (!to_c_path(path, name)) return -1;
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC | flags;
  how.resolve = resolve;
  return static_cast<int>(::syscall(SYS_openat2, dir, name, &how, sizeof how));
}

// Bumped in every child that fork() makes, before the child runs anything else: a descriptor
// of /proc/self/fd opened before the fork names the parent's table, not the child's.
std::atomic<unsigned> fork_generation{0};

// This thread's descriptor of /proc/self/fd, so that a descriptor's path is one readlinkat
// of its number (1.8-2.3 µs here) rather than a readlink of "/proc/self/fd/N", which walks
// /proc and its "self" link first (2.9-3.0 µs). Reopened after a fork; -1 when /proc cannot
// be opened (the caller then reads the full path). The descriptor is this thread's, and
// nothing in dhara closes a descriptor it did not open, so its number keeps naming the folder.
int proc_fd_dir() {
  [[maybe_unused]] static const int registered =
      ::pthread_atfork(nullptr, nullptr, [] { fork_generation.fetch_add(1); });
  struct cached {
    int fd = -1;
    unsigned generation = 0;
    ~cached() {
      if (fd >= 0) ::close(fd);
    }
  };
  thread_local cached dir;
  const unsigned now = fork_generation.load(std::memory_order_relaxed);
  if (dir.fd >= 0 && dir.generation == now) return dir.fd;
  if (dir.fd >= 0) ::close(dir.fd);  // the parent's table, inherited by this child
  dir.fd = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  dir.generation = now;
  return dir.fd;
}

// Where descriptor `fd` points, as /proc/self/fd shows it; the length, or -1.
ssize_t fd_path(int fd, char* out, std::size_t size) {
  char name[16];
  auto end = std::to_chars(name, name + sizeof name - 1, fd).ptr;
  *end = '\0';
  if (const int dir = proc_fd_dir(); dir >= 0) return ::readlinkat(dir, name, out, size);
  // "/proc/self/fd/N" looked up in full: the folder could not be kept open.
  char link[32] = "/proc/self/fd/";
  std::memcpy(link + 14, name, static_cast<std::size_t>(end - name) + 1);
  return ::readlink(link, out, size);
}

}  // namespace

// The kernel's answer for a path that exists: openat2 with RESOLVE_NO_MAGICLINKS follows
// plain symlinks only, as the walk does (the walk reads /proc's magic links as text), and the
// descriptor's entry in /proc/self/fd names where it ended. Nothing when the kernel cannot
// answer (a missing component, a dangling link, a loop, no openat2, no /proc, a name that is
// not a path): the walk decides.
std::optional<std::string> real_path_resolver::resolve_in_kernel(std::string_view path) {
  int fd = open_path(path, RESOLVE_NO_MAGICLINKS);
  if (fd < 0) return std::nullopt;
  char target[PATH_MAX];
  ssize_t n = fd_path(fd, target, sizeof target);
  ::close(fd);
  if (n <= 0 || static_cast<std::size_t>(n) >= sizeof target || target[0] != '/') return std::nullopt;
  std::string_view got(target, static_cast<std::size_t>(n));
  if (got.ends_with(" (deleted)")) return std::nullopt;  // removed meanwhile, or a name like it
  return std::string(got);
}

namespace {

enum class first_look { own, link, unknown };

// The commonest case in one system call: a canonical path (policy::is_normal_abs_path) the
// kernel walks without meeting any symlink (RESOLVE_NO_SYMLINKS stops at the first one, the
// last component included) is its own resolution, and so is one whose walk stops at a missing
// component or a non-directory before meeting any: the component walk would append the rest as
// written. `link` when the walk met a symlink (ELOOP); `unknown` otherwise (an error such as
// EACCES the walk reports). The caller asks only for canonical paths.
//
// O_DIRECTORY: a walk that ends on anything but a folder fails with ENOTDIR, and only after
// the whole walk, the last component's link check included. So for a file, the commonest
// subject, no descriptor is made and none has to be closed: one system call instead of two
// (docs/performance.md, "A file's first look without a descriptor"). A folder still gets one.
first_look look_for_links(std::string_view canonical_path) {
  int fd = open_path(canonical_path, RESOLVE_NO_SYMLINKS, O_DIRECTORY);
  if (fd >= 0) {
    ::close(fd);
    return first_look::own;
  }
  if (errno == ENOENT || errno == ENOTDIR) return first_look::own;
  return errno == ELOOP ? first_look::link : first_look::unknown;
}

// Folders whose paths this thread last found to go through a symlink: a path in one of them
// goes to the kernel's one-walk resolution at once, without first asking whether its walk
// meets a link (an openat2 that fails with ELOOP, ~1 µs here). A hint, never an answer: both
// ways resolve the path anew and give the same result, so a stale entry costs one syscall at
// most, and it goes as soon as a path in that folder turns out to have no link.
// Usually empty: `held_` counts the entries, so that a look into an empty list reads nothing
// (the two lists were read four times a path check, ~75 instructions each).
class linked_folders {
 public:
  bool contains(std::string_view dir) const {
    if (held_ == 0) return false;
    for (const std::string& d : dirs_) {
      if (!d.empty() && d == dir) return true;
    }
    return false;
  }
  void add(std::string_view dir) {
    if (dir.empty() || contains(dir)) return;
    const bool was_empty = dirs_[next_].empty();
    dirs_[next_].assign(dir);  // counted once it holds the folder (an overcount would only cost time)
    held_ += was_empty;
    next_ = (next_ + 1) % dirs_.size();
  }
  void remove(std::string_view dir) {
    if (held_ == 0 || dir.empty()) return;
    for (std::string& d : dirs_) {
      if (d != dir) continue;
      d.clear();
      --held_;
    }
  }

 private:
  std::array<std::string, 16> dirs_;
  std::size_t next_ = 0;
  std::size_t held_ = 0;  // entries not empty
};

// The folder part of a normalized absolute path ("/a/b" for "/a/b/c"; "" for "/c" and "/").
// (memrchr: string_view::rfind reads a byte a loop, ~100 instructions for a usual path.)
std::string_view folder_of(std::string_view path) {
  const void* slash = path.empty() ? nullptr : ::memrchr(path.data(), '/', path.size());
  return slash == nullptr ? std::string_view() : path.substr(0, static_cast<const char*>(slash) - path.data());
}

thread_local std::uint64_t known_link_answers = 0;  // see real_path_resolver::known_link_answers

// readlink(2) of `path` into `out`: the target's length, or -1 with errno (EINVAL when `path`
// is no symlink, ENAMETOOLONG when it or its target does not fit).
ssize_t read_link(std::string_view path, char (&out)[PATH_MAX]) {
  char name[PATH_MAX];
  if (!to_c_path(path, name)) return -1;
  const ssize_t n = ::readlink(name, out, PATH_MAX);
  if (n >= PATH_MAX) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return n;
}

// "/" as a descriptor (opened once, kept), for walks scoped beneath it; -1 if it cannot be.
int root_dir() {
  static const int fd = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  return fd;
}

// `path` walked beneath "/" from the root's descriptor, as a link's target that climbs is
// walked (through_link says why): a descriptor of where the walk ended, or -1 with errno.
int open_beneath_root(std::string_view path) {
  while (path.starts_with('/')) path.remove_prefix(1);
  if (path.empty() || root_dir() < 0) {
    errno = EINVAL;
    return -1;
  }
  return open_path(path, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, 0, root_dir());
}

// The rest of a path past its link ("/rest", never "" nor with `..`), walked down from
// `target`, a descriptor of where the link's target led, as look_for_links walks: a folder's
// descriptor, or -1 with errno (ENOTDIR for a file, and for a rest under one).
int open_below(int target, std::string_view rest) {
  if (rest.size() < 2 || rest.front() != '/') {  // never so: callers pass a path's rest past its link
    errno = EINVAL;
    return -1;
  }
  return open_path(rest.substr(1), RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, O_DIRECTORY, target);
}

// The path the kernel walks for `path` through `link`, a component prefix of it whose target
// is `to` (not empty), into `out`: a relative target continues from the link's folder.
void splice_into(std::string& out, std::string_view path, std::string_view link, std::string_view to) {
  out.clear();
  if (to.front() != '/') {
    out.append(folder_of(link));
    out.push_back('/');
  }
  out.append(to);
  out.append(path.substr(link.size()));  // "" or "/rest"
}

// The size of what splice_into writes.
std::size_t spliced_size(std::string_view path, std::string_view link, std::string_view to) {
  return (to.front() != '/' ? folder_of(link).size() + 1 : 0) + to.size() + (path.size() - link.size());
}

enum class splice {
  answered,  // `out` holds the resolution
  no_link,   // the known link is no symlink any more (or is gone)
  not_now,   // this path cannot be answered this way (missing, a race, an error)
  never,     // the target leads through another link or above "/": not worth trying again
};

// What a walk's failure `err` says of splicing through its link: ELOOP (a link met) and EXDEV
// (above "/", beneath it) never change while the target stays; anything else may.
splice refused(int err) { return err == ELOOP || err == EXDEV ? splice::never : splice::not_now; }

// The resolution of `path` through `link`, a component prefix of it and the first symlink
// its walk meets, in two system calls instead of the kernel walk's three (~2.6 against
// ~4.6 µs here, docs/performance.md, "Paths through a known link"; three, with a `close`,
// for a target with `..`): the link's target is
// read anew, spliced in as the kernel splices it (a relative target continues from the
// link's folder), and the spliced path is walked with RESOLVE_NO_SYMLINKS. That walk passes
// the link's folder too when the target is relative, so a link that appeared there since is
// met. The answer is the spliced path in normal form: every component of it was walked by
// name and was no link when the kernel passed it.
//
// A target with `..` needs more, because normal form applies each `..` to the name before it
// while the kernel goes to the parent of what it walked. The two agree for a walk by name
// without links, unless something was renamed meanwhile: the link's folder moved away
// between the two calls (the walk then fails before the `..`), or moved while the walk was
// in it (the `..` then leads to its new parent). So such a target is walked beneath "/"
// (RESOLVE_BENEATH), where the kernel fails a `..` with EAGAIN if anything was renamed since
// the walk began, and only a walk to the end counts: a missing or non-folder component might
// lie before the `..`. Where the walk stops short, the target alone is walked so (its part of
// the spliced path holds every `..`), and, when that goes to the end, the rest of the path
// (no `..` in it) down from where it led: a new file under such a link is answered in five
// system calls, where the component walk takes ~20 µs. The rest is walked a moment after the
// target, from the folder the target's walk found; a rename between the two goes unseen, as
// one walk does not see a rename after its last `..` either (the kernel checks at a `..`),
// and the answer is as of the target's walk for its part and of the rest's for the rest.
splice through_link(std::string_view path, std::string_view link, std::string& out) {
  char target[PATH_MAX];
  const ssize_t n = read_link(link, target);
  if (n <= 0) return errno == EINVAL || errno == ENOENT || errno == ENOTDIR ? splice::no_link : splice::not_now;
  const std::string_view to(target, static_cast<std::size_t>(n));
  thread_local std::string spliced;  // kept: no allocation a path once it has grown
  splice_into(spliced, path, link, to);
  int fd;
  if (!policy::has_dotdot_segment(to)) {
    fd = open_path(spliced, RESOLVE_NO_SYMLINKS, O_DIRECTORY);
    if (fd < 0 && errno != ENOENT && errno != ENOTDIR) return refused(errno);
  } else {
    fd = open_beneath_root(spliced);
    if (fd < 0 && (errno == ENOENT || errno == ENOTDIR) && path.size() > link.size()) {
      // Missing, or under a file: the target's part (which holds every `..`) walked to its end
      // first, then the rest down from where it led, as a path without a link is walked.
      const std::string_view rest = path.substr(link.size());
      const int led = open_beneath_root(std::string_view(spliced).substr(0, spliced.size() - rest.size()));
      if (led < 0) return refused(errno);
      fd = open_below(led, rest);
      const int walked = errno;
      ::close(led);
      if (fd < 0 && walked != ENOENT && walked != ENOTDIR) return refused(walked);
    } else if (fd < 0) {
      return refused(errno);
    }
  }
  if (fd >= 0) ::close(fd);
  if (policy::is_normal_abs_path(spliced)) out.assign(spliced);  // the usual target ("src"): as it is
  else if (!policy::normalize_path_into(spliced, {}, out)) return splice::not_now;
  ++known_link_answers;
  return splice::answered;
}

// Symlinks this thread met as the first link on a path's walk (each a component prefix of
// that path). A path under one that splices is resolved by through_link; a path under one
// that does not (its target leads through another link) goes to the kernel's one walk at
// once. As with linked_folders, an entry only says where to look: the link is read anew for
// every path (in a round, once for the round, at its start: look_ahead), and it goes as soon
// as a path under it turns out to have no link.
class known_links {
 public:
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  static constexpr std::size_t slots = 16;
  struct link {
    std::string path;
    bool splices = true;
  };

  // The shortest entry that `path` is at or under, or `none`.
  std::size_t covering(std::string_view path) const {
    if (held_ == 0) return none;  // usually (see linked_folders)
    std::size_t found = none;
    for (std::size_t i = 0; i < links_.size(); ++i) {
      const std::string& l = links_[i].path;
      if (l.empty() || !path.starts_with(l) || (path.size() > l.size() && path[l.size()] != '/')) continue;
      if (found == none || l.size() < links_[found].path.size()) found = i;
    }
    return found;
  }
  link& at(std::size_t i) { return links_[i]; }
  void forget(std::size_t i) {
    held_ -= !links_[i].path.empty();
    links_[i].path.clear();
  }

  // Finds the first symlink on the walk of `path`, which resolved to `resolved`, and keeps
  // it; false when none is found. The components both paths begin with are no links (a
  // resolution holds none, and the first link's own path is not in it), so the search
  // starts at the first one that differs, usually the link itself: one readlink.
  bool learn(std::string_view path, std::string_view resolved) {
    std::size_t boundary = 0;  // the '/' before the first component that may differ
    for (std::size_t i = 0; i < path.size() && i < resolved.size() && path[i] == resolved[i]; ++i) {
      if (path[i] == '/') boundary = i;
    }
    char target[PATH_MAX];
    for (std::size_t end = path.find('/', boundary + 1);; end = path.find('/', end + 1)) {
      const std::string_view prefix = path.substr(0, end);
      if (read_link(prefix, target) > 0) {
        const bool was_empty = links_[next_].path.empty();
        links_[next_].path.assign(prefix);
        held_ += was_empty;
        links_[next_].splices = true;
        next_ = (next_ + 1) % links_.size();
        return true;
      }
      if (errno != EINVAL || end == std::string_view::npos) return false;
    }
  }

 private:
  std::array<link, slots> links_;
  std::size_t next_ = 0;
  std::size_t held_ = 0;  // entries not empty
};

// This thread's hints (see the two classes above).
thread_local linked_folders linked;
thread_local known_links links;

// The paths of a round (look_ahead), in the order they were given, each with what was found
// for it ahead: the first look taken for it, or for a path under a known link that splices,
// its resolution through that link; or nothing (not looked at, or an answer that could not be
// used). `ahead_count` entries are the round's: the vector keeps its strings between rounds so
// that a round of the usual size allocates nothing for its first looks (a resolution through
// a link hands its `resolved` over, which the next round makes again, as through_link makes
// its own). end_look_ahead ends the round: nothing found ahead outlives it.
struct looked_ahead {
  std::string path;
  std::optional<first_look> look;
  std::size_t link = known_links::none;  // the known link the round walks `path` through
  bool below = false;                    // its target climbs: the rest walked from where it led
  bool through = false;                  // `resolved` is the path's resolution through `link`
  std::string spliced;                   // `path` with `link`'s target spliced in
  std::string resolved;
};
thread_local std::vector<looked_ahead> ahead;
thread_local std::size_t ahead_count = 0;
thread_local std::size_t ahead_next = 0;  // the first entry not yet passed
thread_local std::uint64_t looked_ahead_answers = 0;  // see real_path_resolver::looked_ahead_answers
thread_local std::uint64_t looks_asked_ahead = 0;     // see real_path_resolver::looks_asked_ahead
thread_local std::uint64_t links_read_ahead = 0;      // see real_path_resolver::links_read_ahead
std::atomic<std::uint64_t> look_ahead_rounds{0};      // see real_path_resolver::look_ahead_rounds

// How far past the next entry a resolution looks for its path: the entries of checks decided
// before their paths were resolved (a lexical denial stops a batch) are passed over, and a path
// not among the next few makes its own look rather than search the whole round.
constexpr std::size_t ahead_window = 8;

// The round's entry for `path`, or nothing. Each entry is taken once, in order.
looked_ahead* take_ahead(std::string_view path) {
  const std::size_t end = std::min(ahead_count, ahead_next + ahead_window);
  for (std::size_t i = ahead_next; i < end; ++i) {
    if (ahead[i].path != path) continue;
    ahead_next = i + 1;
    return &ahead[i];
  }
  return nullptr;
}

// As through_link reads its walk's answer: the spliced path is the resolution when the walk
// met no link up to where it ended (for a target that climbs, the walk of the rest from where
// the target led). A first look reads its walk the same way.
bool walked_without_link(int res) { return res >= 0 || res == -ENOENT || res == -ENOTDIR; }

// As look_for_links reads its one call's answer. Any other answer (an error such as EMFILE or
// EACCES, a look the ring did not run) is none: resolve() then looks itself.
std::optional<first_look> look_of(int res) {
  if (walked_without_link(res)) return first_look::own;
  if (res == -ELOOP) return first_look::link;
  return std::nullopt;
}

// The targets of the known links a round walks through, each read once a round (as
// through_link reads its link: anew, before the walk). By the link's slot in `links`.
class link_targets {
 public:
  struct target {
    std::string to;
    bool climbs = false;  // holds a `..` (through_link says why that matters)
    int at = -1;          // for one that climbs: where its walk beneath "/" ended
    bool normal = false;  // spliced in where the link is, it is in normal form (`src`, not `./src`)
    std::string place;    // for one in normal form or that climbs: where it leads, in normal form
                          // ("/" as ""), which each path's rest follows
    // `path` (under `link`) with this place for the link: the rest appended to the place.
    void placed_into(std::string& out, std::string_view path, std::string_view link) const {
      out.assign(place).append(path.substr(link.size()));
    }
  };
  void start() {
    close_held();
    state_.fill(unread);
  }
  // The target of link `i`, or nothing when it cannot be spliced ahead: the link is gone or no
  // symlink any more, or could not be read, or it climbs and its walk beneath "/" did not go
  // to the end (resolve() then takes the usual way, which knows what to do with each). A target
  // that climbs is walked here, once a round: the round's paths under it are walked down from
  // its descriptor, which close_held() closes.
  const target* of(std::size_t i) {
    if (state_[i] == unread) {
      ++links_read_ahead;
      state_[i] = unusable;
      char read_to[PATH_MAX];
      const ssize_t n = read_link(links.at(i).path, read_to);
      if (n <= 0) return nullptr;
      target& t = targets_[i];
      t.to.assign(read_to, static_cast<std::size_t>(n));
      t.climbs = policy::has_dotdot_segment(t.to);
      splice_into(walked_, links.at(i).path, links.at(i).path, t.to);
      // Then every spliced path under it is in normal form too (but under "/", "//rest"): the
      // rest's segments are plain names (the path is in normal form), so a walk that meets no
      // link answers as it is.
      t.normal = walked_.size() > 1 && policy::is_normal_abs_path(walked_);
      if (t.normal) t.place.assign(walked_);
      if (t.climbs) {
        // Each path's answer is this place and its rest, as the spliced path's normal form
        // would be. The walks refuse links, so the `..` it climbs are the lexical parents.
        if (!policy::normalize_path_into(walked_, {}, t.place)) return nullptr;
        if (t.place == "/") t.place.clear();
        t.at = open_beneath_root(walked_);
        if (t.at < 0) return nullptr;
      }
      state_[i] = read;
    }
    return state_[i] == read ? &targets_[i] : nullptr;
  }
  // Closes the descriptors of the targets walked this round.
  void close_held() {
    for (target& t : targets_) {
      if (t.at >= 0) ::close(t.at);
      t.at = -1;
    }
  }

 private:
  enum : unsigned char { unread, read, unusable };
  std::array<unsigned char, known_links::slots> state_{};
  std::array<target, known_links::slots> targets_;
  std::string walked_;  // a target that climbs, spliced in where its link is
};

// The entries of a round that name the same path as an earlier one: looked at once, in the
// earlier entry's look. Both looks would go to the kernel in one submission, microseconds
// apart, and each answers as of the round's start either way (a look never outlives its
// round). Checks that run together often name the same file. An open-addressing table of the
// round's distinct paths, by hash: ~80 instructions a path, where a look costs ~1 µs of the
// kernel's path walk. The paths come from extensions, which could choose them to collide: a
// path that finds no free slot nor its equal within `max_probes` is simply looked at itself.
class same_paths {
 public:
  // Forgets the last round; room for `n` paths (at least half the slots stay free).
  void start(std::size_t n) {
    std::size_t size = 16;
    while (size < 2 * n) size *= 2;
    slots_.assign(size, 0);
  }
  // The entry that first named `path` in this round, or `entry` itself when none did (then
  // `path` is remembered as `entry`'s, where there is room). `path` must stay where it is for
  // the round.
  std::size_t first_of(std::string_view path, std::size_t entry) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = std::hash<std::string_view>{}(path) & mask;
    for (std::size_t probes = 0; probes < max_probes; ++probes, i = (i + 1) & mask) {
      if (slots_[i] == 0) {
        slots_[i] = entry + 1;
        return entry;
      }
      if (ahead[slots_[i] - 1].path == path) return slots_[i] - 1;
    }
    return entry;
  }

 private:
  static constexpr std::size_t max_probes = 16;
  std::vector<std::size_t> slots_;  // an entry's index + 1; 0: free
};

}  // namespace

std::size_t real_path_resolver::look_ahead(std::span<const std::string> paths) {
  // Should anything here throw (an allocation), the round ends with it: the caller's guard
  // would not run, and an entry half-made, or one of an earlier round, would answer later.
  try {
    return take_looks_ahead(paths);
  } catch (...) {
    end_look_ahead();
    throw;
  }
}

std::size_t real_path_resolver::take_looks_ahead(std::span<const std::string> paths) {
  end_look_ahead();
  thread_local std::vector<std::size_t> to_look;  // the entries the kernel is asked about
  thread_local std::vector<std::pair<std::size_t, std::size_t>> repeats;  // (entry, the first with its path)
  thread_local same_paths seen;
  thread_local link_targets targets;
  // The descriptors of the targets walked this round, closed however it ends.
  struct closes_targets {
    ~closes_targets() { targets.close_held(); }
  } closes [[maybe_unused]];
  to_look.clear();
  repeats.clear();
  if (ahead.size() < paths.size()) ahead.resize(paths.size());
  seen.start(paths.size());
  // What resolve() would ask the kernel: a plain path's first look where it would take one
  // (under no known link, in a folder not known to hold one), and for a path under a known
  // link that splices, the walk of its target spliced in, after the link is read.
  for (const std::string& p : paths) {
    looked_ahead& a = ahead[ahead_count++];
    a.look.reset();
    a.link = known_links::none;
    a.below = false;
    a.through = false;
    a.path.assign(p);
    if (p.size() >= PATH_MAX || !policy::is_normal_abs_path(p)) continue;
    const std::size_t link = links.covering(p);
    if (link == known_links::none ? linked.contains(folder_of(p)) : !links.at(link).splices) continue;
    a.link = link;
    const std::size_t entry = ahead_count - 1;
    if (const std::size_t first = seen.first_of(a.path, entry); first != entry) repeats.emplace_back(entry, first);
    else to_look.push_back(entry);
  }
  if (to_look.size() + repeats.size() < 2) return 0;  // one alone costs less as its own system calls
  // Each known link's target, read once for the round; a path whose link cannot be spliced
  // ahead is left to resolve().
  targets.start();
  std::erase_if(to_look, [](std::size_t entry) {
    looked_ahead& a = ahead[entry];
    if (a.link == known_links::none) return false;
    const link_targets::target* to = targets.of(a.link);
    // A target that climbs was walked to its end (to->at): the rest of each path is walked
    // down from there, as through_link walks it when the walk beneath "/" stops short. The
    // link itself is left to resolve().
    const std::string& link_path = links.at(a.link).path;
    // Not asked when the spliced path would be too long for the kernel, as through_link is not
    // answered then.
    if (to && (!to->climbs || a.path.size() > link_path.size()) && spliced_size(a.path, link_path, to->to) < PATH_MAX) {
      if (to->climbs) a.below = true;  // the rest walked from the target's descriptor
      else if (to->normal) to->placed_into(a.spliced, a.path, link_path);  // as splice_into writes it
      else splice_into(a.spliced, a.path, link_path, to->to);
      return false;
    }
    a.link = known_links::none;  // nothing to ask the kernel for it: no look either
    return true;
  });
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC | O_DIRECTORY;
  how.resolve = RESOLVE_NO_SYMLINKS;
  open_how how_below{};  // as open_below walks the rest under a target that climbs
  how_below.flags = O_PATH | O_CLOEXEC | O_DIRECTORY;
  how_below.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
  // A chunk at a time, its descriptors closed before the next: a round never holds
  // more than one chunk's descriptors open (and its climbing targets', one a link).
  constexpr std::size_t chunk = 128;
  std::array<batched_open, chunk> opens;
  std::array<int, chunk> descriptors;
  std::size_t kept = 0;
  for (std::size_t base = 0; base < to_look.size(); base += chunk) {
    const std::size_t n = std::min(chunk, to_look.size() - base);
    for (std::size_t i = 0; i < n; ++i) {
      const looked_ahead& a = ahead[to_look[base + i]];
      if (a.link == known_links::none) opens[i] = {a.path.c_str(), 0};
      else if (!a.below) opens[i] = {a.spliced.c_str(), 0};
      else opens[i] = {a.path.c_str() + links.at(a.link).path.size() + 1, 0, targets.of(a.link)->at, &how_below};
    }
    if (!open_all(std::span(opens.data(), n), how)) break;
    io::looks_asked_ahead += n;
    // The descriptors (folders') closed first: what follows may allocate, and so throw.
    std::size_t opened = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (opens[i].result >= 0) descriptors[opened++] = opens[i].result;
    }
    if (opened > 0) close_all(std::span<const int>(descriptors.data(), opened));
    for (std::size_t i = 0; i < n; ++i) {
      const int res = opens[i].result;
      looked_ahead& a = ahead[to_look[base + i]];
      if (a.link == known_links::none) {
        a.look = look_of(res);
        kept += a.look.has_value();
      } else {
        // As through_link answers: the spliced path in normal form, every component of it
        // walked by name and no link when the kernel passed it. Below a target that climbs,
        // that is the target's place and the path's rest (link_targets::of).
        a.through = walked_without_link(res);
        if (!a.through) continue;
        const link_targets::target& to = *targets.of(a.link);
        if (a.below) {
          to.placed_into(a.resolved, a.path, links.at(a.link).path);
        } else if (to.normal) {
          a.resolved.swap(a.spliced);  // the usual target (`src`): the path walked is the answer
        } else if (!policy::normalize_path_into(a.spliced, {}, a.resolved)) {
          a.through = false;
          continue;
        }
        ++kept;
      }
    }
  }
  for (const auto& [entry, first] : repeats) {  // none when the submission failed: each looks itself
    looked_ahead& a = ahead[entry];
    const looked_ahead& f = ahead[first];
    a.look = f.look;
    a.through = f.through;
    if (a.through) a.resolved.assign(f.resolved);
    kept += a.look.has_value() || a.through;
  }
  if (kept > 0) io::look_ahead_rounds.fetch_add(1, std::memory_order_relaxed);
  return kept;
}

void real_path_resolver::end_look_ahead() {
  ahead_count = 0;
  ahead_next = 0;
}

std::uint64_t real_path_resolver::looked_ahead_answers() { return io::looked_ahead_answers; }
std::uint64_t real_path_resolver::looks_asked_ahead() { return io::looks_asked_ahead; }
std::uint64_t real_path_resolver::links_read_ahead() { return io::links_read_ahead; }
std::uint64_t real_path_resolver::look_ahead_rounds() { return io::look_ahead_rounds.load(); }

policy::result<std::string> real_path_resolver::resolve(std::string_view normalized_abs) const {
  if (normalized_abs.empty() || normalized_abs.front() != '/')
    return fail(normalized_abs, "not an absolute path");
  const std::string_view dir = folder_of(normalized_abs);
  // A path with a NUL byte is not plain, and goes the usual way, where every system call's
  // copy of the path (to_c_path) and the walk refuse it.
  const bool plain = policy::is_normal_abs_path(normalized_abs);
  // What the round found ahead for this path, taken whichever way it is resolved.
  looked_ahead* const found = plain && ahead_count != 0 ? take_ahead(normalized_abs) : nullptr;
  auto the_usual_way = [&]() -> policy::result<std::string> {
    if (auto fast = resolve_in_kernel(normalized_abs)) return std::move(*fast);
    return resolve_by_walk(normalized_abs);
  };
  if (const std::size_t i = plain ? links.covering(normalized_abs) : known_links::none; i != known_links::none) {
    known_links::link& known = links.at(i);
    splice how = splice::not_now;
    if (known.splices && found && found->through && found->link == i) {
      ++io::known_link_answers;
      ++io::looked_ahead_answers;
      found->through = false;  // answers once (take_ahead passes it too)
      return std::move(found->resolved);
    }
    if (known.splices) {
      std::string out;
      how = through_link(normalized_abs, known.path, out);
      if (how == splice::answered) return out;
      if (how == splice::never) known.splices = false;
    }
    if (how != splice::no_link) {  // a link is on the way: no first look
      auto resolved = the_usual_way();
      if (resolved && *resolved == normalized_abs) links.forget(i);
      return resolved;
    }
    links.forget(i);
  }
  bool met_link = false;
  if (plain && !linked.contains(dir)) {
    const std::optional<first_look> taken = found ? found->look : std::nullopt;
    if (taken) ++io::looked_ahead_answers;
    switch (taken ? *taken : look_for_links(normalized_abs)) {
      case first_look::own:
        return std::string(normalized_abs);
      case first_look::link:
        met_link = true;
        break;
      case first_look::unknown:
        break;
    }
  }
  auto resolved = the_usual_way();
  if (resolved && *resolved == normalized_abs) linked.remove(dir);
  else if (met_link && (!resolved || !links.learn(normalized_abs, *resolved))) linked.add(dir);
  return resolved;
}

std::uint64_t real_path_resolver::known_link_answers() { return io::known_link_answers; }

std::optional<policy::file_id> real_path_resolver::identify(std::string_view resolved_abs) const {
  char name[PATH_MAX];
  struct stat st;
  if (!to_c_path(resolved_abs, name) || ::stat(name, &st) != 0) return std::nullopt;
  return policy::file_id{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

std::vector<std::string> real_path_resolver::expand(std::string_view glob, std::size_t limit) const {
  std::vector<std::string> out;
  char pattern[PATH_MAX];
  if (!to_c_path(glob, pattern)) return out;
  glob_t g{};
  if (::glob(pattern, GLOB_NOSORT | GLOB_PERIOD, nullptr, &g) == 0)  // escapes: policy::glob3_pattern
    for (std::size_t i = 0; i < g.gl_pathc && out.size() < limit; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  return out;
}

policy::result<std::string> real_path_resolver::resolve_by_walk(std::string_view normalized_abs) {
  if (normalized_abs.empty() || normalized_abs.front() != '/')
    return fail(normalized_abs, "not an absolute path");
  if (std::memchr(normalized_abs.data(), '\0', normalized_abs.size()) != nullptr)
    return fail(normalized_abs, "the path holds a NUL byte");
  std::vector<std::string> todo;
  push_components(normalized_abs, todo);
  std::string done;  // "" stands for "/"
  bool missing = false;
  int links = 0;
  char target[PATH_MAX];
  while (!todo.empty()) {
    std::string comp = std::move(todo.back());
    todo.pop_back();
    if (comp == ".") continue;
    if (comp == "..") {
      // The kernel cannot walk back out of a part that does not exist (or is no folder), and
      // the links after it would go unread if the walk went on as text: refused, as it fails.
      if (missing)
        return fail(normalized_abs, "a '..' comes after a part of the path that does not exist or is not a folder");
      auto cut = done.rfind('/');
      done.resize(cut == std::string::npos ? 0 : cut);
      continue;
    }
    std::size_t before = done.size();
    done.push_back('/');
    done.append(comp);
    if (missing) continue;  // below a missing component nothing can be a link
    struct stat st;
    if (::lstat(done.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) {
        missing = true;
        continue;
      }
      return fail(normalized_abs, std::strerror(errno));
    }
    if (!S_ISLNK(st.st_mode)) {
      // Nothing is below a file: the kernel's walk would stop here (ENOTDIR), as at a part
      // that does not exist, and so does this one's.
      if (!S_ISDIR(st.st_mode) && !todo.empty()) missing = true;
      continue;
    }
    if (++links > max_links) return fail(normalized_abs, "too many levels of symbolic links");
    ssize_t n = ::readlink(done.c_str(), target, sizeof target);
    if (n < 0) return fail(normalized_abs, std::strerror(errno));
    if (static_cast<std::size_t>(n) >= sizeof target) return fail(normalized_abs, "link target too long");
    std::string_view link(target, static_cast<std::size_t>(n));
    done.resize(before);  // the link itself is replaced by its target
    if (link.starts_with('/')) done.clear();
    push_components(link, todo);
  }
  return done.empty() ? std::string("/") : done;
}

path_executable_locator::path_executable_locator(std::string path_env, std::string cwd)
    : path_env_(std::move(path_env)), cwd_(std::move(cwd)) {}

policy::result<std::string> path_executable_locator::locate(std::string_view argv0) const {
  auto where = locate_where(argv0);
  if (!where) return where.err();
  return std::move(where->real);
}

policy::result<policy::located_executable> path_executable_locator::locate_where(std::string_view argv0) const {
  // `candidate` is walked as the kernel walks it (no `..` taken back by hand before the links
  // are followed: `X=/../usr/bin/git` names nothing). `found` is its folder's real path and
  // its own name, whether or not that is a link.
  auto usable = [](const std::string& candidate) -> std::optional<policy::located_executable> {
    char real[PATH_MAX];
    if (::realpath(candidate.c_str(), real) == nullptr) return std::nullopt;
    struct stat st;
    if (::stat(real, &st) != 0 || !S_ISREG(st.st_mode) || ::access(real, X_OK) != 0) return std::nullopt;
    const std::size_t slash = candidate.rfind('/');
    const std::string folder = slash == 0 ? "/" : candidate.substr(0, slash);
    char real_folder[PATH_MAX];
    if (::realpath(folder.c_str(), real_folder) == nullptr) return std::nullopt;
    std::string found = real_folder;
    if (found != "/") found += '/';
    found += candidate.substr(slash + 1);
    return policy::located_executable{std::move(found), real};
  };
  if (argv0.empty()) return policy::make_error(policy::errc::not_found, "the command is empty");
  if (argv0.find('\0') != std::string_view::npos)
    return policy::make_error(policy::errc::not_found, "the command holds a NUL byte");
  if (argv0.find('/') != std::string_view::npos) {
    std::string candidate = argv0.front() == '/' ? std::string(argv0) : cwd_ + "/" + std::string(argv0);
    auto found = usable(candidate);
    if (!found)
      return policy::make_error(policy::errc::not_found, "'" + std::string(argv0) + "' is not an executable file");
    return std::move(*found);
  }
  std::string_view rest = path_env_;
  while (true) {
    auto colon = rest.find(':');
    std::string_view dir = rest.substr(0, colon);
    if (!dir.empty() && dir.front() == '/') {  // relative PATH entries are ignored: cwd-dependent
      if (auto found = usable(std::string(dir) + "/" + std::string(argv0))) return std::move(*found);
    }
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return policy::make_error(policy::errc::not_found, "'" + std::string(argv0) + "' is not on PATH");
}

}  // namespace dhara::io
