// Host API operations: files opened beneath their allowed root with openat2, fetches pinned
// to vetted addresses with libcurl, processes spawned without a shell in their own session.
#include "io/host_ops.hpp"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/openat2.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <set>
#include <system_error>
#include <utility>

#include "io/name_lookup.hpp"
#include "policy/path_rules.hpp"

namespace dhara::io {
namespace {

using nlohmann::json;
using policy::errc;
using policy::make_error;

// ---------------------------------------------------------------------------------------
// Small helpers

// Owns a file descriptor.
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(unique_fd&& o) noexcept : fd_(o.release()) {}
  unique_fd& operator=(unique_fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// strerror may share a buffer between threads; the category message does not.
std::string errno_text(int err) { return std::generic_category().message(err); }

// Runs an operation and turns any exception (in practice std::bad_alloc, or a json error)
// into an error value: nothing thrown may reach the worker that called us.
template <class F>
policy::result<json> guarded(std::string_view what, F&& f) noexcept {
  try {
    return f();
  } catch (const std::exception& e) {
    try {
      return make_error(errc::resolve_failed, std::string(what) + " failed inside dhara: " + e.what());
    } catch (...) {
    }
  } catch (...) {
  }
  return make_error(errc::resolve_failed, {});
}

// Length of the longest prefix of `s` that is well-formed UTF-8.
std::size_t utf8_valid_prefix(std::string_view s) {
  std::size_t i = 0;
  const std::size_t n = s.size();
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  while (i < n) {
    unsigned char c = byte(i);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return i;
    }
    if (i + len > n) return i;
    if (byte(i + 1) < lo || byte(i + 1) > hi) return i;
    for (std::size_t k = 2; k < len; ++k)
      if ((byte(i + k) & 0xC0) != 0x80) return i;
    i += len;
  }
  return n;
}

// Replaces every byte that is not part of well-formed UTF-8 with U+FFFD, for display.
std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    std::size_t ok = utf8_valid_prefix(s);
    out.append(s.substr(0, ok));
    if (ok == s.size()) break;
    out.append("\xEF\xBF\xBD");
    s.remove_prefix(ok + 1);
  }
  return out;
}

// Stores bytes under `key` as text when they are UTF-8, else as base64 with `<key>Encoding`.
// A capped stream may end inside a character: those 1–3 bytes are dropped rather than
// turning the whole output into base64.
void put_text_or_base64(json& obj, const std::string& key, std::string bytes, bool capped) {
  std::size_t ok = utf8_valid_prefix(bytes);
  if (ok < bytes.size() && capped && bytes.size() - ok <= 3 &&
      static_cast<unsigned char>(bytes[ok]) >= 0xC2) {
    std::string_view tail(bytes.data() + ok, bytes.size() - ok);
    // An incomplete sequence: a lead byte followed only by continuation bytes.
    if (std::all_of(tail.begin() + 1, tail.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }))
      bytes.resize(ok);
  }
  if (utf8_valid_prefix(bytes) == bytes.size()) {
    obj[key] = std::move(bytes);
  } else {
    obj[key] = encode_base64(bytes);
    obj[key + "Encoding"] = "base64";
  }
}

// ---------------------------------------------------------------------------------------
// Files

// The path of `path_abs` relative to `root`, both normalized lexically the way the checker
// normalized them; "." for the root itself. Refused before any system call when the path is
// not at or under the root, so openat2 only ever sees a relative path.
policy::result<std::string> relative_to_root(const std::string& root, const std::string& path_abs) {
  if (root.empty() || root.front() != '/')
    return make_error(errc::invalid_path, "the allowed root '" + root + "' is not an absolute path");
  if (path_abs.empty() || path_abs.front() != '/')
    return make_error(errc::invalid_path, "the path '" + path_abs + "' is not absolute");
  auto nroot = policy::normalize_path(root, "/");
  if (!nroot) return nroot.err();
  auto npath = policy::normalize_path(path_abs, "/");
  if (!npath) return npath.err();
  if (!policy::is_at_or_under(*npath, *nroot))
    return make_error(errc::invalid_path, "the path '" + path_abs + "' is not under the allowed folder '" + root + "'");
  if (*npath == *nroot) return std::string(".");
  return npath->substr(*nroot == "/" ? 1 : nroot->size() + 1);
}

constexpr const char* no_openat2 =
    "this kernel has no openat2 (Linux 5.6 or later is needed), so dhara refuses host file operations rather "
    "than open files unsafely";

// openat2(dir, rel, flags, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): a new descriptor, or -1 with
// errno. EAGAIN (a rename or mount raced with a `..` step) and EINTR are retried a few times.
long open_below(int dir, const char* rel, std::uint64_t flags, std::uint64_t mode) {
  open_how how{};
  how.flags = flags | O_CLOEXEC | ((flags & O_PATH) != 0 ? 0 : O_NOCTTY);  // O_PATH takes no other flag
  how.mode = mode;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
  long fd = -1;
  for (int attempt = 0; attempt < 8; ++attempt) {
    fd = ::syscall(SYS_openat2, dir, rel, &how, sizeof how);
    if (fd >= 0 || (errno != EAGAIN && errno != EINTR)) break;
  }
  return fd;
}

// The sentence for an open of `path_abs` beneath `root` that failed with `err`.
policy::error refusal(int err, const std::string& path_abs, const std::string& root) {
  const std::string subject = "'" + path_abs + "'";
  switch (err) {
    case ENOSYS:
      // No plain open() fallback: without RESOLVE_BENEATH a swapped-in link could escape.
      return make_error(errc::resolve_failed, no_openat2);
    case EXDEV:
      return make_error(errc::refused, subject + " leads outside the allowed folder '" + root + "'; refused");
    case ELOOP:
      return make_error(errc::refused, subject +
                                                " has a symlink on its path, which its check did not resolve (the "
                                                "path changed since, or it is a /proc magic link); refused");
    case ENOENT:
      return make_error(errc::not_found, subject + " does not exist");
    case ENOTDIR:
      return make_error(errc::not_found, subject + " is not a directory, or a part of its path is not");
    case EISDIR:
      return make_error(errc::invalid_value, subject + " is a directory");
    case ENXIO:
      return make_error(errc::invalid_value, subject + " is a FIFO or device without a reader; refused");
    case EAGAIN:
      return make_error(errc::resolve_failed, subject + " kept changing while it was opened; try again");
    default:
      return make_error(errc::resolve_failed, "cannot open " + subject + ": " + errno_text(err));
  }
}

std::optional<policy::file_id> id_of(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return std::nullopt;
  return policy::file_id{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

bool is_denied(const std::optional<policy::file_id>& id, std::span<const policy::file_id> denied) {
  return id && std::find(denied.begin(), denied.end(), *id) != denied.end();
}

// Whether the folder `dir` lies in (or is) a denied folder, found by identity: the walk goes up
// by `..` from `dir` to the allowed root `root_dir`. Rules name paths, and a denied folder whose
// parent was renamed keeps its identity but not its path. Any doubt (a stat that fails, a walk
// that reaches "/" without passing the root: moved out meanwhile) counts as denied.
bool in_denied_folder(int dir, int root_dir, std::span<const policy::file_id> denied) {
  const std::optional<policy::file_id> root = id_of(root_dir);
  if (!root) return true;
  unique_fd cur(::openat(dir, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  for (int depth = 0; depth < 4096 && cur.valid(); ++depth) {
    const std::optional<policy::file_id> here = id_of(cur.get());
    if (!here || is_denied(here, denied)) return true;
    if (*here == *root) return false;
    unique_fd up(::openat(cur.get(), "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!up.valid() || id_of(up.get()) == here) return true;  // "/" reached, the root not met
    cur = std::move(up);
  }
  return true;
}

// The folder of the allowed entry `root` to open beneath, and `path_abs` relative to it. An
// entry may be a glob (its literal folder: the path matched it, so it lies beneath) or a single
// file (the path is the file itself: its own folder, the file's name relative to it). Opened
// with RESOLVE_NO_SYMLINKS: the root was resolved when the rules were compiled.
struct opened_root {
  unique_fd dir;
  std::string rel;  ///< the path relative to the folder `dir` is
};

// The folder at `folder`, walked with RESOLVE_NO_SYMLINKS; invalid with errno set on failure.
unique_fd open_folder(const std::string& folder) {
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS;
  return unique_fd(static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, folder.c_str(), &how, sizeof how)));
}

// The sentence for an allowed folder that could not be opened with `err`.
policy::error folder_refusal(int err, const std::string& folder) {
  if (err == ELOOP)
    return make_error(errc::refused, "the allowed folder '" + folder +
                                              "' has a symlink on its path now, which it had not when the rules "
                                              "were read; refused (start the session again if the change is wanted)");
  if (err == ENOSYS) return make_error(errc::resolve_failed, no_openat2);
  return make_error(err == ENOENT ? errc::not_found : errc::resolve_failed,
                    "cannot open the allowed folder '" + folder + "': " + errno_text(err));
}

policy::result<opened_root> open_root(const std::string& root, const std::string& path_abs, std::uint64_t flags) {
  std::string folder = root;
  // A glob's folder, or a wider one when a name holds a glob character (an escaped `app\[2]`
  // is the plain root `app[2]`): any folder the checked path lies beneath will do.
  if (const std::size_t g = root.find_first_of("*?["); g != std::string::npos) {
    const std::size_t slash = root.rfind('/', g);
    folder = slash == 0 || slash == std::string::npos ? "/" : root.substr(0, slash);
  }
  auto rel = relative_to_root(folder, path_abs);
  if (!rel) return rel.err();
  unique_fd dir = open_folder(folder);
  if (dir.valid()) return opened_root{std::move(dir), std::move(*rel)};
  const int err = errno;
  // A single file (or one to create): the path is the entry itself, opened in its folder.
  if (*rel != "." || folder == "/" || (flags & O_DIRECTORY) != 0 || (err != ENOTDIR && err != ENOENT))
    return folder_refusal(err, folder);
  const std::size_t slash = folder.rfind('/');
  std::string parent = slash == 0 ? "/" : folder.substr(0, slash);
  unique_fd up = open_folder(parent);
  if (!up.valid()) return folder_refusal(errno, parent);
  return opened_root{std::move(up), folder.substr(slash + 1)};
}

// Opens `path_abs` beneath the directory `root`, by name: both are resolutions the checker
// matched (no symlink in either when checked), so any symlink met now, in the root's own path
// or beneath it, means something changed since the check, and the open is refused
// (RESOLVE_NO_SYMLINKS, which refuses /proc's magic links too). RESOLVE_BENEATH keeps the
// walk beneath the root as well, so a `..` can never leave it. The path opened is the path
// checked, walked the same way. Rules name paths, so with `denied` (the identities of the
// rules' denied entries) the folder the file is in is opened first and walked up to the root:
// a denied folder moved since the check (its parent renamed) is met there by identity, before
// the file is opened or created; and the file opened must not be a denied entry itself.
// `root` may be a glob or a single file: open_root() finds the folder to open beneath.
policy::result<unique_fd> open_beneath(const std::string& root, const std::string& path_abs, std::uint64_t flags,
                                       std::uint64_t mode, std::span<const policy::file_id> denied) {
  auto beneath = open_root(root, path_abs, flags);
  if (!beneath) return beneath.err();
  const unique_fd& dir = beneath->dir;
  const std::string& rel = beneath->rel;
  if (denied.empty()) {
    const long fd = open_below(dir.get(), rel.c_str(), flags, mode);
    if (fd < 0) return refusal(errno, path_abs, root);
    return unique_fd(static_cast<int>(fd));
  }
  const std::size_t slash = rel.rfind('/');
  const std::string name = slash == std::string::npos ? rel : rel.substr(slash + 1);
  unique_fd folder;
  if (slash != std::string::npos) {
    const long fd = open_below(dir.get(), rel.substr(0, slash).c_str(), O_PATH | O_DIRECTORY, 0);
    if (fd < 0) return refusal(errno, path_abs, root);
    folder = unique_fd(static_cast<int>(fd));
  }
  const int in = folder.valid() ? folder.get() : dir.get();
  if (in_denied_folder(in, dir.get(), denied))
    return make_error(errc::refused, "'" + path_abs +
                                              "' lies in a folder the rules deny (known by its device and inode: moved, "
                                              "renamed or mounted elsewhere), or its folders could not be walked up to "
                                              "the allowed folder; refused");
  const long fd = open_below(in, name.c_str(), flags, mode);
  if (fd < 0) return refusal(errno, path_abs, root);
  unique_fd opened(static_cast<int>(fd));
  if (is_denied(id_of(opened.get()), denied))
    return make_error(errc::refused, "'" + path_abs +
                                              "' is itself an entry the rules deny (known by its device and inode: moved, "
                                              "renamed or hard-linked); refused");
  return opened;
}

// Reads at most `limit` bytes from `fd` into `out`; false (with errno) on a read error.
bool read_up_to(int fd, std::size_t limit, std::string& out) {
  char buf[65536];
  while (out.size() < limit) {
    std::size_t want = std::min(sizeof buf, limit - out.size());
    ssize_t n = ::read(fd, buf, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return true;
}

struct dir_closer {
  void operator()(DIR* d) const { ::closedir(d); }
};

std::string_view type_name(mode_t m) {
  if (S_ISREG(m)) return "file";
  if (S_ISDIR(m)) return "dir";
  if (S_ISLNK(m)) return "symlink";
  return "other";
}

// ---------------------------------------------------------------------------------------
// Network

// curl_global_init is not thread-safe and fetches run on several workers: once, first use.
CURLcode curl_init_once() {
  static std::once_flag once;
  static CURLcode code = CURLE_OK;
  std::call_once(once, [] { code = curl_global_init(CURL_GLOBAL_DEFAULT); });
  return code;
}

bool listed_by_name(const policy::domain_rules& rules, std::string_view host) {
  if (std::find(rules.exact.begin(), rules.exact.end(), host) != rules.exact.end()) return true;
  for (const std::string& s : rules.suffixes)
    if (host.size() > s.size() && host.ends_with(s)) return true;  // `*.x.com` is not x.com
  return false;
}

// Host names go into a CURLOPT_RESOLVE entry ("host:port:addr"), so only the DNS alphabet is
// accepted; IDNs must come in punycode.
bool is_dns_name(std::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  return std::all_of(host.begin(), host.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
  });
}

std::uint16_t port_of(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

// Resolves a name with the system resolver. A failure is a refusal: a host dhara cannot
// check is a host it does not contact (DESIGN §9).
policy::result<std::vector<policy::ip_address>> resolve_host(const std::string& host) {
  policy::host_addresses found = look_up_host(host);
  if (found.addresses.empty())
    return make_error(errc::refused, "the host '" + host + "' could not be resolved (" + found.failure +
                                               "); dhara does not contact hosts it cannot check");
  return std::move(found.addresses);
}

// What the libcurl callbacks share with net_fetch.
struct fetch_state {
  std::vector<policy::ip_address> allowed;  // the vetted addresses
  std::uint16_t port = 0;
  std::string refused;                      // set when a connection attempt was refused
  std::size_t max_body = 0;
  std::string body;
  bool truncated = false;
  std::map<std::string, std::string> headers;
  std::string last_header;
  std::size_t header_bytes = 0;
};

// The last line of defense: every socket libcurl opens must go to a vetted address and the
// URL's port. CURLOPT_RESOLVE already pins names; this also covers IP literals spelled in a
// form libcurl reads differently from policy::parse_ip_literal, and any future libcurl path
// (alt-svc, happy eyeballs, a proxy set elsewhere) that would connect somewhere else.
curl_socket_t open_socket(void* clientp, curlsocktype purpose, curl_sockaddr* a) noexcept try {
  auto* st = static_cast<fetch_state*>(clientp);
  if (purpose != CURLSOCKTYPE_IPCXN) {
    st->refused = "libcurl asked for a socket that is not an outgoing connection; refused";
    return CURL_SOCKET_BAD;
  }
  auto ip = address_of(&a->addr, a->addrlen);
  if (!ip || std::find(st->allowed.begin(), st->allowed.end(), *ip) == st->allowed.end() ||
      port_of(&a->addr) != st->port) {
    st->refused = "the connection would have gone to " + (ip ? ip->to_string() : std::string("an unknown address")) +
                  ", which is not an address dhara checked for this host; refused";
    return CURL_SOCKET_BAD;
  }
  int fd = ::socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
  return fd < 0 ? CURL_SOCKET_BAD : fd;
} catch (...) {  // no exception may unwind through libcurl's C frames
  return CURL_SOCKET_BAD;
}

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* userp) noexcept try {
  auto* st = static_cast<fetch_state*>(userp);
  std::size_t len = size * n;
  std::size_t room = st->max_body - st->body.size();
  if (len > room) {
    st->body.append(data, room);
    st->truncated = true;
    return 0;  // stops the transfer (CURLE_WRITE_ERROR): no reason to download the rest
  }
  st->body.append(data, len);
  return len;
} catch (...) {
  return 0;  // aborts the transfer
}

std::size_t no_upload(char*, std::size_t, std::size_t, void*) noexcept { return 0; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

constexpr std::size_t max_header_bytes = 256 * 1024;

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* userp) noexcept try {
  auto* st = static_cast<fetch_state*>(userp);
  std::size_t len = size * n;
  std::string_view line(data, len);
  if (line.starts_with("HTTP/")) {  // a new response (after a 100 Continue): start over
    st->headers.clear();
    st->last_header.clear();
    st->header_bytes = 0;
    return len;
  }
  st->header_bytes += len;
  if (st->header_bytes > max_header_bytes) return len;  // keep the first ones only
  if (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {  // obsolete folding
    if (!st->last_header.empty()) st->headers[st->last_header] += " " + std::string(trim(line));
    return len;
  }
  auto colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return len;
  std::string name = lower(trim(line.substr(0, colon)));
  std::string value = to_valid_utf8(trim(line.substr(colon + 1)));
  name = to_valid_utf8(name);
  auto [it, inserted] = st->headers.emplace(name, value);
  if (!inserted) it->second += ", " + value;
  st->last_header = name;
  return len;
} catch (...) {
  return 0;  // aborts the transfer
}

// RFC 9110 token characters, for methods and header names.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
  });
}

bool is_header_value(std::string_view s) {
  return std::none_of(s.begin(), s.end(), [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

struct curl_deleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct slist_deleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
struct curlu_deleter {
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};

// Appends to a curl_slist; a null return is an allocation failure.
bool slist_add(std::unique_ptr<curl_slist, slist_deleter>& list, const std::string& s) {
  curl_slist* next = curl_slist_append(list.get(), s.c_str());
  if (next == nullptr) return false;
  list.release();
  list.reset(next);
  return true;
}

// The host libcurl itself reads from the URL, so a parser disagreement between
// policy::parse_url and libcurl (userinfo, brackets, odd spellings) cannot make dhara vet one
// host and libcurl contact another.
bool curl_agrees_on_host(const std::string& url, const std::string& host) {
  std::unique_ptr<CURLU, curlu_deleter> u(curl_url());
  if (!u || curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) return false;
  char* raw = nullptr;
  if (curl_url_get(u.get(), CURLUPART_HOST, &raw, 0) != CURLUE_OK || raw == nullptr) return false;
  std::string theirs = lower(raw);
  curl_free(raw);
  if (theirs.size() >= 2 && theirs.front() == '[' && theirs.back() == ']') theirs = theirs.substr(1, theirs.size() - 2);
  while (!theirs.empty() && theirs.back() == '.') theirs.pop_back();
  if (theirs == host) return true;
  auto a = policy::parse_ip_literal(theirs);
  auto b = policy::parse_ip_literal(host);
  return a && b && *a == *b;
}

// ---------------------------------------------------------------------------------------
// Processes

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? "SIG" + std::string(abbrev) : "SIG" + std::to_string(sig);
}

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

// One output pipe of the child.
struct output_pipe {
  unique_fd fd;
  std::string data;
  bool capped = false;

  // Reads what is available (at most 4 MiB per call, so a writer faster than us cannot keep
  // us here); false once the pipe is closed (EOF or error).
  bool drain(std::size_t max_output) {
    char buf[65536];
    for (int reads = 0; reads < 64; ++reads) {
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return true;
        fd.reset();
        return false;
      }
      if (n == 0) {
        fd.reset();
        return false;
      }
      std::size_t room = max_output - std::min(max_output, data.size());
      std::size_t take = std::min(room, static_cast<std::size_t>(n));
      data.append(buf, take);
      // The rest is read and dropped rather than left in the pipe, so a chatty child does
      // not block on a full pipe and runs to completion (or to its timeout).
      if (take < static_cast<std::size_t>(n)) capped = true;
    }
    return true;
  }
};

struct spawn_attrs {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  spawn_attrs() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~spawn_attrs() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  spawn_attrs(const spawn_attrs&) = delete;
  spawn_attrs& operator=(const spawn_attrs&) = delete;
};

}  // namespace

// ---------------------------------------------------------------------------------------
// Encodings

bool is_valid_utf8(std::string_view bytes) { return utf8_valid_prefix(bytes) == bytes.size(); }

std::string encode_base64(std::string_view bytes) {
  static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  auto b = [&](std::size_t k) { return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    std::uint32_t v = (b(i) << 16) | (b(i + 1) << 8) | b(i + 2);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  std::size_t rest = bytes.size() - i;
  if (rest == 1) {
    std::uint32_t v = b(i) << 16;
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += "==";
  } else if (rest == 2) {
    std::uint32_t v = (b(i) << 16) | (b(i + 1) << 8);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

policy::result<std::string> decode_base64(std::string_view text) {
  auto bad = [](std::string why) { return make_error(errc::invalid_value, "the content is not valid base64: " + why); };
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (text.size() % 4 == 0 && !text.empty()) {
    std::size_t pad = text.ends_with("==") ? 2 : text.ends_with('=') ? 1 : 0;
    text.remove_suffix(pad);
  }
  if (text.size() % 4 == 1) return bad("its length is impossible");
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  std::uint32_t acc = 0;
  int bits = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    int v = value(text[i]);
    if (v < 0) return bad("unexpected character at offset " + std::to_string(i));
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) return bad("stray bits after the last byte");
  return out;
}

// ---------------------------------------------------------------------------------------
// Files

policy::result<json> fs_read(const std::string& allowed_root, const std::string& path_abs,
                             std::string_view encoding, std::size_t max_bytes, std::span<const policy::file_id> denied) {
  return guarded("host/fs/read", [&]() -> policy::result<json> {
    const bool as_base64 = encoding == "base64";
    if (!as_base64 && !encoding.empty() && encoding != "utf8")
      return make_error(errc::invalid_value, "unknown encoding '" + std::string(encoding) + "'; use \"utf8\" or \"base64\"");
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
    auto fd = open_beneath(allowed_root, path_abs, O_RDONLY | O_NONBLOCK, 0, denied);
    if (!fd) return fd.err();
    struct stat st {};
    if (::fstat(fd->get(), &st) != 0)
      return make_error(errc::resolve_failed, "cannot stat '" + path_abs + "': " + errno_text(errno));
    if (S_ISDIR(st.st_mode))
      return make_error(errc::invalid_value, "'" + path_abs + "' is a directory; use host/fs/list");
    if (!S_ISREG(st.st_mode))
      return make_error(errc::invalid_value, "'" + path_abs + "' is not a regular file (a FIFO, socket or device); refused");
    const std::string too_big = "'" + path_abs + "' is larger than the limit of " + std::to_string(max_bytes) + " bytes";
    if (static_cast<std::uint64_t>(st.st_size) > max_bytes) return make_error(errc::invalid_value, too_big);
    std::string content;
    // One byte past the limit tells a file that grew after fstat from one that fits.
    std::size_t limit = max_bytes == SIZE_MAX ? max_bytes : max_bytes + 1;
    if (!read_up_to(fd->get(), limit, content))
      return make_error(errc::resolve_failed, "cannot read '" + path_abs + "': " + errno_text(errno));
    if (content.size() > max_bytes) return make_error(errc::invalid_value, too_big);
    json out;
    const std::size_t size = content.size();
    if (as_base64) {
      out["content"] = encode_base64(content);
    } else {
      if (!is_valid_utf8(content))
        return make_error(errc::invalid_value, "'" + path_abs + "' is not valid UTF-8 text; read it with encoding \"base64\"");
      out["content"] = std::move(content);
    }
    out["size"] = size;
    out["encoding"] = as_base64 ? "base64" : "utf8";
    return out;
  });
}

policy::result<json> fs_write(const std::string& allowed_root, const std::string& path_abs,
                              std::string_view content, std::size_t max_bytes, std::span<const policy::file_id> denied) {
  return guarded("host/fs/write", [&]() -> policy::result<json> {
    if (content.size() > max_bytes)
      return make_error(errc::invalid_value, "the content is " + std::to_string(content.size()) +
                                                 " bytes, over the limit of " + std::to_string(max_bytes) + " bytes");
    // No O_TRUNC here: the file is truncated only once it is known to be a regular file.
    // O_NONBLOCK keeps a FIFO from blocking the open (it fails with ENXIO without a reader).
    auto fd = open_beneath(allowed_root, path_abs, O_WRONLY | O_CREAT | O_NONBLOCK, 0644, denied);
    if (!fd) return fd.err();
    struct stat st {};
    if (::fstat(fd->get(), &st) != 0)
      return make_error(errc::resolve_failed, "cannot stat '" + path_abs + "': " + errno_text(errno));
    if (!S_ISREG(st.st_mode))
      return make_error(errc::invalid_value, "'" + path_abs + "' is not a regular file; refused");
    if (::ftruncate(fd->get(), 0) != 0)
      return make_error(errc::resolve_failed, "cannot truncate '" + path_abs + "': " + errno_text(errno));
    std::size_t done = 0;
    while (done < content.size()) {
      ssize_t n = ::write(fd->get(), content.data() + done, content.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return make_error(errc::resolve_failed, "cannot write '" + path_abs + "': " + errno_text(errno));
      }
      done += static_cast<std::size_t>(n);
    }
    // close() reports delayed write errors (NFS, quota); a write is only done once it passed.
    if (::close(fd->release()) != 0)
      return make_error(errc::resolve_failed, "cannot finish writing '" + path_abs + "': " + errno_text(errno));
    return json{{"bytesWritten", done}};
  });
}

policy::result<json> fs_list(const std::string& allowed_root, const std::string& path_abs, std::size_t max_entries,
                             std::span<const policy::file_id> denied) {
  return guarded("host/fs/list", [&]() -> policy::result<json> {
    auto fd = open_beneath(allowed_root, path_abs, O_RDONLY | O_DIRECTORY, 0, denied);
    if (!fd) return fd.err();
    DIR* dir = ::fdopendir(fd->get());
    if (dir == nullptr)
      return make_error(errc::resolve_failed, "cannot list '" + path_abs + "': " + errno_text(errno));
    fd->release();  // owned by `dir` now
    std::unique_ptr<DIR, dir_closer> dir_guard(dir);
    // Keep the smallest `max_entries` names in a max-heap: bounded memory for huge
    // directories, and the kept subset does not depend on readdir order.
    std::priority_queue<std::string> kept;
    bool truncated = false;
    while (true) {
      errno = 0;
      dirent* e = ::readdir(dir);
      if (e == nullptr) {
        if (errno != 0) return make_error(errc::resolve_failed, "cannot list '" + path_abs + "': " + errno_text(errno));
        break;
      }
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      if (kept.size() < max_entries) {
        kept.emplace(name);
      } else {
        truncated = true;
        if (!kept.empty() && name < kept.top()) {
          kept.pop();
          kept.emplace(name);
        }
      }
    }
    std::vector<std::string> names;
    names.reserve(kept.size());
    while (!kept.empty()) {
      names.push_back(kept.top());
      kept.pop();
    }
    std::reverse(names.begin(), names.end());
    json entries = json::array();
    for (std::string& name : names) {
      struct stat st {};
      // A single component with AT_SYMLINK_NOFOLLOW: nothing is followed, nothing escapes.
      if (::fstatat(::dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;  // removed while listing
        st = {};
        st.st_mode = S_IFSOCK;          // unknown: reported as "other"
      }
      json entry;
      if (is_valid_utf8(name)) {
        entry["name"] = name;
      } else {
        entry["name"] = to_valid_utf8(name);
        entry["nameBase64"] = encode_base64(name);
      }
      entry["type"] = type_name(st.st_mode);
      entry["size"] = static_cast<std::uint64_t>(std::max<off_t>(st.st_size, 0));
      entries.push_back(std::move(entry));
    }
    return json{{"entries", std::move(entries)}, {"truncated", truncated}};
  });
}

std::string env_name_problem(const std::string& name) {
  if (name.empty() || name.find('=') != std::string::npos || has_nul(name))
    return "'" + to_valid_utf8(name) + "' is not an environment variable name";
  return {};
}

policy::result<json> env_get(const std::string& name) {
  return guarded("host/env/get", [&]() -> policy::result<json> {
    if (std::string why = env_name_problem(name); !why.empty()) return make_error(errc::invalid_value, why);
    const char* value = std::getenv(name.c_str());
    json out;
    if (value == nullptr) {
      out["value"] = nullptr;
    } else {
      put_text_or_base64(out, "value", value, false);
    }
    return out;
  });
}

// ---------------------------------------------------------------------------------------
// Network

namespace {

// The addresses of this machine's own interfaces, and the one of them `ip` is (an IPv4-mapped
// IPv6 address read as its IPv4 one), or "" when it is none of them. A connection to one stays
// on this machine, as one to 127.0.0.1 does, whatever its range: a fetch of the machine's own
// eth0 address reached a service listening on all addresses (a review). nullopt: the list could
// not be had.
std::optional<std::string> own_interface_of(const policy::ip_address& ip) {
  policy::ip_address v = ip;
  static constexpr std::uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (ip.v6 && std::equal(std::begin(mapped), std::end(mapped), ip.bytes.begin())) {
    v = policy::ip_address{};
    std::copy(ip.bytes.begin() + 12, ip.bytes.end(), v.bytes.begin());
  }
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return std::nullopt;
  std::string found;
  for (const ifaddrs* i = all; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    const std::size_t len = i->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (auto a = address_of(i->ifa_addr, len); a && *a == v) found = i->ifa_name ? i->ifa_name : "?";
  }
  ::freeifaddrs(all);
  return found;
}

}  // namespace

policy::result<std::vector<policy::ip_address>> vet_addresses(std::string_view host,
                                                               const std::vector<policy::ip_address>& addresses,
                                                               const policy::domain_rules& rules) {
  try {
    if (addresses.empty())
      return make_error(errc::refused, "the host '" + std::string(host) + "' has no address");
    if (auto literal = policy::parse_ip_literal(host)) {
      std::string canonical = literal->to_string();
      bool listed = std::find(rules.exact.begin(), rules.exact.end(), canonical) != rules.exact.end();
      if (!listed && policy::is_refused_address(*literal))
        return make_error(errc::refused, "the address " + canonical +
                                                   " is loopback, private or link-local; list it literally to allow it");
      if (!listed) {
        const auto own = own_interface_of(*literal);
        if (!own) return make_error(errc::refused, "this machine's own addresses could not be listed, so " + canonical +
                                                       " cannot be told apart from them; refused");
        if (!own->empty())
          return make_error(errc::refused, "the address " + canonical + " is this machine's own (" + *own +
                                               "), which reaches its local services; list it literally to allow it");
      }
      return std::vector<policy::ip_address>{*literal};
    }
    if (listed_by_name(rules, host)) return addresses;
    if (policy::decision d = policy::vet_host_name(host, addresses); !d.allowed()) return make_error(errc::refused, d.reason);
    for (const policy::ip_address& a : addresses) {
      const auto own = own_interface_of(a);
      if (!own) return make_error(errc::refused, "this machine's own addresses could not be listed, so the addresses of '" +
                                                     std::string(host) + "' cannot be told apart from them; refused");
      if (!own->empty())
        return make_error(errc::refused, "the host '" + std::string(host) + "' resolves to " + a.to_string() +
                                             ", this machine's own address (" + *own +
                                             "), which reaches its local services; list the host by name to allow it");
    }
    return addresses;
  } catch (const std::exception& e) {
    return make_error(errc::resolve_failed, std::string("checking addresses failed inside dhara: ") + e.what());
  }
}

std::optional<policy::error> fetch_request_problem(std::string_view method, const json& headers) {
  auto problem = [](errc code, std::string why) { return std::optional<policy::error>(policy::error{code, std::move(why)}); };
  const std::string verb = method.empty() ? std::string("GET") : std::string(method);
  if (!is_token(verb) || verb.size() > 32) return problem(errc::invalid_value, "'" + to_valid_utf8(verb) + "' is not an HTTP method");
  if (headers.is_null()) return std::nullopt;
  if (!headers.is_object()) return problem(errc::invalid_type, "headers must be an object of strings");
  for (const auto& [name, value] : headers.items()) {
    if (!value.is_string())
      return problem(errc::invalid_type, "the header '" + to_valid_utf8(name) + "' must have a string value");
    // CR/LF would let a value start a second header or a second request.
    if (!is_token(name) || !is_header_value(value.get_ref<const std::string&>()))
      return problem(errc::invalid_value, "the header '" + to_valid_utf8(name) + "' has a character HTTP does not allow");
    const std::string lowered = lower(name);
    // The name the request is for is the URL's, checked against the manifest's list: a Host
    // of the extension's choosing reached another site on the listed address (a shared host,
    // a CDN, a proxy behind the name), and framing headers would let one request carry
    // another (a review).
    if (lowered == "host" || lowered == "connection" || lowered == "transfer-encoding" || lowered == "content-length" ||
        lowered == "upgrade" || lowered == "te" || lowered == "trailer" || lowered.starts_with("proxy-"))
      return problem(errc::invalid_value, "the header '" + name +
                                              "' is dhara's to set: the host is the URL's, checked against "
                                              "network.outbound, and the framing is libcurl's; send the request without it");
  }
  return std::nullopt;
}

policy::result<json> net_fetch(const std::string& url, std::string_view method, const json& headers,
                               std::string_view body, const policy::domain_rules& rules,
                               const fetch_limits& limits) {
  return guarded("host/net/fetch", [&]() -> policy::result<json> {
    const std::string verb = method.empty() ? std::string("GET") : std::string(method);
    if (auto why = fetch_request_problem(method, headers)) return std::move(*why);
    if (limits.timeout_ms == 0) return make_error(errc::invalid_value, "the fetch timeout must be positive");

    auto parsed = policy::parse_url(url);
    if (!parsed) return parsed.err();
    const std::string& host = parsed->host;
    // The pure rules first (scheme, domain list, IP literals, local names), so a host the
    // rules refuse is not even looked up in DNS. The checker ran them already; the fetch
    // must not depend on the caller having passed it the same rules.
    policy::decision d = policy::check_url(rules, url);
    if (!d.allowed()) return make_error(errc::refused, d.reason);

    // Resolve here rather than let libcurl do it: the addresses must be checked before any
    // connection, and a name such as "internal.example" may resolve to 10.x or 127.x.
    std::vector<policy::ip_address> resolved;
    const auto literal = policy::parse_ip_literal(host);
    if (literal) {
      resolved.push_back(*literal);
    } else {
      if (!is_dns_name(host))
        return make_error(errc::refused, "the host '" + to_valid_utf8(host) + "' is not a DNS name (IDNs must be punycode)");
      auto r = resolve_host(host);
      if (!r) return r.err();
      resolved = std::move(*r);
    }
    auto vetted = vet_addresses(host, resolved, rules);
    if (!vetted) return vetted.err();
    if (!curl_agrees_on_host(url, host))
      return make_error(errc::refused, "the URL '" + url + "' names its host ambiguously; refused");

    if (CURLcode init = curl_init_once(); init != CURLE_OK)
      return make_error(errc::resolve_failed, std::string("libcurl could not start: ") + curl_easy_strerror(init));
    std::unique_ptr<CURL, curl_deleter> curl(curl_easy_init());
    if (!curl) return make_error(errc::resolve_failed, "libcurl could not start a transfer");
    CURL* h = curl.get();

    fetch_state st;
    st.allowed = *vetted;
    st.port = parsed->port;
    st.max_body = limits.max_body_bytes;

    // Pin the name to the vetted addresses: libcurl would otherwise resolve it again, and a
    // DNS answer that changed in between (DNS rebinding: public on the first query, 127.0.0.1
    // on the second) would reach an address nobody checked.
    std::unique_ptr<curl_slist, slist_deleter> pin;
    if (!literal) {
      std::string entry = host + ":" + std::to_string(parsed->port) + ":";
      for (std::size_t i = 0; i < vetted->size(); ++i) {
        const policy::ip_address& ip = (*vetted)[i];
        if (i > 0) entry += ",";
        entry += ip.v6 ? "[" + ip.to_string() + "]" : ip.to_string();
      }
      if (!slist_add(pin, entry)) return make_error(errc::resolve_failed, "out of memory");
    }

    std::unique_ptr<curl_slist, slist_deleter> request_headers;
    bool has_expect = false;
    if (headers.is_object()) {
      for (const auto& [name, value] : headers.items()) {  // each checked by fetch_request_problem
        const std::string& text = value.get_ref<const std::string&>();
        if (lower(name) == "expect") has_expect = true;
        if (!slist_add(request_headers, text.empty() ? name + ";" : name + ": " + text))
          return make_error(errc::resolve_failed, "out of memory");
      }
    }
    // libcurl would otherwise send "Expect: 100-continue" for large bodies and wait for it.
    if (!has_expect && !slist_add(request_headers, "Expect:")) return make_error(errc::resolve_failed, "out of memory");

    char errbuf[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    // No redirects: the Location may name any host, including 127.0.0.1 or a metadata
    // service, and it was never checked. The 3xx goes back to the extension, which may ask
    // for the new URL in a request of its own, checked like any other.
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 0L);
    // Signals belong to dhara's event loop; libcurl must not use SIGALRM for DNS timeouts.
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(std::min<std::uint64_t>(limits.timeout_ms, 24ull * 3600 * 1000)));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::min<std::uint64_t>(limits.timeout_ms, 24ull * 3600 * 1000)));
    // No proxy from http_proxy/https_proxy/ALL_PROXY: a proxy would make the vetted address
    // meaningless (the connection would go to the proxy, which reaches anything).
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "dhara");
    if (pin) curl_easy_setopt(h, CURLOPT_RESOLVE, pin.get());
    curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, &open_socket);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, &st);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &st);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &st);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, request_headers.get());
    // libcurl's default read callback reads stdin, which is dhara's JSON-RPC stream.
    curl_easy_setopt(h, CURLOPT_READFUNCTION, &no_upload);
    if (verb == "HEAD") {
      curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (!body.empty() || verb == "POST" || verb == "PUT" || verb == "PATCH") {
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
      // Never null: a null POSTFIELDS makes libcurl fall back to its read callback.
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.empty() ? "" : body.data());
      if (verb != "POST") curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, verb.c_str());
    } else if (verb != "GET") {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, verb.c_str());
    }

    CURLcode rc = curl_easy_perform(h);
    if (!st.refused.empty()) return make_error(errc::refused, st.refused);
    if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && st.truncated)) {
      std::string detail = errbuf[0] != '\0' ? std::string(errbuf) : std::string(curl_easy_strerror(rc));
      if (rc == CURLE_OPERATION_TIMEDOUT)
        return make_error(errc::resolve_failed, "fetching '" + url + "' timed out after " +
                                                    std::to_string(limits.timeout_ms) + " ms");
      return make_error(errc::resolve_failed, "fetching '" + url + "' failed: " + to_valid_utf8(detail));
    }
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    json out;
    out["status"] = status;
    json hdrs = json::object();
    for (auto& [name, value] : st.headers) hdrs[name] = value;
    out["headers"] = std::move(hdrs);
    put_text_or_base64(out, "body", std::move(st.body), st.truncated);
    out["truncated"] = st.truncated;
    return out;
  });
}

// ---------------------------------------------------------------------------------------
// Processes

namespace {

// The process groups of the spawns running now, so that a session's end ends them: a spawn
// of `sleep` kept dhara from exiting after `shutdown` until its timeout (up to 24 h).
struct running_spawns {
  std::mutex mutex;
  std::map<pid_t, std::string> groups;  // → the extension it runs for ("" when not said)
  bool ended = false;  // end_running_spawns() was called: a spawn started now is ended at once
  std::map<std::string, std::uint64_t> profile_changes;  // end_spawns_of calls, by extension
};

running_spawns& spawns() {
  static running_spawns* s = new running_spawns;  // never destroyed: workers may outlive main
  return *s;
}

// Registers a started child's group for its lifetime (until just before it is reaped, while
// its pid still names it).
class running_spawn {
 public:
  running_spawn(pid_t pid, const spawn_owner& owner) : pid_(pid) {
    std::lock_guard lock(spawns().mutex);
    spawns().groups.emplace(pid_, owner.extension);
    // A spawn planned under a profile that changed before it started runs the old one: ended.
    const bool profile_changed = !owner.extension.empty() && spawns().profile_changes[owner.extension] != owner.profile;
    if (spawns().ended || profile_changed) ::kill(-pid_, SIGKILL);
  }
  ~running_spawn() { forget(); }
  void forget() {
    if (pid_ < 0) return;
    std::lock_guard lock(spawns().mutex);
    spawns().groups.erase(pid_);
    pid_ = -1;
  }
  running_spawn(const running_spawn&) = delete;
  running_spawn& operator=(const running_spawn&) = delete;

 private:
  pid_t pid_;
};

}  // namespace

void allow_spawns() {
  std::lock_guard lock(spawns().mutex);
  spawns().ended = false;
}

void end_running_spawns() {
  std::lock_guard lock(spawns().mutex);
  spawns().ended = true;
  for (const auto& [group, owner] : spawns().groups) ::kill(-group, SIGKILL);
}

std::uint64_t spawn_profile(const std::string& owner) {
  std::lock_guard lock(spawns().mutex);
  return spawns().profile_changes[owner];
}

std::size_t end_spawns_of(const std::string& owner) {
  std::lock_guard lock(spawns().mutex);
  ++spawns().profile_changes[owner];
  std::size_t ended = 0;
  for (const auto& [group, whose] : spawns().groups)
    if (whose == owner && ::kill(-group, SIGKILL) == 0) ++ended;
  return ended;
}

policy::result<json> process_spawn(const std::vector<std::string>& argv, const std::string& cwd,
                                   std::uint64_t timeout_ms, std::size_t max_output,
                                   const std::vector<std::string>& env, const spawn_owner& owner) {
  return guarded("host/process/spawn", [&]() -> policy::result<json> {
    if (argv.empty()) return make_error(errc::invalid_value, "argv is empty");
    if (argv[0].empty() || argv[0].front() != '/')
      return make_error(errc::invalid_value, "argv[0] '" + to_valid_utf8(argv[0]) + "' is not an absolute path");
    for (const std::string& a : argv)
      if (has_nul(a)) return make_error(errc::invalid_value, "an argv element holds a NUL byte");
    for (const std::string& e : env)
      if (has_nul(e) || e.find('=') == std::string::npos || e.front() == '=')
        return make_error(errc::invalid_value, "the environment entry '" + to_valid_utf8(e) + "' is not NAME=value");
    if (has_nul(cwd) || (!cwd.empty() && cwd.front() != '/'))
      return make_error(errc::invalid_value, "the working directory '" + to_valid_utf8(cwd) + "' is not an absolute path");
    if (timeout_ms == 0) return make_error(errc::invalid_value, "the timeout must be positive");

    int out_fds[2], err_fds[2];
    if (::pipe2(out_fds, O_CLOEXEC) != 0) return make_error(errc::resolve_failed, "cannot create a pipe: " + errno_text(errno));
    output_pipe out_pipe{unique_fd(out_fds[0]), {}, false};
    unique_fd out_write(out_fds[1]);
    if (::pipe2(err_fds, O_CLOEXEC) != 0) return make_error(errc::resolve_failed, "cannot create a pipe: " + errno_text(errno));
    output_pipe err_pipe{unique_fd(err_fds[0]), {}, false};
    unique_fd err_write(err_fds[1]);

    spawn_attrs sa;
    int setup = 0;
    setup |= posix_spawn_file_actions_addopen(&sa.actions, 0, "/dev/null", O_RDONLY, 0);
    setup |= posix_spawn_file_actions_adddup2(&sa.actions, out_write.get(), 1);
    setup |= posix_spawn_file_actions_adddup2(&sa.actions, err_write.get(), 2);
    if (!cwd.empty()) setup |= posix_spawn_file_actions_addchdir_np(&sa.actions, cwd.c_str());
    // Descriptors some library opened without O_CLOEXEC (sockets, the audit file) must not
    // reach the child.
    setup |= posix_spawn_file_actions_addclosefrom_np(&sa.actions, 3);
    // A new session: the child leads its own process group (so the timeout can kill
    // everything it started) and has no controlling terminal (so it cannot read the user's
    // answers to prompts or inject keystrokes with TIOCSTI). Signals dhara ignores (SIGPIPE)
    // or blocks are reset, since ignored dispositions and the mask survive exec.
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    setup |= posix_spawnattr_setflags(&sa.attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    setup |= posix_spawnattr_setsigmask(&sa.attr, &none);
    setup |= posix_spawnattr_setsigdefault(&sa.attr, &all);
    if (setup != 0) return make_error(errc::resolve_failed, "cannot prepare the process start (out of memory)");

    std::vector<char*> cargv, cenv;
    for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    for (const std::string& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
    cenv.push_back(nullptr);

    const auto start = std::chrono::steady_clock::now();
    pid_t pid = -1;
    // posix_spawn, not posix_spawnp: no PATH search, argv[0] is the checked absolute path.
    int rc = ::posix_spawn(&pid, argv[0].c_str(), &sa.actions, &sa.attr, cargv.data(), cenv.data());
    if (rc != 0) {
      if (rc == ENOENT)
        return make_error(errc::not_found, "cannot run '" + argv[0] + "'" + (cwd.empty() ? "" : " in '" + cwd + "'") +
                                               ": the program or the working directory does not exist");
      return make_error(errc::resolve_failed, "cannot run '" + argv[0] + "': " + errno_text(rc));
    }
    running_spawn registered(pid, owner);
    out_write.reset();  // only the child holds the write ends now, so EOF means it closed them
    err_write.reset();
    ::fcntl(out_pipe.fd.get(), F_SETFL, O_NONBLOCK);
    ::fcntl(err_pipe.fd.get(), F_SETFL, O_NONBLOCK);

    // A pidfd turns "the child exited" into a poll event; without one (old kernel) we look
    // every 20 ms.
    unique_fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    const auto deadline = start + std::chrono::milliseconds(std::min<std::uint64_t>(timeout_ms, 24ull * 3600 * 1000));
    bool exited = false, timed_out = false;
    auto child_exited = [&] {
      siginfo_t info{};
      // WNOWAIT leaves the child a zombie: its pid (and so its process group id) cannot be
      // reused before the group kill below.
      return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
    };
    // Wait until the child exited and both pipes closed (a background grandchild may hold
    // them open, as with a shell's command substitution), or until the timeout.
    while (out_pipe.fd.valid() || err_pipe.fd.valid() || !exited) {
      auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        timed_out = true;
        break;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
      pollfd fds[3];
      nfds_t count = 0;
      int out_i = -1, err_i = -1, pid_i = -1;
      if (out_pipe.fd.valid()) { out_i = static_cast<int>(count); fds[count++] = {out_pipe.fd.get(), POLLIN, 0}; }
      if (err_pipe.fd.valid()) { err_i = static_cast<int>(count); fds[count++] = {err_pipe.fd.get(), POLLIN, 0}; }
      if (!exited && pidfd.valid()) { pid_i = static_cast<int>(count); fds[count++] = {pidfd.get(), POLLIN, 0}; }
      int wait_ms = static_cast<int>(std::min<long long>(left, !exited && !pidfd.valid() ? 20 : 60000));
      int n = ::poll(fds, count, wait_ms);
      if (n < 0 && errno != EINTR) break;
      if (n > 0) {
        if (out_i >= 0 && fds[out_i].revents != 0) out_pipe.drain(max_output);
        if (err_i >= 0 && fds[err_i].revents != 0) err_pipe.drain(max_output);
      }
      if (!exited && (pid_i < 0 || (n > 0 && fds[pid_i].revents != 0))) exited = child_exited();
    }
    // Whatever happened, nothing of the group outlives the call. The child has not been
    // reaped yet, so -pid still names its group and no unrelated process.
    ::kill(-pid, SIGKILL);
    registered.forget();  // before the reap frees the pid for reuse
    int status = 0;
    pid_t reaped = -1;
    do {
      reaped = ::waitpid(pid, &status, 0);
    } while (reaped < 0 && errno == EINTR);
    // Only if someone else reaped our child (SIGCHLD set to SIG_IGN, a waitpid(-1) elsewhere):
    // its status is lost, and guessing "exit 0" would be a lie.
    if (reaped != pid)
      return make_error(errc::resolve_failed, "the status of '" + argv[0] + "' was lost (the child was reaped elsewhere)");
    // Output written just before the kill is still in the pipes.
    if (out_pipe.fd.valid()) out_pipe.drain(max_output);
    if (err_pipe.fd.valid()) err_pipe.drain(max_output);

    json result;
    if (WIFSIGNALED(status)) {
      result["exitCode"] = nullptr;
      result["signal"] = signal_name(WTERMSIG(status));
    } else {
      result["exitCode"] = WEXITSTATUS(status);
      result["signal"] = nullptr;
    }
    const bool truncated = out_pipe.capped || err_pipe.capped;
    put_text_or_base64(result, "stdout", std::move(out_pipe.data), out_pipe.capped);
    put_text_or_base64(result, "stderr", std::move(err_pipe.data), err_pipe.capped);
    result["truncated"] = truncated;
    result["timedOut"] = timed_out;
    return result;
  });
}

}  // namespace dhara::io
