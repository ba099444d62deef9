// Checks per second through the capability checkers and the audit writer (DESIGN §7:
// ≥ 1 M checks/s on 2 cores with `write` durability), in write and fsync modes, next to the
// raw batched-write bandwidth of the same lines measured in the same run.
// Usage: dhara_bench_checker [checks]
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/audit_writer.hpp"
#include "actors/checker.hpp"
#include "support/extension_fixture.hpp"
#include "support/policy_fixture.hpp"

using namespace dhara;
using clk = std::chrono::steady_clock;

namespace {

using go_atom = caf::atom_constant<caf::atom("go")>;

// A typical allowed tool-call check: one path read.
actors::check_batch typical_batch(std::size_t i) {
  static const char* paths[] = {"src/auth/login.ts", "package.json", "src/index.ts", "docs/README.md"};
  return {"web-tools", "read", "call-" + std::to_string(i), "bench",
          {policy::gate_check{policy::capability::filesystem_read, policy::subject_kind::path, paths[i & 3], {}, "path"}}};
}

struct driver_state {
  std::size_t remaining = 0, inflight = 0, denied = 0;
};

// Keeps `window` checks in flight on one checker until `total` are answered.
caf::behavior driver(caf::stateful_actor<driver_state>* self, actors::checker_actor checker, std::size_t total,
                     std::size_t window) {
  return {[=](go_atom) {
    auto rp = self->make_response_promise();
    self->state.remaining = total;
    auto fire = std::make_shared<std::function<void()>>();
    *fire = [=, weak = std::weak_ptr<std::function<void()>>(fire)]() {
      auto again = weak.lock();
      auto& st = self->state;
      while (st.remaining > 0 && st.inflight < window) {
        --st.remaining;
        ++st.inflight;
        self->request(checker, caf::infinite, actors::check_atom::value, typical_batch(st.remaining))
            .then([=](actors::check_outcome& o) mutable {
              auto& s = self->state;
              --s.inflight;
              s.denied += !o.allowed;
              if (s.remaining == 0 && s.inflight == 0) {
                rp.deliver(s.denied);
                return;
              }
              (*again)();
            });
      }
    };
    (*fire)();
    return rp;
  }};
}

// Raw baseline: the same number of similar lines written in 64 KiB batches (optionally with
// one fdatasync per 10 ms, as group commit would do).
double raw_lines_per_second(const std::string& dir, std::size_t lines, bool sync) {
  std::string line(330, 'x');  // about one audit line
  line.back() = '\n';
  std::string batch;
  for (std::size_t i = 0; i < 65536 / line.size(); ++i) batch += line;
  std::size_t per_batch = 65536 / line.size();
  int fd = ::open((dir + "/raw.jsonl").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
  auto t0 = clk::now(), last_sync = t0;
  for (std::size_t done = 0; done < lines; done += per_batch) {
    if (::write(fd, batch.data(), batch.size()) < 0) break;
    if (sync && clk::now() - last_sync > std::chrono::milliseconds(10)) {
      ::fdatasync(fd);
      last_sync = clk::now();
    }
  }
  if (sync) ::fdatasync(fd);
  double secs = std::chrono::duration<double>(clk::now() - t0).count();
  ::close(fd);
  return static_cast<double>(lines) / secs;
}

double run(caf::actor_system& sys, policy::audit_durability durability, std::size_t total, std::size_t* audited) {
  testing::temp_home home;
  auto snap = testing::policy_fixture{}.compile();
  actors::audit_writer_config wc;
  wc.dhara_home = home.dhara_home().string();
  wc.durability = durability;
  wc.max_bytes = std::uint64_t{1} << 40;
  auto writer = actors::spawn_audit_writer(sys, wc);
  // One checker per core, as the session runs them.
  std::vector<actors::checker_actor> checkers{actors::spawn_checker(sys, snap, writer), actors::spawn_checker(sys, snap, writer)};
  caf::scoped_actor self{sys};
  auto t0 = clk::now();
  std::vector<caf::actor> drivers;
  for (auto& c : checkers) drivers.push_back(sys.spawn(driver, c, total / checkers.size(), 512));
  using handle = decltype(self->request(drivers[0], caf::infinite, go_atom::value));
  std::vector<handle> pending;
  for (auto& d : drivers) pending.push_back(self->request(d, caf::infinite, go_atom::value));
  std::size_t denied = 0;
  for (auto& h : pending) h.receive([&](std::size_t n) { denied += n; }, [](caf::error&) {});
  double secs = std::chrono::duration<double>(clk::now() - t0).count();
  if (denied) std::fprintf(stderr, "bench: %zu checks were denied\n", denied);
  for (auto& d : drivers) self->send_exit(d, caf::exit_reason::user_shutdown);
  for (auto& c : checkers) self->send_exit(c, caf::exit_reason::user_shutdown);
  self->send_exit(writer, caf::exit_reason::user_shutdown);
  self->wait_for(writer);
  std::size_t lines = 0;
  std::ifstream in(home.dhara_home() / "audit.jsonl");
  for (std::string l; std::getline(in, l);) ++lines;
  *audited = lines;
  return static_cast<double>(total) / secs;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t total = argc > 1 ? std::stoul(argv[1]) : 400000;
  spdlog::set_level(spdlog::level::warn);
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 2);
  cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system sys{cfg};
  testing::temp_home raw_dir;
  double raw_write = raw_lines_per_second(raw_dir.root.string(), total * 4, false);
  double raw_sync = raw_lines_per_second(raw_dir.root.string(), total * 4, true);
  std::size_t audited_w = 0, audited_f = 0;
  double write_mode = run(sys, policy::audit_durability::write, total, &audited_w);
  double fsync_mode = run(sys, policy::audit_durability::fsync, total, &audited_f);
  std::printf("== checks through 2 checkers + the audit writer (%zu checks, 512 in flight per checker) ==\n", total);
  std::printf("raw batched write     %8.2f M lines/s   + fdatasync/10 ms %8.2f M lines/s\n", raw_write / 1e6, raw_sync / 1e6);
  std::printf("durability write      %8.2f M checks/s  (%.0f%% of raw write; target >= 1 M/s)  %zu lines audited\n",
              write_mode / 1e6, 100 * write_mode / raw_write, audited_w);
  std::printf("durability fsync      %8.2f M checks/s  (%.0f%% of raw + fdatasync)              %zu lines audited\n",
              fsync_mode / 1e6, 100 * fsync_mode / raw_sync, audited_f);
  return 0;
}
