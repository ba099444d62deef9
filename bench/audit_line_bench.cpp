// One audit line's CPU cost (DESIGN §3.3, §7): serializing an entry without a DOM
// (policy::append_audit_body + append_audit_suffix) and the whole io::audit_log::append
// (serialize, SHA-256 chain, one write(2) per batch) into a file on tmpfs, so the disk is
// out of the figure. Baselines in the same run: memcpy of the very bytes, and raw OpenSSL
// SHA-256 chaining of the same bodies (+ memcpy + one write(2) of the batch to tmpfs).
// The SHA-256 chain itself is private to audit_log, so it is measured inside append.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#define OPENSSL_SUPPRESS_DEPRECATED  // SHA256_*: what audit_log uses (io/audit_log.cpp says why)
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "audit_entries.hpp"
#include "io/audit_log.hpp"
#include "bench/ratio_reporter.hpp"

namespace fs = std::filesystem;
using dhara::policy::audit_entry;

namespace {

constexpr std::size_t batch = 1024;  // what the audit writer appends at once under load

std::vector<audit_entry>& entries() {
  static std::vector<audit_entry> e = [] {
    auto v = dhara::bench::typical_audit_entries(batch);
    for (std::size_t i = 0; i < v.size(); ++i) v[i].seq = i + 1;
    return v;
  }();
  return e;
}

const std::string fake_hash(64, 'a');

// The bodies (everything a line hashes) and the whole lines of one batch, serialized once.
struct serialized {
  std::vector<std::string> bodies;
  std::string lines;
  serialized() {
    for (const audit_entry& e : entries()) {
      std::string b;
      dhara::policy::append_audit_body(b, e);
      lines += b;
      dhara::policy::append_audit_suffix(lines, fake_hash);
      bodies.push_back(std::move(b));
    }
  }
};

const serialized& bytes() {
  static const serialized s;
  return s;
}

// A folder on tmpfs when there is one: the figure is CPU, not the disk.
std::string scratch_dir() {
  static const std::string dir = [] {
    std::string base = fs::is_directory("/dev/shm") ? "/dev/shm" : fs::temp_directory_path().string();
    std::string tmpl = base + "/dhara-audit-line-bench-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) return std::string();
    return tmpl;
  }();
  return dir;
}

void BM_AuditLine_Serialize(benchmark::State& state) {
  std::string out;
  out.reserve(1 << 20);
  for (auto _ : state) {
    out.clear();
    for (const audit_entry& e : entries()) {
      dhara::policy::append_audit_body(out, e);
      dhara::policy::append_audit_suffix(out, fake_hash);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(batch));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(out.size()));
}
BENCHMARK(BM_AuditLine_Serialize);

// Baseline: copying the finished bytes of the same lines into the same kind of buffer.
void BM_Baseline_MemcpyLines(benchmark::State& state) {
  const serialized& s = bytes();
  std::string out;
  out.reserve(1 << 20);
  for (auto _ : state) {
    out.clear();
    out.append(s.lines);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(batch));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(s.lines.size()));
}
BENCHMARK(BM_Baseline_MemcpyLines);

// Raw OpenSSL: hex(SHA-256(prev hex ‖ body)) for each body in turn. The baseline uses the
// low-level SHA256_* calls, as audit_log does; the EVP variant (one fetched digest, one
// context reused: the cheapest EVP use) shows what their provider dispatch costs a line.
template <bool evp>
struct raw_chain {
  EVP_MD* md = evp ? EVP_MD_fetch(nullptr, "SHA256", nullptr) : nullptr;
  EVP_MD_CTX* ctx = evp ? EVP_MD_CTX_new() : nullptr;
  char prev[64];
  raw_chain() { std::memset(prev, '0', sizeof prev); }
  ~raw_chain() {
    EVP_MD_CTX_free(ctx);
    EVP_MD_free(md);
  }
  void link(const std::string& body) {
    static const char hex[] = "0123456789abcdef";
    unsigned char d[EVP_MAX_MD_SIZE];
    if constexpr (evp) {
      unsigned int len = 0;
      EVP_DigestInit_ex2(ctx, md, nullptr);
      EVP_DigestUpdate(ctx, prev, sizeof prev);
      EVP_DigestUpdate(ctx, body.data(), body.size());
      EVP_DigestFinal_ex(ctx, d, &len);
    } else {
      SHA256_CTX c;
      SHA256_Init(&c);
      SHA256_Update(&c, prev, sizeof prev);
      SHA256_Update(&c, body.data(), body.size());
      SHA256_Final(d, &c);
    }
    for (unsigned i = 0; i < 32; ++i) {
      prev[2 * i] = hex[d[i] >> 4];
      prev[2 * i + 1] = hex[d[i] & 15];
    }
  }
};

template <bool evp>
void BM_Baseline_Sha256Chain(benchmark::State& state) {
  const serialized& s = bytes();
  raw_chain<evp> chain;
  for (auto _ : state) {
    for (const std::string& b : s.bodies) chain.link(b);
    benchmark::DoNotOptimize(chain.prev);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(batch));
}
BENCHMARK(BM_Baseline_Sha256Chain<false>)->Name("BM_Baseline_Sha256Chain");
BENCHMARK(BM_Baseline_Sha256Chain<true>)->Name("BM_Baseline_Sha256Chain_EVP");

// The whole append: number, serialize, chain, one write(2) under the lock file, on tmpfs.
// The file is truncated by rotation (10 MiB × 2) so a long run stays in memory bounds.
void BM_AuditLog_Append_Tmpfs(benchmark::State& state) {
  const std::string dir = scratch_dir() + "/append";
  fs::remove_all(dir);
  auto log = dhara::io::audit_log::open(dir, {dhara::policy::audit_durability::write, 10u << 20, 2});
  if (!log) {
    state.SkipWithError(log.err().message.c_str());
    return;
  }
  auto& e = entries();
  for (auto _ : state) {
    auto r = log->append(e);
    if (!r) {
      state.SkipWithError(r.err().message.c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(batch));
  fs::remove_all(dir);
}
BENCHMARK(BM_AuditLog_Append_Tmpfs);

// Baseline for the whole append: raw SHA-256 chain of the same bodies, the lines copied into
// one buffer, one write(2) of it to a tmpfs file (truncated every 10 MiB).
void BM_Baseline_HashCopyWrite_Tmpfs(benchmark::State& state) {
  const serialized& s = bytes();
  const std::string path = scratch_dir() + "/raw.jsonl";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    state.SkipWithError("cannot create the raw file");
    return;
  }
  raw_chain<false> chain;
  std::string out;
  out.reserve(1 << 20);
  std::size_t size = 0;
  for (auto _ : state) {
    out.clear();
    for (std::size_t i = 0; i < s.bodies.size(); ++i) {
      chain.link(s.bodies[i]);
      out.append(s.bodies[i]);
      out.append(R"(,"hash":")");
      out.append(chain.prev, sizeof chain.prev);
      out.append("\"}\n");
    }
    if (::write(fd, out.data(), out.size()) != static_cast<ssize_t>(out.size())) {
      state.SkipWithError("raw write failed");
      break;
    }
    size += out.size();
    if (size > (10u << 20)) {
      if (::ftruncate(fd, 0) != 0) break;
      size = 0;
    }
  }
  ::close(fd);
  ::unlink(path.c_str());
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(batch));
}
BENCHMARK(BM_Baseline_HashCopyWrite_Tmpfs);

class report : public dhara::bench::ratio_reporter {
 protected:
  void summary() override {
    const double ser = ns_per_item("BM_AuditLine_Serialize"), copy = ns_per_item("BM_Baseline_MemcpyLines");
    const double sha = ns_per_item("BM_Baseline_Sha256Chain"), app = ns_per_item("BM_AuditLog_Append_Tmpfs");
    const double raw = ns_per_item("BM_Baseline_HashCopyWrite_Tmpfs");
    std::printf("\n== audit line summary (per line, %zu bytes on average; ratios measured in this run) ==\n",
                bytes().lines.size() / batch);
    if (ser > 0 && copy > 0) std::printf("serialize (no DOM)     %7.1f ns   memcpy of the same bytes %6.1f ns   %.1fx\n", ser, copy, ser / copy);
    const double evp = ns_per_item("BM_Baseline_Sha256Chain_EVP");
    if (sha > 0) std::printf("raw SHA-256 chain      %7.1f ns   (OpenSSL SHA256_*, as audit_log hashes)\n", sha);
    if (evp > 0) std::printf("  the same through EVP %7.1f ns   (context reused; %.2fx)\n", evp, sha > 0 ? evp / sha : 0.0);
    if (app > 0 && raw > 0)
      std::printf("audit_log::append      %7.1f ns   raw chain + copy + write %6.1f ns   %.2fx   (%.2f M lines/s of CPU)\n",
                  app, raw, app / raw, 1e3 / app);
  }
};

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGXFSZ, SIG_IGN);  // as dhara does: an audit write error, never a kill
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (scratch_dir().empty()) {
    std::fprintf(stderr, "audit_line_bench: cannot create a scratch folder\n");
    return 1;
  }
  report reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  std::error_code ec;
  fs::remove_all(scratch_dir(), ec);
  return 0;
}
