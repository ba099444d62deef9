// The audit writer actor under load: every append is answered once, only after its entries are
// on disk (in fsync durability, after the syncer thread synced them while the writer went on
// with the next batches), and the answer's seq covers the caller's own entries.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <fstream>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "actors/audit_writer.hpp"
#include "actors/scheduler.hpp"
#include "io/audit_log.hpp"
#include "policy/settings.hpp"
#include "support/extension_fixture.hpp"

using namespace dhara;
using namespace std::chrono_literals;

namespace {

policy::audit_entry entry_for(const std::string& call_id) {
  policy::audit_entry e;
  e.timestamp_ms = 1764547200000;
  e.extension = "web-tools";
  e.capability = "network:fetch";
  e.action = policy::audit_action::allowed;
  e.decided_by = policy::decider::rule;
  e.details = {{"url", "https://api.example.com/v1"}};
  e.tool = "fetch";
  e.tool_call_id = call_id;
  e.session = "s-1";
  return e;
}

// seq of every line of the trail by its toolCallId.
std::map<std::string, std::uint64_t> seqs_by_call(const std::string& path) {
  std::map<std::string, std::uint64_t> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const auto id_at = line.find(R"("toolCallId":")");
    const auto seq_at = line.find(R"("seq":)");
    REQUIRE(id_at != std::string::npos);
    REQUIRE(seq_at != std::string::npos);
    const auto id_start = id_at + 14;
    out[line.substr(id_start, line.find('"', id_start) - id_start)] = std::stoull(line.substr(seq_at + 6));
  }
  return out;
}

}  // namespace

TEST_CASE("every append is answered once its entries are written, with a seq that covers them", "[runtime][audit]") {
  const auto durability = GENERATE(policy::audit_durability::write, policy::audit_durability::fsync);
  CAPTURE(policy::to_string(durability));
  testing::temp_home home;
  constexpr int appends = 2000, window = 64, per_append = 3;
  std::map<std::string, std::uint64_t> acked;  // call id -> last seq of its append's answer
  {
    caf::actor_system_config cfg;
    actors::use_dhara_scheduler(cfg, 2);
    caf::actor_system sys{cfg};
    caf::scoped_actor self{sys};
    actors::audit_writer_config wc;
    wc.dhara_home = home.dhara_home().string();
    wc.durability = durability;
    wc.max_bytes = 256 * 1024;  // rotations happen under load too
    wc.keep = 100;
    auto writer = actors::spawn_audit_writer(sys, wc);
    using handle = decltype(self->request(writer, 10s, actors::append_atom::value, std::vector<policy::audit_entry>{}));
    std::deque<std::pair<int, handle>> out;
    int sent = 0;
    // Checkers send lines they serialized; the session's other senders send entries. Both
    // kinds interleave in one batch.
    auto send = [&] {
      std::vector<policy::audit_entry> entries;
      for (int k = 0; k < per_append; ++k) entries.push_back(entry_for("c-" + std::to_string(sent) + "-" + std::to_string(k)));
      if (sent % 2 == 0) {
        out.emplace_back(sent++, self->request(writer, 10s, actors::append_atom::value, std::move(entries)));
        return;
      }
      policy::audit_lines lines;
      for (const auto& e : entries) lines.add(e);
      out.emplace_back(sent++, self->request(writer, 10s, actors::append_atom::value, std::move(lines)));
    };
    while (sent < window) send();
    while (!out.empty()) {
      auto [n, h] = std::move(out.front());
      out.pop_front();
      h.receive(
          [&, n = n](actors::audit_ack& a) {
            CHECK(a.error.empty());
            acked["c-" + std::to_string(n)] = a.last_seq;
          },
          [&](caf::error& e) { FAIL("an append was not answered: " << sys.render(e)); });
      if (sent < appends) send();
    }
    caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
    self->wait_for(writer);
  }
  REQUIRE(acked.size() == appends);
  auto v = io::verify_audit(home.dhara_home().string());
  REQUIRE(v);
  CHECK(v->ok);
  CHECK(v->lines == appends * per_append);
  CHECK(v->files.size() > 2);  // it rotated
  std::map<std::string, std::uint64_t> seqs;
  for (const auto& f : v->files) seqs.merge(seqs_by_call(f));
  REQUIRE(seqs.size() == appends * per_append);
  int covered = 0;
  for (const auto& [call, last] : acked) {
    for (int k = 0; k < per_append; ++k) covered += seqs.at(call + "-" + std::to_string(k)) <= last;
  }
  CHECK(covered == appends * per_append);  // no caller was answered before its own entries were written
}

TEST_CASE("another writer gets its turn while the writer keeps appending, and the lock goes back when it stops",
          "[runtime][audit]") {
  testing::temp_home home;
  const std::string dir = home.dhara_home().string();
  auto lock_is_free = [&] {
    const int fd = ::open((home.dhara_home() / "audit.lock").c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(fd >= 0);
    const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    ::close(fd);
    return free;
  };
  caf::actor_system_config cfg;
  actors::use_dhara_scheduler(cfg, 2);
  caf::actor_system sys{cfg};
  actors::audit_writer_config wc;
  wc.dhara_home = dir;
  REQUIRE(wc.lock_hold_ms > 0);  // the default keeps the lock between batches
  auto writer = actors::spawn_audit_writer(sys, wc);
  std::atomic<bool> stop{false};
  std::atomic<int> session_acks{0}, session_errors{0};
  // The session: one append in flight at a time, as one call in flight makes them.
  std::thread session([&] {
    caf::scoped_actor me{sys};
    for (int n = 0; !stop; ++n) {
      me->request(writer, 10s, actors::append_atom::value, std::vector<policy::audit_entry>{entry_for("s-" + std::to_string(n))})
          .receive([&](actors::audit_ack& a) { ++(a.error.empty() ? session_acks : session_errors); },
                   [&](caf::error&) { ++session_errors; });
    }
  });
  const auto started = std::chrono::steady_clock::now();
  while (session_acks < 50 && session_errors == 0 && std::chrono::steady_clock::now() - started < 30s)
    std::this_thread::sleep_for(1ms);
  const int acks_before_other = session_acks;
  // Meanwhile another process (`dhara config permissions …`) appends, waiting for the lock as
  // it does (a blocking flock).
  auto other = std::async(std::launch::async, [&] {
    auto log = io::audit_log::open(dir, {});
    int written = 0;
    for (int i = 0; log && i < 10; ++i) {
      std::vector<policy::audit_entry> e{entry_for("cli-" + std::to_string(i))};
      written += log->append(e) ? 1 : 0;
      std::this_thread::sleep_for(5ms);
    }
    return written;
  });
  const bool other_done = other.wait_for(30s) == std::future_status::ready;
  const int acks_after_other = session_acks;
  stop = true;
  session.join();
  CHECK(other_done);
  // Once appends stop, the kept lock goes back by itself (after lock_hold_ms).
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!lock_is_free() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  CHECK(lock_is_free());
  caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
  CHECK(other.get() == 10);  // (had it starved, the writer's end above released it)
  CHECK(session_errors == 0);
  CHECK(acks_before_other >= 50);
  CHECK(acks_after_other > acks_before_other);  // the session went on while the other wrote
  auto v = io::verify_audit(dir);
  REQUIRE(v);
  CHECK(v->ok);
  CHECK(v->lines == static_cast<std::uint64_t>(session_acks + 10));
}
