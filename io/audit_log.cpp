// audit.jsonl on disk: chain recovery at open, batched hash-chained appends with one write(2)
// per file, rotation, multi-process safety through a lock file, and the chain verifier.
#include "io/audit_log.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <utility>
#include <variant>

// The chain hashes with OpenSSL's low-level SHA-256 calls where the library still has them
// (sha256_hasher below says why); they are deprecated since OpenSSL 3.0, so their warning
// is silenced here, and a library built without them is hashed through EVP instead.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "io/files.hpp"
#include "policy/audit_line_check.hpp"
#include "policy/json_text.hpp"

namespace dhara::io {

namespace {

using policy::errc;
using policy::error;
using policy::make_error;

constexpr std::string_view current_name = "audit.jsonl";
constexpr std::string_view lock_name = "audit.lock";
constexpr char zero_hash[65] = "0000000000000000000000000000000000000000000000000000000000000000";

std::string errno_text(int err) { return std::strerror(err); }

error io_error(std::string_view what, const std::string& path, int err) {
  return make_error(errc::invalid_value,
                    "cannot " + std::string(what) + " " + path + ": " + errno_text(err));
}

std::string join(const std::string& dir, std::string_view name) {
  std::string p = dir;
  if (p.empty() || p.back() != '/') p.push_back('/');
  p.append(name);
  return p;
}

std::string rotated_name(std::uint64_t n) { return "audit." + std::to_string(n) + ".jsonl"; }

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// ---- SHA-256 ---------------------------------------------------------------------------

// With SSE2, sixteen bytes at a time: each nibble n becomes '0' + n, plus 'a' - '0' - 10 when
// n > 9, and the high and low digits are interleaved: ~45 instructions a digest (callgrind),
// where copies of each byte's two digits from a table (digest_hex_portable) took ~256. The
// audit writer makes one a line; the hashers below call this one, which the compiler inlines
// (detail::digest_hex, the same code for the tests, is a call of its own).
inline void write_digest_hex(const unsigned char* digest, char* out) {
#if defined(__SSE2__)
  const __m128i low_nibble = _mm_set1_epi8(0x0F);
  auto digits = [](__m128i nibbles) {  // 0 to 15 in each byte: never negative as a signed byte
    const __m128i past_nine = _mm_and_si128(_mm_cmpgt_epi8(nibbles, _mm_set1_epi8(9)), _mm_set1_epi8('a' - '0' - 10));
    return _mm_add_epi8(_mm_add_epi8(nibbles, _mm_set1_epi8('0')), past_nine);
  };
  for (unsigned half = 0; half < 2; ++half) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(digest + 16 * half));
    const __m128i high = digits(_mm_and_si128(_mm_srli_epi16(bytes, 4), low_nibble));
    const __m128i low = digits(_mm_and_si128(bytes, low_nibble));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 32 * half), _mm_unpacklo_epi8(high, low));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 32 * half + 16), _mm_unpackhi_epi8(high, low));
  }
#else
  detail::digest_hex_portable(digest, out);
#endif
}

}  // namespace

namespace detail {

void digest_hex(const unsigned char* digest, char* out) { write_digest_hex(digest, out); }

void digest_hex_portable(const unsigned char* digest, char* out) {
  // The two hex digits of every byte value, in order: a digest's hex is 32 two-byte copies.
  static constexpr std::array<char, 512> hex_pairs = [] {
    std::array<char, 512> t{};
    constexpr char hex[] = "0123456789abcdef";
    for (unsigned b = 0; b < 256; ++b) {
      t[2 * b] = hex[b >> 4];
      t[2 * b + 1] = hex[b & 0xF];
    }
    return t;
  }();
  for (unsigned i = 0; i < 32; ++i) std::memcpy(out + 2 * i, hex_pairs.data() + 2 * digest[i], 2);
}

}  // namespace detail

namespace {

// One fetched SHA-256 implementation and one context, reused for every line: fetching or
// allocating per line would cost more than hashing a 300-byte line (~0.2 µs with SHA-NI).
// Compiled always, so the fallback below cannot rot unseen.
class sha256_evp {
 public:
  sha256_evp() : md_(EVP_MD_fetch(nullptr, "SHA256", nullptr)), ctx_(EVP_MD_CTX_new()) {}
  ~sha256_evp() {
    EVP_MD_CTX_free(ctx_);
    EVP_MD_free(md_);
  }
  sha256_evp(const sha256_evp&) = delete;
  sha256_evp& operator=(const sha256_evp&) = delete;

  bool usable() const { return md_ != nullptr && ctx_ != nullptr; }

  // Writes hex(SHA-256(prev ‖ body)) into out[0..64); false if OpenSSL failed.
  bool chain_hash(std::string_view prev, std::string_view body, char* out) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestInit_ex2(ctx_, md_, nullptr) != 1 ||
        EVP_DigestUpdate(ctx_, prev.data(), prev.size()) != 1 ||
        EVP_DigestUpdate(ctx_, body.data(), body.size()) != 1 ||
        EVP_DigestFinal_ex(ctx_, digest, &len) != 1 || len != 32) {
      return false;
    }
    write_digest_hex(digest, out);
    return true;
  }

 private:
  EVP_MD* md_;
  EVP_MD_CTX* ctx_;
};

#ifndef OPENSSL_NO_DEPRECATED_3_0
// SHA256_Init/Update/Final reach the block function directly. EVP goes through the
// provider's dispatch on every call: of a typical line's chain hash (64 + ~300 bytes, ~260 ns
// with SHA-NI here), that dispatch costs 20-80 ns more, on the audit writer's one thread that
// every line passes (docs/performance.md, "The chain hash without EVP"). The digest is the
// same SHA-256 either way (tests recompute the chain with Python's hashlib).
class sha256_low_level {
 public:
  bool usable() const { return true; }

  // Writes hex(SHA-256(prev ‖ body)) into out[0..64); false if OpenSSL failed.
  bool chain_hash(std::string_view prev, std::string_view body, char* out) {
    SHA256_CTX ctx;
    unsigned char digest[SHA256_DIGEST_LENGTH];
    if (SHA256_Init(&ctx) != 1 || SHA256_Update(&ctx, prev.data(), prev.size()) != 1 ||
        SHA256_Update(&ctx, body.data(), body.size()) != 1 || SHA256_Final(digest, &ctx) != 1) {
      return false;
    }
    write_digest_hex(digest, out);
    return true;
  }
};
using sha256_hasher = sha256_low_level;
#else
using sha256_hasher = sha256_evp;  // OpenSSL built without its deprecated calls
#endif

// ---- reading ---------------------------------------------------------------------------

// pread until `len` bytes or EOF; returns bytes read or -errno.
long long read_at(int fd, char* buf, std::size_t len, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < len) {
    const ssize_t n = ::pread(fd, buf + done, len - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -static_cast<long long>(errno);
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return static_cast<long long>(done);
}

// The end of a file as recovery sees it.
struct file_tail {
  std::uint64_t complete_bytes = 0;  // bytes up to and including the last newline
  std::string torn;                  // bytes after the last newline (a torn write)
  std::string last_line;             // the last complete line, without its newline
  bool has_line = false;
};

// Reads backwards from the end of `fd` (of `size` bytes) far enough to see the torn tail
// and the last complete line, each at most max_audit_line_bytes long.
policy::result<file_tail> read_tail(int fd, std::uint64_t size, const std::string& path) {
  file_tail tail;
  if (size == 0) return tail;
  const std::uint64_t limit = 2 * static_cast<std::uint64_t>(max_audit_line_bytes) + 2;
  std::uint64_t window = 64 * 1024;
  std::string buf;
  while (true) {
    window = std::min({window, size, limit});
    const std::uint64_t start = size - window;
    buf.resize(static_cast<std::size_t>(window));
    const long long n = read_at(fd, buf.data(), buf.size(), start);
    if (n < 0) return io_error("read", path, static_cast<int>(-n));
    if (static_cast<std::uint64_t>(n) != window) {
      return make_error(errc::invalid_value, path + " shrank while it was read; is another "
                                                    "program writing it?");
    }
    const bool whole = start == 0;
    // Where the last complete line ends (its newline), in buffer coordinates.
    std::size_t line_end = buf.size() - 1;
    if (buf.back() != '\n') {
      const std::size_t nl = buf.rfind('\n');
      if (nl == std::string::npos && !whole) {
        if (window >= limit) break;
        window *= 2;
        continue;
      }
      const std::size_t torn_begin = nl == std::string::npos ? 0 : nl + 1;
      tail.torn.assign(buf, torn_begin);
      if (nl == std::string::npos) return tail;  // the whole file is one torn line
      line_end = nl;
    }
    const std::size_t prev = line_end == 0 ? std::string::npos : buf.rfind('\n', line_end - 1);
    if (prev == std::string::npos && !whole) {
      if (window >= limit) break;
      window *= 2;
      continue;
    }
    const std::size_t line_begin = prev == std::string::npos ? 0 : prev + 1;
    tail.complete_bytes = start + line_end + 1;
    tail.last_line.assign(buf, line_begin, line_end - line_begin);
    tail.has_line = true;
    if (tail.torn.size() > max_audit_line_bytes || tail.last_line.size() > max_audit_line_bytes) break;
    return tail;
  }
  return make_error(errc::invalid_value,
                    path + " ends with a line longer than " +
                        std::to_string(max_audit_line_bytes) +
                        " bytes: it was not written by dhara. Check it with `dhara doctor "
                        "--audit-log --verify`, then move it away to start a new trail");
}

// The N of every "audit.N.jsonl" in `dir`, ascending (N >= 1, no leading zeros).
policy::result<std::vector<std::uint64_t>> rotated_numbers(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    const int err = errno;
    if (err == ENOENT) return make_error(errc::not_found, dir + " does not exist");
    return io_error("list", dir, err);
  }
  std::vector<std::uint64_t> out;
  errno = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    constexpr std::string_view head = "audit.";
    constexpr std::string_view tail = ".jsonl";
    if (name.size() <= head.size() + tail.size() || !name.starts_with(head) || !name.ends_with(tail)) continue;
    const std::string_view digits = name.substr(head.size(), name.size() - head.size() - tail.size());
    if (digits.size() > 9 || digits.front() == '0') continue;
    std::uint64_t n = 0;
    const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc{} || p != digits.data() + digits.size()) continue;
    out.push_back(n);
  }
  const int err = errno;
  ::closedir(d);
  if (err != 0) return io_error("list", dir, err);
  std::sort(out.begin(), out.end());
  return out;
}

// Opens a file of the trail for reading: never blocks on a FIFO planted under the name, and
// never follows a symlink (the writer would not either).
policy::result<int> open_for_reading(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return make_error(errc::not_found, path + " does not exist");
    if (err == ELOOP) return make_error(errc::invalid_path, path + " is a symbolic link");
    return io_error("open", path, err);
  }
  return fd;
}

// Holds a flock (exclusive: a writer; shared: the verifier's snapshot) for one scope, or
// longer once kept (audit_log::keep_lock).
class file_lock {
 public:
  explicit file_lock(int fd, int operation = LOCK_EX) : fd_(fd) {
    int rc = ::flock(fd_, operation | LOCK_NB);
    if (rc != 0 && (errno == EWOULDBLOCK || errno == EINTR)) {
      waited_ = errno == EWOULDBLOCK;  // another open file holds it: wait
      do rc = ::flock(fd_, operation);
      while (rc != 0 && errno == EINTR);
    }
    err_ = rc == 0 ? 0 : errno;
  }
  ~file_lock() {
    if (err_ == 0 && !kept_) ::flock(fd_, LOCK_UN);
  }
  file_lock(const file_lock&) = delete;
  file_lock& operator=(const file_lock&) = delete;
  int error_number() const { return err_; }
  bool waited() const { return waited_; }  ///< another process held it when it was asked for
  void keep() { kept_ = true; }

 private:
  int fd_;
  int err_;
  bool waited_ = false;
  bool kept_ = false;
};

std::string torn_note(const std::string& path, const std::string& torn) {
  return path + ": removed a torn last line (" + std::to_string(torn.size()) +
         " bytes without a newline, left by a write that never completed, so no decision was "
         "released on it): " +
         policy::printable_excerpt(torn, 120);
}

}  // namespace

// ---- audit_log -------------------------------------------------------------------------

struct audit_log::hasher {
  sha256_hasher sha;
};

struct audit_sync_handle::file {
  int fd;
  std::string path;
  file(int f, std::string p) : fd(f), path(std::move(p)) {}
  file(const file&) = delete;
  file& operator=(const file&) = delete;
  ~file() { ::close(fd); }
};

std::string audit_sync_handle::sync() const {
  if (!file_) return {};
  int rc;
  do rc = ::fdatasync(file_->fd);
  while (rc != 0 && errno == EINTR);
  if (rc == 0) return {};
  return io_error("fdatasync", file_->path, errno).message;
}

audit_log::audit_log(std::string dir, audit_log_options options)
    : dir_(std::move(dir)),
      path_(join(dir_, current_name)),
      options_(options),
      hasher_(std::make_unique<hasher>()) {
  std::memcpy(last_hash_, zero_hash, sizeof last_hash_);
}

audit_log::audit_log(audit_log&& other) noexcept
    : dir_(std::move(other.dir_)),
      path_(std::move(other.path_)),
      options_(other.options_),
      fd_(std::exchange(other.fd_, -1)),
      lock_fd_(std::exchange(other.lock_fd_, -1)),
      keep_lock_(other.keep_lock_),
      lock_held_(std::exchange(other.lock_held_, false)),
      waited_for_lock_(other.waited_for_lock_),
      lock_ino_(other.lock_ino_),
      ino_(other.ino_),
      dev_(other.dev_),
      size_(other.size_),
      last_seq_(other.last_seq_),
      recovered_(std::move(other.recovered_)),
      broken_(std::move(other.broken_)),
      hasher_(std::move(other.hasher_)),
      batch_(std::move(other.batch_)),
      cuts_(std::move(other.cuts_)),
      current_(std::move(other.current_)),
      unsynced_(std::move(other.unsynced_)),
      append_start_(std::move(other.append_start_)) {
  std::memcpy(last_hash_, other.last_hash_, sizeof last_hash_);
}

audit_log& audit_log::operator=(audit_log&& other) noexcept {
  if (this == &other) return *this;
  close_fds();
  dir_ = std::move(other.dir_);
  path_ = std::move(other.path_);
  options_ = other.options_;
  fd_ = std::exchange(other.fd_, -1);
  lock_fd_ = std::exchange(other.lock_fd_, -1);
  keep_lock_ = other.keep_lock_;
  lock_held_ = std::exchange(other.lock_held_, false);
  waited_for_lock_ = other.waited_for_lock_;
  lock_ino_ = other.lock_ino_;
  ino_ = other.ino_;
  dev_ = other.dev_;
  size_ = other.size_;
  last_seq_ = other.last_seq_;
  std::memcpy(last_hash_, other.last_hash_, sizeof last_hash_);
  recovered_ = std::move(other.recovered_);
  broken_ = std::move(other.broken_);
  hasher_ = std::move(other.hasher_);
  batch_ = std::move(other.batch_);
  cuts_ = std::move(other.cuts_);
  current_ = std::move(other.current_);
  unsynced_ = std::move(other.unsynced_);
  append_start_ = std::move(other.append_start_);
  return *this;
}

audit_log::~audit_log() { close_fds(); }

void audit_log::close_fds() {
  close_fd(fd_);
  close_fd(lock_fd_);  // the last descriptor of its open file: a lock left held goes with it
  lock_held_ = false;
}

void audit_log::release_lock() {
  if (!lock_held_) return;
  ::flock(lock_fd_, LOCK_UN);
  lock_held_ = false;
}

// /proc/locks lists a process blocked in flock() as "N: -> FLOCK  ADVISORY  WRITE <pid>
// <major>:<minor>:<inode> 0 EOF". Matched on the inode alone: a match on another filesystem's
// file of the same number only gives the lock back early.
bool audit_log::others_wait_for_lock() const {
  const auto read = read_text_file("/proc/locks");
  if (!read) return true;  // cannot tell: give the lock back
  const std::string& text = *read;
  const std::string needle = ":" + std::to_string(lock_ino_) + " ";
  for (std::size_t begin = 0; begin < text.size();) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + begin, end - begin);
    if (line.find(" -> ") != std::string_view::npos && line.find(needle) != std::string_view::npos) return true;
    begin = end + 1;
  }
  return false;
}

policy::result<audit_log> audit_log::open(std::string dir, audit_log_options options) {
  if (dir.empty()) return make_error(errc::invalid_path, "the audit directory is empty");
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return io_error("create", dir, errno);
  audit_log log(std::move(dir), options);
  if (!log.hasher_->sha.usable()) {
    return make_error(errc::invalid_value, "OpenSSL provides no SHA-256; the audit chain cannot be written");
  }
  const std::string lock_path = join(log.dir_, lock_name);
  log.lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
  if (log.lock_fd_ < 0) return io_error("create", lock_path, errno);
  struct stat lock_st;
  if (::fstat(log.lock_fd_, &lock_st) != 0) return io_error("stat", lock_path, errno);
  log.lock_ino_ = static_cast<std::uint64_t>(lock_st.st_ino);
  const file_lock lock(log.lock_fd_);
  if (lock.error_number() != 0) return io_error("lock", lock_path, lock.error_number());
  if (auto err = log.open_current()) return std::move(*err);
  if (auto err = log.recover_tail()) return std::move(*err);
  return log;
}

std::optional<error> audit_log::open_current() {
  close_fd(fd_);
  current_ = {};
  // O_NOFOLLOW: a symlink planted as audit.jsonl must not redirect the trail elsewhere;
  // O_NONBLOCK: nor may a planted FIFO block the open (it is refused below).
  fd_ = ::open(path_.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK,
               0600);
  if (fd_ < 0) return io_error("open", path_, errno);
  struct stat st;
  if (::fstat(fd_, &st) != 0) return io_error("stat", path_, errno);
  if (!S_ISREG(st.st_mode)) {
    close_fd(fd_);
    return make_error(errc::invalid_value, path_ + " is not a regular file; move it away and retry");
  }
  ino_ = st.st_ino;
  dev_ = st.st_dev;
  size_ = static_cast<std::uint64_t>(st.st_size);
  // In fsync durability the file's name must survive power loss too, not only its lines.
  if (options_.durability == policy::audit_durability::fsync) return sync_dir();
  return std::nullopt;
}

std::optional<error> audit_log::sync_dir() {
  const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return io_error("open", dir_, errno);
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  if (rc != 0) return io_error("fsync", dir_, err);
  return std::nullopt;
}

// Finds the chain's last seq and hash on disk, mending a torn last line of audit.jsonl.
// Called with the lock held. Nothing is changed before the rest has been found good: a file
// that cannot continue the chain is refused as it is (it lost 98 bytes first, unreported: a
// review). A torn tail that is a whole line chaining on the one before, short of its newline
// only (an editor, a copy), gets the newline; any other torn tail is cut, and said so.
std::optional<error> audit_log::recover_tail() {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return io_error("stat", path_, errno);
  size_ = static_cast<std::uint64_t>(st.st_size);
  auto tail = read_tail(fd_, size_, path_);
  if (!tail) return tail.err();
  const std::string torn = std::move(tail->torn);
  std::string source = path_;
  if (!tail->has_line) {
    // audit.jsonl holds no whole line (new, or just rotated): the chain ends in the newest
    // rotated file.
    auto numbers = rotated_numbers(dir_);
    if (!numbers) return numbers.err();
    tail = file_tail{};
    for (const std::uint64_t n : *numbers) {
      source = join(dir_, rotated_name(n));
      auto fd = open_for_reading(source);
      if (!fd) return fd.err();
      struct stat rst;
      if (::fstat(*fd, &rst) != 0 || !S_ISREG(rst.st_mode)) {
        ::close(*fd);
        return make_error(errc::invalid_value, source + " is not a regular file; move it away and retry");
      }
      tail = read_tail(*fd, static_cast<std::uint64_t>(rst.st_size), source);
      ::close(*fd);
      if (!tail) return tail.err();
      if (!tail->torn.empty()) {
        // dhara never writes to a rotated file, so this was not a crash: refuse to guess.
        return make_error(errc::parse_error,
                          source + " ends without a newline, but dhara never writes to a rotated "
                                   "file: it was edited. Check it with `dhara doctor --audit-log "
                                   "--verify`, then move it away");
      }
      if (tail->has_line) break;
    }
  }
  std::uint64_t seq = 0;
  char hash[64];
  std::memcpy(hash, zero_hash, sizeof hash);
  if (tail->has_line) {
    auto facts = policy::read_audit_line(tail->last_line);
    if (auto* why = std::get_if<std::string>(&facts)) {
      return make_error(errc::parse_error,
                        source + ": the last line cannot continue the audit chain: " + *why +
                            ". dhara does not rewrite audit files; check it with `dhara doctor "
                            "--audit-log --verify`, then move it away to start a new trail");
    }
    const auto& f = std::get<policy::audit_line_facts>(facts);
    seq = f.seq;
    std::memcpy(hash, f.hash.data(), sizeof hash);
  }
  if (!torn.empty()) {
    bool whole = false;
    if (torn.size() > policy::audit_hash_suffix_bytes) {
      auto facts = policy::read_audit_line(torn);
      if (const auto* f = std::get_if<policy::audit_line_facts>(&facts); f && f->seq == seq + 1) {
        char expected[64];
        const std::string_view body = std::string_view(torn).substr(0, torn.size() - policy::audit_hash_suffix_bytes);
        whole = hasher_->sha.chain_hash({hash, sizeof hash}, body, expected) &&
                std::string_view(expected, sizeof expected) == f->hash;
        if (whole) {
          seq = f->seq;
          std::memcpy(hash, expected, sizeof hash);
        }
      }
    }
    if (whole) {
      ssize_t n;
      do n = ::pwrite(fd_, "\n", 1, static_cast<off_t>(size_));
      while (n < 0 && errno == EINTR);
      if (n != 1) return io_error("end the last line of", path_, n < 0 ? errno : EIO);
      if (options_.durability == policy::audit_durability::fsync) ::fdatasync(fd_);
      size_ += 1;
      if (!recovered_.empty()) recovered_ += '\n';
      recovered_ += path_ + ": the last line (seq " + std::to_string(seq) +
                    ") was whole and chained but had no newline (a copy or an editor); the newline was added";
    } else {
      int rc;
      do rc = ::ftruncate(fd_, static_cast<off_t>(size_ - torn.size()));
      while (rc != 0 && errno == EINTR);
      if (rc != 0) return io_error("truncate the torn last line of", path_, errno);
      if (options_.durability == policy::audit_durability::fsync) ::fdatasync(fd_);
      size_ -= torn.size();
      if (!recovered_.empty()) recovered_ += '\n';
      recovered_ += torn_note(path_, torn);
    }
  }
  last_seq_ = seq;
  std::memcpy(last_hash_, hash, sizeof last_hash_);
  return std::nullopt;
}

// Another process (a CLI command, a second session) may have appended or rotated since this
// object last wrote: follow it, so the chain stays one chain. Called with the lock held.
std::optional<error> audit_log::sync_with_disk() {
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0 || static_cast<std::uint64_t>(st.st_ino) != ino_ ||
      static_cast<std::uint64_t>(st.st_dev) != dev_) {
    if (auto err = open_current()) return err;
    return recover_tail();
  }
  if (static_cast<std::uint64_t>(st.st_size) != size_) return recover_tail();
  return std::nullopt;
}

// Older files shift up `by` numbers, oldest first, so every rename targets a free name (a
// crash in between leaves a gap in the numbers, never two files out of order): the names
// 1 … `by` are then free for the batch's rotations, each file renamed once.
std::optional<error> audit_log::shift_rotated(std::uint64_t by) {
  auto numbers = rotated_numbers(dir_);
  if (!numbers) return numbers.err();
  for (auto it = numbers->rbegin(); it != numbers->rend(); ++it) {
    const std::string from = join(dir_, rotated_name(*it));
    const std::string to = join(dir_, rotated_name(*it + by));
    if (::rename(from.c_str(), to.c_str()) != 0 && errno != ENOENT) return io_error("rename", from, errno);
  }
  return std::nullopt;
}

// audit.jsonl becomes audit.<number>.jsonl (a name shift_rotated freed) and a new empty
// audit.jsonl is opened. Nothing is deleted here: files past `keep` go once the whole batch is
// written (prune), so a batch that fails after a rotation can be taken back (undo_rotations)
// with every older file still there. Called with the lock held.
std::optional<error> audit_log::rotate(std::uint64_t number) {
  const std::string first = join(dir_, rotated_name(number));
  if (::rename(path_.c_str(), first.c_str()) != 0) return io_error("rotate", path_, errno);
  const int fd = ::open(path_.c_str(), O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
  if (fd < 0) {
    const int err = errno;
    // Put the file back, so the chain's end keeps its name and this object its file.
    if (::rename(first.c_str(), path_.c_str()) != 0) {
      broken_ = "the audit rotation of " + path_ + " failed halfway (" + errno_text(err) +
                "); reopen the audit log";
    }
    return io_error("create", path_, err);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    broken_ = "cannot stat the new " + path_ + " (" + errno_text(err) + "); reopen the audit log";
    return io_error("stat", path_, err);
  }
  close_fd(fd_);
  current_ = {};
  fd_ = fd;
  ino_ = st.st_ino;
  dev_ = st.st_dev;
  size_ = 0;
  // The renames and the new name must survive power loss like the lines do.
  if (options_.durability == policy::audit_durability::fsync) return sync_dir();
  return std::nullopt;
}

// Deletes the rotated files numbered past `keep`: before a batch that rotates (what an
// earlier prune could not delete; failing then refuses the batch before anything is written)
// and after it. Called with the lock held.
std::optional<error> audit_log::prune() {
  auto numbers = rotated_numbers(dir_);
  if (!numbers) return numbers.err();
  const std::uint64_t keep = std::max<std::uint32_t>(options_.keep, 1);
  for (auto it = numbers->rbegin(); it != numbers->rend() && *it > keep; ++it) {
    const std::string name = join(dir_, rotated_name(*it));
    if (::unlink(name.c_str()) != 0 && errno != ENOENT) {
      return make_error(errc::invalid_value,
                        "cannot delete the old audit file " + name + ": " + errno_text(errno) +
                            "; rotation deletes the files past security.audit.keep, so no batch that rotates is "
                            "written until it is moved out of " + dir_);
    }
  }
  return std::nullopt;
}

// A batch failed after its rotations began: its lines before the failure sit in files renamed
// since, and older files were shifted. Puts the trail back as it was before the batch, so
// that an append is all or nothing and the trail never says "allowed" for a decision the
// failure denied. The file the batch began in (found by identity: renames keep it) is cut
// back to its size then and named audit.jsonl again; the files newer than it hold only this
// batch's lines and go; older ones get their numbers back. Rotations delete nothing (prune
// does, after a batch), so no older file is lost. The batch's lines go newest first, so a
// crash at any step leaves one chain (ending in a prefix of the batch). Called with the lock
// held; when it cannot be done, every later append is refused until the log is reopened.
std::optional<error> audit_log::undo_rotations() {
  if (!broken_.empty()) return make_error(errc::invalid_value, broken_);
  auto fail = [&](const std::string& why) {
    broken_ = "the lines of a failed audit batch could not be taken back (" + why +
              "); reopen the audit log (start dhara again), which continues the chain from what is on disk";
    return make_error(errc::invalid_value, broken_);
  };
  auto numbers = rotated_numbers(dir_);
  if (!numbers) return fail(numbers.err().message);
  auto is_file = [&](const std::string& name, std::uint64_t ino, std::uint64_t dev) {
    struct stat st;
    return ::lstat(name.c_str(), &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_ino) == ino &&
           static_cast<std::uint64_t>(st.st_dev) == dev;
  };
  const bool on_start = ino_ == append_start_.ino && dev_ == append_start_.dev;
  std::uint64_t start = 0;  // the number it has now; 0: it is still audit.jsonl
  if (!is_file(path_, append_start_.ino, append_start_.dev)) {
    const auto it = std::find_if(numbers->begin(), numbers->end(), [&](std::uint64_t n) {
      return is_file(join(dir_, rotated_name(n)), append_start_.ino, append_start_.dev);
    });
    if (it == numbers->end()) return fail("the file it began in is gone");
    start = *it;
    // audit.jsonl is the batch's own (a new file, or one a failed rotation put back).
    if (on_start || !is_file(path_, ino_, dev_)) return fail(path_ + " is not the file this writer has open");
  } else if (!on_start) {
    return fail(path_ + " is not the file this writer has open");
  }
  const bool fsync = options_.durability == policy::audit_durability::fsync;
  int rc;
  if (start != 0) {
    do rc = ::ftruncate(fd_, 0);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) return fail("cannot empty " + path_ + ": " + errno_text(errno));
  }
  std::vector<std::uint64_t> older;
  for (const std::uint64_t n : *numbers) {  // ascending: the batch's newest file first
    if (start != 0 && n < start) {
      const std::string name = join(dir_, rotated_name(n));
      if (::unlink(name.c_str()) != 0 && errno != ENOENT) return fail("cannot delete " + name + ": " + errno_text(errno));
    } else if (n != start) {
      older.push_back(n);
    }
  }
  // The deletions reach the disk before the cut: never a cut start file followed by the
  // batch's later lines.
  if (fsync) {
    if (auto err = sync_dir()) return fail(err->message);
  }
  const std::string start_name = start == 0 ? path_ : join(dir_, rotated_name(start));
  int fd = fd_;
  if (start != 0) {
    fd = ::open(start_name.c_str(), O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    if (fd < 0) return fail("cannot open " + start_name + ": " + errno_text(errno));
  }
  auto failed = [&](const std::string& why) {
    if (fd != fd_) ::close(fd);
    return fail(why);
  };
  do rc = ::ftruncate(fd, static_cast<off_t>(append_start_.size));
  while (rc != 0 && errno == EINTR);
  if (rc != 0) return failed("cannot cut " + start_name + ": " + errno_text(errno));
  if (fsync) {
    do rc = ::fdatasync(fd);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) return failed("cannot sync " + start_name + ": " + errno_text(errno));
  }
  if (start != 0 && ::rename(start_name.c_str(), path_.c_str()) != 0) {
    return failed("cannot rename " + start_name + ": " + errno_text(errno));
  }
  if (fd != fd_) {
    close_fd(fd_);
    fd_ = fd;
  }
  current_ = {};
  ino_ = append_start_.ino;
  dev_ = append_start_.dev;
  size_ = append_start_.size;
  last_seq_ = append_start_.seq;
  std::memcpy(last_hash_, append_start_.hash.data(), sizeof last_hash_);
  // Ascending, each to the lowest free number: 1, 2, … as before the batch.
  std::uint64_t next = 1;
  for (const std::uint64_t n : older) {
    if (n != next) {
      const std::string from = join(dir_, rotated_name(n));
      if (::rename(from.c_str(), join(dir_, rotated_name(next)).c_str()) != 0) {
        return fail("cannot rename " + from + ": " + errno_text(errno));
      }
    }
    ++next;
  }
  if (fsync) {
    if (auto err = sync_dir()) return fail(err->message);
  }
  return std::nullopt;
}

// One write(2) (looping only on partial writes) of batch_[begin, end), then fdatasync when
// `sync`. On failure the file is cut back to its size before the segment.
std::optional<error> audit_log::write_segment(std::size_t begin, std::size_t end, bool sync) {
  const std::uint64_t before = size_;
  const char* p = batch_.data() + begin;
  std::size_t left = end - begin;
  int err = 0;
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      break;
    }
    if (n == 0) {
      err = EIO;
      break;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (err == 0 && sync) {
    int rc;
    do rc = ::fdatasync(fd_);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) err = errno;
  }
  if (err == 0) {
    size_ = before + (end - begin);
    return std::nullopt;
  }
  const bool synced = left == 0;  // the write went through; fdatasync failed
  if (left != end - begin || synced) {
    // No torn line may stay: the next append would glue its line onto it.
    int rc;
    do rc = ::ftruncate(fd_, static_cast<off_t>(before));
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      broken_ = "a failed write left a partial line in " + path_ + " that could not be cut (" +
                errno_text(errno) + "); reopen the audit log";
    }
  }
  return io_error(synced ? "fdatasync" : "write the audit trail to", path_, err);
}

// The current file on a descriptor of its own, for a deferred sync; false when it cannot be
// had (no descriptor left): the caller syncs at once instead.
bool audit_log::share_current_file() {
  if (current_) return true;
  const int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return false;
  current_.file_ = std::make_shared<const audit_sync_handle::file>(fd, path_);
  return true;
}

policy::result<std::uint64_t> audit_log::append(std::span<policy::audit_entry> entries, audit_sync sync) {
  policy::audit_lines lines;  // its serializer reserves room for the text as it goes
  for (const policy::audit_entry& e : entries) lines.add(e);
  auto written = append(std::span<const policy::audit_lines>(&lines, 1), sync);
  if (written) {
    std::uint64_t seq = *written - entries.size();
    for (policy::audit_entry& e : entries) e.seq = ++seq;
  }
  return written;
}

policy::result<std::uint64_t> audit_log::append(std::span<const policy::audit_lines> batches, audit_sync sync) {
  unsynced_ = {};
  if (!broken_.empty()) return make_error(errc::invalid_value, broken_);
  std::size_t count = 0;
  std::size_t bytes = 0;
  for (const policy::audit_lines& b : batches) {
    count += b.size();
    bytes += b.bytes();
  }
  if (count == 0) return last_seq_;
  // While an earlier append's lock is held, no other process can have appended or rotated.
  std::optional<file_lock> lock;
  waited_for_lock_ = false;
  if (!lock_held_) {
    lock.emplace(lock_fd_);
    waited_for_lock_ = lock->waited();
    if (lock->error_number() != 0) return io_error("lock", join(dir_, lock_name), lock->error_number());
    if (auto err = sync_with_disk()) return std::move(*err);
    if (keep_lock_) {
      lock->keep();
      lock_held_ = true;
    }
  }
  // Field by field: the hash goes into the string's room from the last append (a new string
  // would be an allocation and a free every append).
  append_start_.ino = ino_;
  append_start_.dev = dev_;
  append_start_.size = size_;
  append_start_.seq = last_seq_;
  append_start_.hash.assign(last_hash_, sizeof last_hash_);

  // Serialize and chain the whole batch, noting where rotations go: before a line that would
  // take a non-empty audit.jsonl past max_bytes, so a file exceeds it only by a lone line
  // that is itself larger.
  // A seq that would wrap (a last line edited to 2^64-1) would restart at 0 and break the
  // chain for every later reader: refuse, and checks fail closed.
  if (last_seq_ > std::numeric_limits<std::uint64_t>::max() - count) {
    return make_error(errc::invalid_value, "the audit log's seq " + std::to_string(last_seq_) +
                                               " cannot grow; move audit.jsonl aside to start a new trail");
  }
  batch_.clear();
  cuts_.clear();
  // Each line grows by its seq (at most 20 digits) and the 75-byte hash suffix.
  batch_.reserve(bytes + count * (20 + policy::audit_hash_suffix_bytes));
  char prev[64];
  std::memcpy(prev, last_hash_, sizeof prev);
  std::uint64_t seq = last_seq_;
  std::uint64_t file_bytes = size_;
  for (const policy::audit_lines& b : batches) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const std::size_t start = batch_.size();
      const std::string_view prefix = b[i];
      batch_.append(prefix.data(), prefix.size());
      char digits[20];  // 2^64-1 has 20 digits
      const auto [digits_end, ec] = std::to_chars(digits, digits + sizeof digits, ++seq);
      (void)ec;  // cannot fail: the buffer holds any uint64
      batch_.append(digits, digits_end);
      const std::string_view body(batch_.data() + start, batch_.size() - start);
      if (!hasher_->sha.chain_hash({prev, sizeof prev}, body, prev)) {
        return make_error(errc::invalid_value, "SHA-256 failed in OpenSSL; the audit line was not written");
      }
      policy::append_audit_suffix(batch_, {prev, sizeof prev});
      const std::uint64_t line = batch_.size() - start;
      if (options_.max_bytes != 0 && file_bytes > 0 && file_bytes + line > options_.max_bytes) {
        cuts_.emplace_back(start, seq - 1);
        file_bytes = 0;
      }
      file_bytes += line;
    }
  }
  cuts_.emplace_back(batch_.size(), seq);

  // One segment per file, each one write(2). After each, the in-memory chain is what is on
  // disk; only the first segment can be empty (its first line already needs a new file).
  const bool fsync = options_.durability == policy::audit_durability::fsync;
  const std::uint64_t rotations = cuts_.size() - 1;
  if (rotations > 0) {
    if (auto err = prune()) return std::move(*err);
    if (auto err = shift_rotated(rotations)) {
      if (auto undo = undo_rotations()) err->message += "; " + undo->message;  // the names back
      return std::move(*err);
    }
  }
  std::size_t begin = 0;
  std::uint64_t written = 0;  // entries of this batch on disk so far
  for (std::size_t i = 0; i < cuts_.size(); ++i) {
    const auto [end, end_seq] = cuts_[i];
    std::optional<error> err;
    if (i > 0) err = rotate(rotations - i + 1);  // the oldest of the batch's files first
    // Only the last file's sync can wait: a rotated file is never written again.
    const bool last = i + 1 == cuts_.size();
    const bool defer = fsync && last && sync == audit_sync::deferred && share_current_file();
    if (!err && end > begin) err = write_segment(begin, end, fsync && !defer);
    if (!err && defer && end > begin) unsynced_ = current_;
    if (err) {
      if (i == 0 && rotations == 0) return std::move(*err);  // write_segment cut its lines
      if (auto undo = undo_rotations()) {
        err->message += "; " + std::string(written > 0 ? "some of the batch's lines may stay written: " : "") +
                        undo->message;
      }
      return std::move(*err);
    }
    if (end > begin) {
      written += end_seq - last_seq_;
      last_seq_ = end_seq;
      std::memcpy(last_hash_, batch_.data() + end - 3 - sizeof last_hash_, sizeof last_hash_);
    }
    begin = end;
  }
  // What cannot be deleted now is tried again before the next batch that rotates (and that
  // batch is refused while it still cannot): the lines of this one are written.
  if (rotations > 0) (void)prune();
  return last_seq_;
}

std::optional<error> audit_log::roll_back(const audit_checkpoint& from) {
  unsynced_ = {};
  if (!broken_.empty()) return make_error(errc::invalid_value, broken_);
  std::optional<file_lock> lock;
  if (!lock_held_) lock.emplace(lock_fd_);
  struct stat st;
  const bool same = (!lock || lock->error_number() == 0) && ::stat(path_.c_str(), &st) == 0 && st.st_ino == ino_ &&
                    st.st_dev == dev_ && ino_ == from.ino && dev_ == from.dev &&
                    static_cast<std::uint64_t>(st.st_size) == size_ && from.size <= size_ &&
                    from.hash.size() == sizeof last_hash_;
  int rc = -1;
  if (same) {
    do rc = ::ftruncate(fd_, static_cast<off_t>(from.size));
    while (rc != 0 && errno == EINTR);
  }
  if (rc != 0) {
    broken_ = "lines of " + path_ + " that were never confirmed durable could not be cut away (" +
              (same ? errno_text(errno) : std::string("the file was rotated or appended to since")) +
              "); reopen the audit log";
    return make_error(errc::invalid_value, broken_);
  }
  ::fdatasync(fd_);  // best effort: the size is what the next append's sync makes durable anyway
  size_ = from.size;
  last_seq_ = from.seq;
  std::memcpy(last_hash_, from.hash.data(), sizeof last_hash_);
  return std::nullopt;
}

// ---- verification ----------------------------------------------------------------------

namespace {

// Reads a file line by line in bounded memory.
class line_reader {
 public:
  // Reads at most `limit` bytes: the size the file had in the snapshot.
  line_reader(int fd, std::uint64_t limit) : fd_(fd), left_(limit) {}

  enum class status { line, end, too_long, failed };

  // The next line (without its newline) in `line`; `end` at EOF, where `rest()` holds bytes
  // after the last newline.
  status next(std::string_view& line) {
    while (true) {
      const std::size_t nl = buf_.find('\n', scan_);
      if (nl != std::string::npos) {
        line = std::string_view(buf_).substr(begin_, nl - begin_);
        begin_ = scan_ = nl + 1;
        return status::line;
      }
      scan_ = buf_.size();
      if (buf_.size() - begin_ > max_audit_line_bytes) return status::too_long;
      if (eof_) return status::end;
      if (begin_ > 0) {
        buf_.erase(0, begin_);
        scan_ -= begin_;
        begin_ = 0;
      }
      const std::size_t old = buf_.size();
      const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, left_));
      buf_.resize(old + want);
      ssize_t n = 0;
      if (want > 0) {
        do n = ::read(fd_, buf_.data() + old, want);
        while (n < 0 && errno == EINTR);
      }
      if (n < 0) {
        err_ = errno;
        buf_.resize(old);
        return status::failed;
      }
      buf_.resize(old + static_cast<std::size_t>(n));
      left_ -= static_cast<std::uint64_t>(n);
      if (n == 0) eof_ = true;
    }
  }

  std::string_view rest() const { return std::string_view(buf_).substr(begin_); }
  int error_number() const { return err_; }

 private:
  static constexpr std::size_t chunk = 1 << 20;
  int fd_;
  std::uint64_t left_;
  std::string buf_;
  std::size_t begin_ = 0;  // start of the next line
  std::size_t scan_ = 0;   // where to look for its newline
  bool eof_ = false;
  int err_ = 0;
};

// One file of the trail as it was when the snapshot was taken.
struct snapshot_file {
  std::string path;
  int fd = -1;
  std::uint64_t size = 0;
  std::string problem;  // why the file itself is wrong ("" = read it)
};

struct snapshot {
  std::vector<snapshot_file> files;  // oldest first
  snapshot() = default;
  snapshot(const snapshot&) = delete;
  snapshot& operator=(const snapshot&) = delete;
  ~snapshot() {
    for (auto& f : files) close_fd(f.fd);
  }
};

// Opens every file of the trail under a shared lock, so that a writer's rotation or
// half-read batch cannot race the listing: open descriptors keep renamed or deleted files
// readable, and each file is read only up to its size at that moment. The lock is held only
// while opening, never while hashing, so the session's audit writes barely wait.
std::optional<error> take_snapshot(const std::string& dir, snapshot& snap) {
  int lock_fd = ::open(join(dir, lock_name).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  struct lock_holder {
    int& fd;
    std::optional<file_lock> lock;
    ~lock_holder() {
      lock.reset();
      close_fd(fd);
    }
  } holder{lock_fd, std::nullopt};
  if (lock_fd >= 0) holder.lock.emplace(lock_fd, LOCK_SH);  // no lock file: no writer ever ran

  auto numbers = rotated_numbers(dir);
  if (!numbers) return numbers.err();
  std::vector<std::string> paths;
  for (auto it = numbers->rbegin(); it != numbers->rend(); ++it) paths.push_back(join(dir, rotated_name(*it)));
  const std::string current = join(dir, current_name);
  struct stat st;
  if (::lstat(current.c_str(), &st) == 0) {
    paths.push_back(current);
  } else if (errno != ENOENT) {
    return io_error("stat", current, errno);
  }
  for (std::string& path : paths) {
    snapshot_file f;
    f.path = std::move(path);
    auto fd = open_for_reading(f.path);
    if (!fd) {
      if (fd.err().code == errc::not_found) continue;  // deleted after the listing, outside dhara
      if (fd.err().code != errc::invalid_path) return fd.err();
      f.problem = "it is a symbolic link";
    } else {
      f.fd = *fd;
      struct stat fst;
      if (::fstat(f.fd, &fst) != 0) {
        const int err = errno;
        close_fd(f.fd);
        return io_error("stat", f.path, err);
      }
      if (!S_ISREG(fst.st_mode)) {
        f.problem = "it is not a regular file";
      } else {
        f.size = static_cast<std::uint64_t>(fst.st_size);
      }
    }
    snap.files.push_back(std::move(f));
  }
  return std::nullopt;
}

}  // namespace

policy::result<audit_verification> verify_audit(const std::string& dir) {
  snapshot snap;
  if (auto err = take_snapshot(dir, snap)) return std::move(*err);
  audit_verification v;
  for (const auto& f : snap.files) v.files.push_back(f.path);

  sha256_hasher sha;
  if (!sha.usable()) return make_error(errc::invalid_value, "OpenSSL provides no SHA-256; cannot verify");
  char prev[64];
  std::memcpy(prev, zero_hash, sizeof prev);
  bool have_prev = false;
  std::uint64_t prev_seq = 0;
  const auto fail = [&v](const std::string& file, std::uint64_t line, std::string why) {
    v.ok = false;
    v.first_bad_file = file;
    v.first_bad_line = line;
    v.why = std::move(why);
    return v;
  };

  for (const snapshot_file& snap_file : snap.files) {
    const std::string& file = snap_file.path;
    if (!snap_file.problem.empty()) return fail(file, 0, snap_file.problem);
    line_reader reader(snap_file.fd, snap_file.size);
    std::uint64_t number = 0;
    while (true) {
      std::string_view line;
      const auto status = reader.next(line);
      if (status == line_reader::status::failed) return io_error("read", file, reader.error_number());
      if (status == line_reader::status::too_long) {
        return fail(file, number + 1,
                    "the line is longer than " + std::to_string(max_audit_line_bytes) + " bytes");
      }
      if (status == line_reader::status::end) {
        if (!reader.rest().empty()) {
          return fail(file, number + 1, "the last line has no newline (a write in progress, a crash, or an edit)");
        }
        break;
      }
      ++number;
      auto facts = policy::read_audit_line(line);
      if (auto* why = std::get_if<std::string>(&facts)) return fail(file, number, *why);
      const auto& f = std::get<policy::audit_line_facts>(facts);
      if (have_prev && f.seq != prev_seq + 1) {
        return fail(file, number,
                    "seq " + std::to_string(f.seq) + " follows seq " + std::to_string(prev_seq) +
                        " (expected " + std::to_string(prev_seq + 1) +
                        "): lines were removed, reordered or duplicated");
      }
      if (!have_prev) {
        v.first_seq = f.seq;
        if (f.seq != 1) {
          // Older files were rotated away: nothing is left to recompute this line's hash from.
          v.anchored = true;
          std::memcpy(prev, f.hash.data(), sizeof prev);
        }
      }
      if (have_prev || f.seq == 1) {
        char expected[64];
        const std::string_view body = line.substr(0, line.size() - policy::audit_hash_suffix_bytes);
        if (!sha.chain_hash({prev, sizeof prev}, body, expected)) {
          return make_error(errc::invalid_value, "SHA-256 failed in OpenSSL; cannot verify");
        }
        if (std::string_view(expected, sizeof expected) != f.hash) {
          return fail(file, number,
                      "the hash does not match the line (expected " + std::string(expected, sizeof expected) +
                          "): the line was edited");
        }
        std::memcpy(prev, expected, sizeof prev);
      }
      have_prev = true;
      prev_seq = f.seq;
      v.last_seq = f.seq;
      ++v.lines;
    }
  }
  // Rotation keeps at least one older file (`keep` is 1 or more), so a lone audit.jsonl that
  // does not start at seq 1 lost its head some other way: lines cut from it, or the older
  // files removed. Its first line's own hash cannot be checked then, and an edit of it went
  // unseen: it was reported OK with a note (a review rewrote a denial there as allowed).
  if (v.anchored && snap.files.size() == 1 && snap.files.front().path == join(dir, current_name)) {
    const std::string missing = v.first_seq == 2 ? "seq 1 is" : "seq 1 to " + std::to_string(v.first_seq - 1) + " are";
    const std::string path = snap.files.front().path;
    v.lines = 0;
    return fail(path, 1,
                "the trail starts at seq " + std::to_string(v.first_seq) + ": " + missing +
                    " missing and no older file is left, though rotation keeps one, so lines were cut from this "
                    "file's head or the older files removed; this first line cannot be checked");
  }
  v.ok = true;
  return v;
}

}  // namespace dhara::io
