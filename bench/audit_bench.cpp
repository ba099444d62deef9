// Audit writer throughput (DESIGN §7): audit_log::append with batches of 1024 typical
// entries in write and fsync durability, next to raw write(2) baselines of the same lines
// measured in the same run, with the ratios. A plain main: `audit_bench [lines] [dir]`.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "io/audit_log.hpp"

namespace fs = std::filesystem;
using dhara::io::audit_log;
using dhara::policy::audit_action;
using dhara::policy::audit_durability;
using dhara::policy::audit_entry;
using dhara::policy::decider;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::size_t batch_size = 1024;
constexpr int repeats = 3;  // the median of three runs: the machines are noisy

// What a busy session audits: file reads and fetches, some denials, all keys present.
std::vector<audit_entry> typical_entries(std::size_t n) {
  std::vector<audit_entry> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    audit_entry& e = out[i];
    e.timestamp_ms = 1778752800123 + static_cast<std::int64_t>(i);
    const bool fetch = i % 4 == 0;
    e.extension = fetch ? "web-tools" : "fs-tools";
    e.capability = fetch ? "network:fetch" : "filesystem:read";
    e.action = i % 10 == 9 ? audit_action::denied : audit_action::allowed;
    if (fetch) {
      e.details = {{"url", "https://api.example.com/v1/items?page=" + std::to_string(i)}};
    } else {
      e.details = {{"path", "/home/user/projects/my-app/src/components/module_" + std::to_string(i) + "/index.ts"}};
    }
    if (e.action == audit_action::denied) e.reason = "path is under a denied entry";
    e.decided_by = decider::rule;
    e.tool = fetch ? "fetch" : "read";
    e.tool_call_id = "call_" + std::to_string(100000 + i);
    e.session = "sess-7f3a9c";
  }
  return out;
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "audit_bench: %s\n", what.c_str());
  std::exit(1);
}

// Raw baseline: the same line bytes, packed into 64 KiB buffers, one write(2) each;
// with `sync_every_ms` > 0, fdatasync whenever that much time has passed (and at the end).
double raw_lines_per_second(const std::string& path, const std::vector<std::string>& lines,
                            std::size_t total, int sync_every_ms) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) die("cannot create " + path);
  std::string buf;
  buf.reserve(64 * 1024 + 4096);
  std::size_t written = 0;
  std::size_t next = 0;
  const auto t0 = clock_type::now();
  auto last_sync = t0;
  const auto flush = [&] {
    std::size_t off = 0;
    while (off < buf.size()) {
      const ssize_t n = ::write(fd, buf.data() + off, buf.size() - off);
      if (n <= 0) die("raw write failed");
      off += static_cast<std::size_t>(n);
    }
    buf.clear();
    if (sync_every_ms > 0 && clock_type::now() - last_sync >= std::chrono::milliseconds(sync_every_ms)) {
      ::fdatasync(fd);
      last_sync = clock_type::now();
    }
  };
  while (written < total) {
    const std::string& line = lines[next];
    next = next + 1 == lines.size() ? 0 : next + 1;
    if (buf.size() + line.size() > 64 * 1024) flush();
    buf += line;
    ++written;
  }
  flush();
  if (sync_every_ms > 0) ::fdatasync(fd);
  const double s = seconds_since(t0);
  ::close(fd);
  fs::remove(path);
  return static_cast<double>(total) / s;
}

double dhara_lines_per_second(const std::string& dir, std::vector<audit_entry>& entries,
                              std::size_t total, audit_durability durability) {
  fs::remove_all(dir);
  // The default rotation (100 MiB × 5) is part of what is measured.
  auto log = audit_log::open(dir, {durability, 104857600, 5});
  if (!log) die(log.err().message);
  std::size_t written = 0;
  const auto t0 = clock_type::now();
  while (written < total) {
    auto r = log->append(entries);
    if (!r) die(r.err().message);
    written += entries.size();
  }
  const double s = seconds_since(t0);
  fs::remove_all(dir);
  return static_cast<double>(written) / s;
}

// Where a line's time goes on the CPU: serialization, then SHA-256 over 64 + body bytes.
void cpu_breakdown(std::vector<audit_entry>& entries) {
  std::string out;
  out.reserve(1 << 20);
  constexpr int rounds = 200;
  auto t0 = clock_type::now();
  for (int r = 0; r < rounds; ++r) {
    out.clear();
    for (const audit_entry& e : entries) dhara::policy::append_audit_body(out, e);
  }
  const double serialize_ns = seconds_since(t0) * 1e9 / (rounds * static_cast<double>(entries.size()));
  const std::size_t avg_body = out.size() / entries.size();

  EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  const std::string prev(64, 'a');
  t0 = clock_type::now();
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t i = 0; i < entries.size(); ++i) {
      EVP_DigestInit_ex2(ctx, md, nullptr);
      EVP_DigestUpdate(ctx, prev.data(), prev.size());
      EVP_DigestUpdate(ctx, out.data() + (i * avg_body) % (out.size() - avg_body), avg_body);
      EVP_DigestFinal_ex(ctx, digest, &len);
    }
  }
  const double sha_ns = seconds_since(t0) * 1e9 / (rounds * static_cast<double>(entries.size()));
  EVP_MD_CTX_free(ctx);
  EVP_MD_free(md);
  std::printf("cpu per line: serialize %.0f ns, SHA-256 of %zu bytes %.0f ns\n", serialize_ns,
              avg_body + 64, sha_ns);
}

void row(const char* name, double lines_per_s, double baseline, double target) {
  std::printf("%-44s %7.2f M lines/s", name, lines_per_s / 1e6);
  if (baseline > 0) std::printf("   %5.2f of raw", lines_per_s / baseline);
  if (target > 0) std::printf("   target >= %.1f M/s %s", target / 1e6, lines_per_s >= target ? "ok" : "MISSED");
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGXFSZ, SIG_IGN);  // as dhara does: an audit write error, never a kill
  const std::size_t total = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
  std::string root;
  if (argc > 2) {
    root = argv[2];
    fs::create_directories(root);
  } else {
    std::string tmpl = (fs::temp_directory_path() / "dhara-audit-bench-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) die("cannot create a temp folder");
    root = tmpl;
  }
  const std::string dir = root + "/home";

  std::vector<audit_entry> entries = typical_entries(batch_size);
  // The raw baseline writes the very bytes dhara writes: one real batch, read back.
  std::vector<std::string> lines;
  {
    fs::remove_all(dir);
    auto log = audit_log::open(dir, {});
    if (!log) die(log.err().message);
    if (auto r = log->append(entries); !r) die(r.err().message);
    std::FILE* f = std::fopen(log->path().c_str(), "rb");
    if (f == nullptr) die("cannot read back " + log->path());
    char* line = nullptr;
    std::size_t cap = 0;
    ssize_t n;
    while ((n = ::getline(&line, &cap, f)) > 0) lines.emplace_back(line, static_cast<std::size_t>(n));
    std::free(line);
    std::fclose(f);
    fs::remove_all(dir);
  }
  std::size_t bytes = 0;
  for (const auto& l : lines) bytes += l.size();
  std::printf("audit bench: %zu lines per run (median of %d), %zu bytes a line on average, "
              "batches of %zu, in %s\n",
              total, repeats, bytes / lines.size(), batch_size, root.c_str());

  cpu_breakdown(entries);

  std::vector<double> raw, raw_sync, write_mode, fsync_mode, fsync_big;
  std::vector<audit_entry> big = typical_entries(8 * batch_size);
  for (int r = 0; r < repeats; ++r) {
    raw.push_back(raw_lines_per_second(root + "/raw.jsonl", lines, total, 0));
    write_mode.push_back(dhara_lines_per_second(dir, entries, total, audit_durability::write));
    raw_sync.push_back(raw_lines_per_second(root + "/raw.jsonl", lines, total, 10));
    fsync_mode.push_back(dhara_lines_per_second(dir, entries, total, audit_durability::fsync));
    fsync_big.push_back(dhara_lines_per_second(dir, big, total, audit_durability::fsync));
  }
  const double raw_m = median(raw);
  const double raw_sync_m = median(raw_sync);
  row("raw write(2), 64 KiB buffers", raw_m, 0, 0);
  row("dhara append, durability write", median(write_mode), raw_m, 2e6);
  row("raw write + fdatasync every 10 ms", raw_sync_m, 0, 0);
  row("dhara append, durability fsync", median(fsync_mode), raw_sync_m, 1.5e6);
  row("dhara append, fsync, batches of 8192", median(fsync_big), raw_sync_m, 0);
  if (argc <= 2) fs::remove_all(root);
  return 0;
}
