// Checks per second through the capability checkers and the audit writer on the actor system
// (DESIGN §7: >= 1 M checks/s on 2 cores with `write` durability), in write and fsync modes,
// next to raw batched writes of lines of the same size measured in the same run. The path
// checks resolve the fixture's paths, which do not exist here (the resolution stops at the
// missing folder), and, in a fourth case, files that exist in a project on disk.
// Google Benchmark with real time: each iteration drives 100 000 checks (512 in flight per
// checker, two checkers, one audit writer); a run is 4 iterations on one fresh audit trail,
// and the audited lines are counted afterwards (an error if fewer than the checks).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/audit_writer.hpp"
#include "actors/call_replies.hpp"
#include "actors/checker.hpp"
#include "actors/scheduler.hpp"
#include "support/extension_fixture.hpp"
#include "support/policy_fixture.hpp"
#include "bench/ratio_reporter.hpp"

using namespace dhara;
using clk = std::chrono::steady_clock;

namespace {

using go_atom = caf::atom_constant<caf::atom("go")>;

constexpr std::size_t checks_per_iteration = 100000;
constexpr std::size_t window = 512;  // checks in flight per checker
// Callers per checker, each with window / callers in flight. They send their checks as the
// session's callers do (broker/call_flow.hpp): with `send` and a ticket, the answer matched in
// an actors::call_replies table. (Before 2026-12-03 they used `request`, whose continuations
// CAF 0.17 searches linearly: hence 8 callers rather than one, kept so the figures compare.)
constexpr std::size_t callers = 8;

caf::actor_system* the_system = nullptr;  // one for the whole run, made in main

// What the checks name: one of four paths (a round of checks names each many times), one of
// four URLs, a path no other check of the run names, or one such path under a symlink
// (disk_project's lib -> src, known to the resolver after the first path through it), or
// under one whose target climbs (packages/app/shared -> ../../src, as workspaces link).
enum class subjects { four_paths, urls, distinct_paths, linked_paths, climbing_paths };

// A typical allowed tool-call check: one path read (resolved on disk: symlinks followed), or
// one fetch of an allowed URL (decided without a syscall).
actors::check_batch typical_batch(std::size_t i, subjects what) {
  static const char* paths[] = {"src/auth/login.ts", "package.json", "src/index.ts", "docs/README.md"};
  static const char* urls[] = {"https://api.example.com/v1/items", "https://docs.example.org/guide",
                               "https://api.example.com/v1/users/7", "https://cdn.example.org/lib.js"};
  policy::gate_check check =
      what == subjects::urls
          ? policy::gate_check{policy::capability::network_fetch, policy::subject_kind::url, urls[i & 3], {}, "url"}
          : policy::gate_check{policy::capability::filesystem_read, policy::subject_kind::path,
                               what == subjects::four_paths       ? std::string(paths[i & 3])
                               : what == subjects::distinct_paths ? "src/gen/" + std::to_string(i) + ".ts"
                               : what == subjects::linked_paths   ? "lib/gen/" + std::to_string(i) + ".ts"
                                                                  : "packages/app/shared/gen/" + std::to_string(i) + ".ts",
                               {}, "path"};
  actors::check_batch b{"web-tools", "read", "call-" + std::to_string(i), "bench", {}};
  b.checks.push_back(std::move(check));  // not through an initializer list, which copies
  return b;
}

struct driver_state {
  actors::checker_actor checker;
  subjects what = subjects::four_paths;
  std::size_t first = 0;  // the number of this driver's first check (distinct paths)
  std::size_t remaining = 0, inflight = 0, denied = 0;
  actors::call_replies replies;
  caf::response_promise done;  // answered with the denials once every check is answered
};
using driver_ptr = caf::stateful_actor<driver_state>*;

// Sends checks until `window / callers` are in flight or none remain. Each continuation
// captures only `self`: it fits in std::function without an allocation of its own.
void fire(driver_ptr self) {
  auto& st = self->state;
  while (st.remaining > 0 && st.inflight < window / callers) {
    --st.remaining;
    ++st.inflight;
    auto batch = typical_batch(st.first + st.remaining, st.what);
    batch.ticket = st.replies.expect_check(self, st.checker, [self](actors::check_outcome* o, const caf::error&) {
      auto& s = self->state;
      --s.inflight;
      s.denied += o == nullptr || !o->allowed;
      if (s.remaining == 0 && s.inflight == 0) s.done.deliver(s.denied);
      else fire(self);
    });
    self->send(st.checker, actors::check_atom::value, std::move(batch));
  }
}

// Keeps `window / callers` checks in flight on one checker until `total` are answered.
caf::behavior driver(driver_ptr self, actors::checker_actor checker, std::size_t total, subjects what,
                     std::size_t first) {
  self->state.checker = std::move(checker);
  self->state.what = what;
  self->state.first = first;
  self->set_down_handler([=](caf::down_msg& m) { self->state.replies.down(m); });
  return {
      [=](go_atom) {
        self->state.remaining = total;
        self->state.done = self->make_response_promise();
        fire(self);
        return self->state.done;
      },
      [=](actors::check_outcome& o) { self->state.replies.answered(o); },
      [=](actors::check_outcomes& os) { self->state.replies.answered(os); },
  };
}

// The fixture's policy with its project on disk: the four files the path checks read exist,
// in a folder allowed as the fixture allows /home/u/proj. (The fixture's own paths do not exist
// on this machine: there each path check's resolution stops at the missing /home/u.)
struct disk_project {
  testing::temp_home dir;  // removed with it
  testing::policy_fixture fixture;
  std::shared_ptr<const policy::policy_snapshot> snap;

  disk_project() {
    namespace fs = std::filesystem;
    const fs::path proj = dir.project();
    fs::create_directories(proj / "src/auth");
    fs::create_directories(proj / "docs");
    for (const char* f : {"src/auth/login.ts", "package.json", "src/index.ts", "docs/README.md"}) std::ofstream(proj / f) << "x\n";
    fs::create_directory_symlink("src", proj / "lib");
    fs::create_directories(proj / "packages/app");
    fs::create_directory_symlink("../../src", proj / "packages/app/shared");
    fixture.config.allowed_paths[0] = proj.string();
    fixture.config.denied_paths[0] = (proj / "secrets").string();
    snap = fixture.compile_at(dir.home().string(), proj.string());
  }
};

// range(0): 1 = durability write, 2 = durability fsync, 3 = durability write with URL checks
// (no path to resolve: what the actors and the audit cost without the resolver's syscalls),
// 4 = durability write with path checks of files that exist (disk_project), 5 = durability
// write with a path no other check names (a round's checks share no first look), 6 = the same
// under a symlink in a project on disk (lib/gen/N.ts, lib -> src: a known link, whose target is
// spliced in), 7 = the same under a link whose target climbs (packages/app/shared/gen/N.ts,
// shared -> ../../src: its target walked beneath "/", each path's rest from there).
void BM_Checker_AuditedChecks(benchmark::State& state) {
  caf::actor_system& sys = *the_system;
  const auto durability = state.range(0) == 2 ? policy::audit_durability::fsync : policy::audit_durability::write;
  std::size_t checked = 0, denied = 0;
  testing::temp_home home;
  std::unique_ptr<disk_project> disk;
  if (state.range(0) == 4 || state.range(0) >= 6) disk = std::make_unique<disk_project>();
  {
    auto snap = disk ? disk->snap : testing::policy_fixture{}.compile();
    if (!snap) {
      state.SkipWithError("the policy snapshot did not compile");
      return;
    }
    actors::audit_writer_config wc;
    wc.dhara_home = home.dhara_home().string();
    wc.durability = durability;
    wc.max_bytes = std::uint64_t{1} << 40;
    auto writer = actors::spawn_audit_writer(sys, wc);
    // One checker per core, as the session runs them.
    std::vector<actors::checker_actor> checkers{actors::spawn_checker(sys, snap, writer, {}),
                                                actors::spawn_checker(sys, snap, writer, {})};
    caf::scoped_actor self{sys};
    for (auto _ : state) {
      std::vector<caf::actor> drivers;
      const subjects what = state.range(0) == 3   ? subjects::urls
                            : state.range(0) == 5 ? subjects::distinct_paths
                            : state.range(0) == 6 ? subjects::linked_paths
                            : state.range(0) == 7 ? subjects::climbing_paths
                                                  : subjects::four_paths;
      const std::size_t each = checks_per_iteration / checkers.size() / callers;
      for (auto& c : checkers)
        for (std::size_t k = 0; k < callers; ++k)
          drivers.push_back(sys.spawn(driver, c, each, what, checked + drivers.size() * each));
      using handle = decltype(self->request(drivers[0], caf::infinite, go_atom::value));
      std::vector<handle> pending;
      for (auto& d : drivers) pending.push_back(self->request(d, caf::infinite, go_atom::value));
      for (auto& h : pending) h.receive([&](std::size_t n) { denied += n; }, [](caf::error&) {});
      for (auto& d : drivers) caf::anon_send_exit(d, caf::exit_reason::user_shutdown);
      checked += checks_per_iteration;
    }
    for (auto& c : checkers) caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
    self->wait_for(writer);
  }
  std::size_t lines = 0;
  std::ifstream in(home.dhara_home() / "audit.jsonl");
  for (std::string l; std::getline(in, l);) ++lines;
  state.SetItemsProcessed(static_cast<std::int64_t>(checked));
  state.counters["audited"] = static_cast<double>(lines);
  if (denied) state.SkipWithError("some checks were denied");
  else if (lines < checked) state.SkipWithError("fewer audit lines than checks");
}
BENCHMARK(BM_Checker_AuditedChecks)->Arg(1)->Arg(2)->Arg(3)->Arg(4)->Arg(5)->Arg(6)->Arg(7)->Iterations(4)->UseRealTime()->Unit(benchmark::kMillisecond);

// Raw baseline: lines of about an audit line's size written in 64 KiB batches; with
// range(0) = 1, one fdatasync per 10 ms as group commit does. Each iteration writes as many
// lines as an iteration above checks. The file is truncated every 256 MiB.
void BM_Baseline_RawWrite(benchmark::State& state) {
  const bool sync = state.range(0) == 1;
  std::string line(330, 'x');
  line.back() = '\n';
  std::string chunk;
  const std::size_t per_chunk = 65536 / line.size();
  for (std::size_t i = 0; i < per_chunk; ++i) chunk += line;
  testing::temp_home dir;
  const std::string path = (dir.root / "raw.jsonl").string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    state.SkipWithError("cannot create the raw file");
    return;
  }
  std::size_t size = 0, lines = 0;
  auto last_sync = clk::now();
  for (auto _ : state) {
    for (std::size_t done = 0; done < checks_per_iteration; done += per_chunk) {
      if (::write(fd, chunk.data(), chunk.size()) != static_cast<ssize_t>(chunk.size())) {
        state.SkipWithError("raw write failed");
        break;
      }
      lines += per_chunk;
      size += chunk.size();
      if (sync && clk::now() - last_sync > std::chrono::milliseconds(10)) {
        ::fdatasync(fd);
        last_sync = clk::now();
      }
    }
    if (size > (256u << 20)) {
      if (sync) ::fdatasync(fd);
      if (::ftruncate(fd, 0) != 0) break;
      size = 0;
    }
  }
  if (sync) ::fdatasync(fd);
  ::close(fd);
  state.SetItemsProcessed(static_cast<std::int64_t>(lines));
}
BENCHMARK(BM_Baseline_RawWrite)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

class report : public dhara::bench::ratio_reporter {
 protected:
  void summary() override {
    const double raw = rate_prefix("BM_Baseline_RawWrite/0/"), raw_sync = rate_prefix("BM_Baseline_RawWrite/1/");
    const double w = rate_prefix("BM_Checker_AuditedChecks/1/");
    const double f = rate_prefix("BM_Checker_AuditedChecks/2/");
    const double u = rate_prefix("BM_Checker_AuditedChecks/3/");
    const double d = rate_prefix("BM_Checker_AuditedChecks/4/");
    const double n = rate_prefix("BM_Checker_AuditedChecks/5/");
    const double l = rate_prefix("BM_Checker_AuditedChecks/6/");
    const double c = rate_prefix("BM_Checker_AuditedChecks/7/");
    std::printf("\n== checks through 2 checkers + the audit writer (%zu per iteration, %zu in flight per checker from %zu callers) ==\n",
                checks_per_iteration, window, callers);
    std::printf("raw batched write     %8.2f M lines/s   + fdatasync/10 ms %8.2f M lines/s\n", raw / 1e6, raw_sync / 1e6);
    if (w > 0)
      std::printf("durability write      %8.2f M checks/s  (%.2f of raw write; target >= 1 M/s %s)\n", w / 1e6,
                  raw > 0 ? w / raw : 0.0, w >= 1e6 ? "ok" : "MISSED");
    if (f > 0)
      std::printf("durability fsync      %8.2f M checks/s  (%.2f of raw + fdatasync)\n", f / 1e6,
                  raw_sync > 0 ? f / raw_sync : 0.0);
    if (u > 0)
      std::printf("write, URL checks     %8.2f M checks/s  (%.2f of raw write; no path to resolve)\n", u / 1e6,
                  raw > 0 ? u / raw : 0.0);
    if (d > 0)
      std::printf("write, files on disk  %8.2f M checks/s  (%.2f of raw write; the paths above stop at a missing folder)\n",
                  d / 1e6, raw > 0 ? d / raw : 0.0);
    if (n > 0)
      std::printf("write, distinct paths %8.2f M checks/s  (%.2f of raw write; no path named twice; target >= 1 M/s %s)\n",
                  n / 1e6, raw > 0 ? n / raw : 0.0, n >= 1e6 ? "ok" : "MISSED");
    if (l > 0)
      std::printf("write, through a link %8.2f M checks/s  (%.2f of raw write; the same under a known link; target >= 1 M/s %s)\n",
                  l / 1e6, raw > 0 ? l / raw : 0.0, l >= 1e6 ? "ok" : "MISSED");
    if (c > 0)
      std::printf("write, link that climbs %6.2f M checks/s  (%.2f of raw write; the same under ../../src; target >= 1 M/s %s)\n",
                  c / 1e6, raw > 0 ? c / raw : 0.0, c >= 1e6 ? "ok" : "MISSED");
  }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  spdlog::set_level(spdlog::level::warn);
  caf::actor_system_config cfg;
  actors::use_dhara_scheduler(cfg, 2);  // as a session runs
  {
    caf::actor_system sys{cfg};
    the_system = &sys;
    report reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    the_system = nullptr;
  }
  benchmark::Shutdown();
  return 0;
}
