// Audit writer throughput on disk (DESIGN §7: >= 2 M lines/s in `write`, >= 1.5 M/s in
// `fsync`): io::audit_log::append with batches of 1024 typical entries (8192 for one fsync
// case), next to raw write(2)s of the very same line bytes in 64 KiB buffers measured in the
// same run, without and with fdatasync every 10 ms; and the audit writer actor that a session
// runs (appends answered when durable; in fsync durability its syncs overlap the next batch's
// serialization). Google Benchmark, real time; each
// benchmark is repeated 3 times and the summary uses the medians (the machines are noisy).
// The default rotation (100 MiB × 5) is part of what is measured. The CPU part of one line
// (serialize, SHA-256) is dhara_bench_audit_line.
// Usage: dhara_bench_audit [google benchmark flags] [dir]   (dir: where the files go; a
// temporary folder under TMPDIR by default, removed at the end)
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <deque>

#include "actors/audit_writer.hpp"
#include "actors/scheduler.hpp"
#include "audit_entries.hpp"
#include "io/audit_log.hpp"
#include "bench/ratio_reporter.hpp"

namespace fs = std::filesystem;
using dhara::io::audit_log;
using dhara::policy::audit_durability;
using dhara::policy::audit_entry;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::size_t batch_size = 1024;
std::string root;  // where the files go, set in main

// The line bytes dhara writes for one batch: appended once for real and read back.
struct batch_bytes {
  std::vector<std::string> chunks;  // the batch cut at line ends into <= 64 KiB writes
  std::size_t bytes = 0;
  std::string error;
};

const batch_bytes& lines() {
  static const batch_bytes b = [] {
    batch_bytes out;
    const std::string dir = root + "/sample";
    fs::remove_all(dir);
    auto log = audit_log::open(dir, {});
    if (!log) {
      out.error = log.err().message;
      return out;
    }
    auto entries = dhara::bench::typical_audit_entries(batch_size);
    if (auto r = log->append(entries); !r) {
      out.error = r.err().message;
      return out;
    }
    std::FILE* f = std::fopen(log->path().c_str(), "rb");
    if (f == nullptr) {
      out.error = "cannot read back " + log->path();
      return out;
    }
    std::string chunk;
    char* line = nullptr;
    std::size_t cap = 0;
    ssize_t n;
    while ((n = ::getline(&line, &cap, f)) > 0) {
      if (chunk.size() + static_cast<std::size_t>(n) > 64 * 1024) out.chunks.push_back(std::move(chunk)), chunk.clear();
      chunk.append(line, static_cast<std::size_t>(n));
      out.bytes += static_cast<std::size_t>(n);
    }
    if (!chunk.empty()) out.chunks.push_back(std::move(chunk));
    std::free(line);
    std::fclose(f);
    fs::remove_all(dir);
    return out;
  }();
  return b;
}

// range(0): 1 = write, 2 = fsync; range(1): entries per append.
void BM_AuditLog_Append(benchmark::State& state) {
  const auto durability = state.range(0) == 2 ? audit_durability::fsync : audit_durability::write;
  const std::string dir = root + "/home";
  fs::remove_all(dir);
  auto entries = dhara::bench::typical_audit_entries(static_cast<std::size_t>(state.range(1)));
  {
    auto log = audit_log::open(dir, {durability, 104857600, 5});
    if (!log) {
      state.SkipWithError(log.err().message.c_str());
      return;
    }
    for (auto _ : state) {
      auto r = log->append(entries);
      if (!r) {
        state.SkipWithError(r.err().message.c_str());
        break;
      }
    }
  }
  state.SetItemsProcessed(state.iterations() * state.range(1));
  fs::remove_all(dir);
}
BENCHMARK(BM_AuditLog_Append)
    ->ArgNames({"durability", "batch"})
    ->Args({1, 1024})
    ->Args({2, 1024})
    ->Args({2, 8192})
    ->UseRealTime()
    ->Repetitions(3)
    ->Unit(benchmark::kMillisecond);

caf::actor_system* the_system = nullptr;  // set in main: 2 threads, as a session on this machine

// The audit writer actor as a session runs it: one caller keeps `window` appends of 128 entries
// (a checker's batch under load) in flight; an iteration is `window` answered appends. As a
// checker does, the caller serializes each append's lines (policy::audit_lines) on its own
// thread. An answer means the lines are as durable as configured (fsync: synced), so this is
// what a checker waits for. range(0): 1 = write, 2 = fsync; range(1): 1 = audit.lock kept
// between batches as a session's writer does (lock_hold_ms 50), 0 = taken for every batch;
// range(2): appends in flight. In fsync a line waits for the sync that starts after it is
// written, so 64 appends (8192 lines) in flight bound the rate at about 8192 lines over 1.5-2
// sync times, below what the writer can do; 256 (32768 lines) keep it busy, as the raw baseline,
// which waits for no sync, always is. Both are reported.
void BM_AuditWriter_Actor(benchmark::State& state) {
  constexpr std::size_t per_append = 128;
  const auto window = static_cast<std::size_t>(state.range(2));
  caf::actor_system& sys = *the_system;
  const std::string dir = root + "/writer";
  fs::remove_all(dir);
  dhara::actors::audit_writer_config wc;
  wc.dhara_home = dir;
  wc.durability = state.range(0) == 2 ? audit_durability::fsync : audit_durability::write;
  wc.lock_hold_ms = state.range(1) == 1 ? 50 : 0;
  auto writer = dhara::actors::spawn_audit_writer(sys, wc);
  const auto entries = dhara::bench::typical_audit_entries(per_append);
  std::string error;
  {
    caf::scoped_actor self{sys};
    auto serialized = [&] {
      dhara::policy::audit_lines lines;
      for (const auto& e : entries) lines.add(e);
      return lines;
    };
    using handle = decltype(self->request(writer, caf::infinite, dhara::actors::append_atom::value, serialized()));
    std::deque<handle> out;
    auto send = [&] {
      out.push_back(self->request(writer, caf::infinite, dhara::actors::append_atom::value, serialized()));
    };
    auto wait_oldest = [&] {
      out.front().receive(
          [&](dhara::actors::audit_ack& a) {
            if (!a.error.empty() && error.empty()) error = a.error;
          },
          [&](caf::error& e) { error = sys.render(e); });
      out.pop_front();
    };
    for (std::size_t i = 0; i < window; ++i) send();
    for (auto _ : state) {
      for (std::size_t i = 0; i < window; ++i) {
        wait_oldest();
        send();
      }
    }
    while (!out.empty()) wait_oldest();
    caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
    self->wait_for(writer);
  }
  if (!error.empty()) state.SkipWithError(error.c_str());
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(per_append * window));
  fs::remove_all(dir);
}
BENCHMARK(BM_AuditWriter_Actor)
    ->ArgNames({"durability", "lock_kept", "in_flight"})
    ->Args({1, 1, 64})
    ->Args({1, 0, 64})
    ->Args({2, 1, 64})
    ->Args({2, 0, 64})
    ->Args({2, 1, 256})
    ->UseRealTime()
    ->Repetitions(3)
    ->Unit(benchmark::kMillisecond);

// Raw baseline: the same bytes, one write(2) per <= 64 KiB chunk; range(0) = 1 adds an
// fdatasync whenever 10 ms have passed (group commit). One iteration is one batch of 1024
// lines. Truncated at 100 MiB, as rotation bounds the audit file.
void BM_Baseline_RawWrite(benchmark::State& state) {
  const bool sync = state.range(0) == 1;
  const batch_bytes& b = lines();
  const std::string path = root + "/raw.jsonl";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    state.SkipWithError("cannot create the raw file");
    return;
  }
  std::size_t size = 0;
  auto last_sync = clock_type::now();
  for (auto _ : state) {
    for (const std::string& c : b.chunks) {
      if (::write(fd, c.data(), c.size()) != static_cast<ssize_t>(c.size())) {
        state.SkipWithError("raw write failed");
        break;
      }
      if (sync && clock_type::now() - last_sync >= std::chrono::milliseconds(10)) {
        ::fdatasync(fd);
        last_sync = clock_type::now();
      }
    }
    size += b.bytes;
    if (size > 104857600) {
      if (::ftruncate(fd, 0) != 0) break;
      size = 0;
    }
  }
  if (sync) ::fdatasync(fd);
  ::close(fd);
  ::unlink(path.c_str());
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(batch_size));
}
BENCHMARK(BM_Baseline_RawWrite)
    ->ArgName("fdatasync_10ms")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Repetitions(3)
    ->Unit(benchmark::kMillisecond);

// Keeps the median items/s of each benchmark and prints the ratios against raw write.
class report : public dhara::bench::ratio_reporter {
 protected:
  void summary() override {
    const double raw = rate_prefix("BM_Baseline_RawWrite/fdatasync_10ms:0"),
                 raw_sync = rate_prefix("BM_Baseline_RawWrite/fdatasync_10ms:1");
    std::printf("\n== audit file lines/s, medians of 3 (%zu bytes a line; ratios measured in this run) ==\n",
                lines().bytes / batch_size);
    // DESIGN §7 set the targets on a machine whose raw writes did 11.9 M lines/s, 5.4 M/s with
    // fdatasync every 10 ms. Machines of this kind differ by 2-3x in raw writes (a new page in
    // the page cache costs far more on some), so each target is also shown as the same ratio of
    // the raw figure measured in this run: 2 / 11.9 of raw write, 1.5 / 5.4 of raw + fdatasync.
    struct target {
      double lines_per_s = 0, design_raw = 0;  // DESIGN §7's figure, and its raw figure
    };
    const target none, in_write{2e6, 11.9e6}, in_fsync{1.5e6, 5.4e6};
    auto row = [](const char* name, double v, double base, const target& t) {
      std::printf("%-44s %7.2f M lines/s", name, v / 1e6);
      if (base > 0) std::printf("   %5.2f of raw", v / base);
      if (t.lines_per_s > 0) {
        const double ratio = t.lines_per_s / t.design_raw;
        std::printf("   target >= %.1f M/s %s", t.lines_per_s / 1e6, v >= t.lines_per_s ? "ok" : "MISSED");
        if (base > 0) std::printf(", as DESIGN's ratio >= %.2f of raw %s", ratio, v / base >= ratio ? "ok" : "MISSED");
      }
      std::printf("\n");
    };
    row("raw write(2), 64 KiB buffers", raw, 0, none);
    row("dhara append, durability write", rate_prefix("BM_AuditLog_Append/durability:1/batch:1024"), raw, in_write);
    row("raw write + fdatasync every 10 ms", raw_sync, 0, none);
    row("dhara append, durability fsync", rate_prefix("BM_AuditLog_Append/durability:2/batch:1024"), raw_sync, in_fsync);
    row("dhara append, fsync, batches of 8192", rate_prefix("BM_AuditLog_Append/durability:2/batch:8192"), raw_sync, none);
    row("audit writer actor, durability write", rate_prefix("BM_AuditWriter_Actor/durability:1/lock_kept:1/in_flight:64"), raw, in_write);
    row("  the same, lock taken for every batch", rate_prefix("BM_AuditWriter_Actor/durability:1/lock_kept:0/in_flight:64"), raw, none);
    // The fsync target is the writer's capacity: the row with enough lines in flight to keep it
    // busy. With 8192 in flight the callers' window bounds the rate, not the writer.
    row("audit writer actor, fsync, 32768 in flight", rate_prefix("BM_AuditWriter_Actor/durability:2/lock_kept:1/in_flight:256"), raw_sync, in_fsync);
    row("  the same, 8192 lines in flight", rate_prefix("BM_AuditWriter_Actor/durability:2/lock_kept:1/in_flight:64"), raw_sync, none);
    row("  8192 in flight, lock taken for every batch", rate_prefix("BM_AuditWriter_Actor/durability:2/lock_kept:0/in_flight:64"), raw_sync, none);
  }
};

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGXFSZ, SIG_IGN);  // as dhara does: an audit write error, never a kill
  benchmark::Initialize(&argc, argv);
  if (argc > 2) {  // the folder, and nothing Google Benchmark did not take
    std::fprintf(stderr, "usage: dhara_bench_audit [--benchmark_... flags] [dir]\n");
    return 2;
  }
  const bool own_root = argc < 2;
  if (!own_root) {
    root = argv[1];
    if (root.empty() || root[0] == '-') {  // a mistyped flag is not a folder to create
      std::fprintf(stderr,
                   "dhara_bench_audit: '%s' is neither a --benchmark_... flag nor a folder name; "
                   "give the folder the files go in, or nothing for a temporary one.\n",
                   argv[1]);
      return 2;
    }
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec) {
      std::fprintf(stderr, "dhara_bench_audit: cannot create the folder %s: %s; give one you can write to.\n",
                   root.c_str(), ec.message().c_str());
      return 1;
    }
  } else {
    std::string tmpl = (fs::temp_directory_path() / "dhara-audit-bench-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::fprintf(stderr, "audit_bench: cannot create a temp folder\n");
      return 1;
    }
    root = tmpl;
  }
  if (!lines().error.empty()) {
    std::fprintf(stderr, "audit_bench: %s\n", lines().error.c_str());
    return 1;
  }
  std::printf("audit bench: files in %s\n", root.c_str());
  spdlog::set_level(spdlog::level::warn);
  caf::actor_system_config cfg;
  dhara::actors::use_dhara_scheduler(cfg, 2);  // as a session runs
  {
    caf::actor_system sys{cfg};
    the_system = &sys;
    report reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    the_system = nullptr;
  }
  benchmark::Shutdown();
  if (own_root) fs::remove_all(root);
  return 0;
}
