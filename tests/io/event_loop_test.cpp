// io::event_loop's look at its own events, as the io thread uses it to decide whether to run
// an extension's follow-up work itself: inside the callback of the only event a look found,
// nothing waits (and no poll(2) is needed to know it); with a second pipe ready in the same
// look, something waits. Real processes on real pipes.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <uv.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "io/event_loop.hpp"

using namespace dhara;
using namespace std::chrono_literals;

namespace {

// libuv before 1.45 keeps the count where events_in_this_dispatch reads it; later ones say 0.
bool count_known() { return uv_version() < 0x012d00; }

// What the loop said inside the callback that delivered one process's first line.
struct seen {
  std::string line;
  std::size_t events = 0;
  bool waiting = false;
};

struct recorder {
  std::mutex m;
  std::condition_variable cv;
  std::vector<seen> lines;

  void add(seen s) {
    std::lock_guard<std::mutex> lock(m);
    lines.push_back(std::move(s));
    cv.notify_all();
  }
  bool wait_for(std::size_t n) {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, 10s, [&] { return lines.size() >= n; });
  }
};

// A shell that prints `line` (once `go` exists, when given; then it makes `line`.done beside
// it) and then waits on its stdin (cat), so that nothing else of it (an exit, EOF) lands in
// the same look.
io::spawn_request shell(const std::string& line, const std::string& go = "") {
  io::spawn_request r;
  const std::string wait = go.empty() ? "" : "while [ ! -e " + go + " ]; do sleep 0.01; done; ";
  const std::string done = go.empty() ? "" : "; : > " + go + "." + line + ".done";
  r.argv = {"/bin/sh", "-c", wait + "echo " + line + done + "; exec cat"};
  r.cwd = std::string("/");  // not `= "/"`: GCC 12 warns falsely (-Wrestrict) on a 1-char literal
  r.env = {"PATH=/usr/bin:/bin"};
  return r;
}

}  // namespace

TEST_CASE("the loop knows when a pipe's line was the only event of its look, and when another waits",
          "[runtime][event_loop]") {
  io::event_loop loop;
  CHECK(loop.events_in_this_dispatch() == 0);  // not the loop's thread
  recorder rec;

  SECTION("one line alone: its look found one event, and nothing waits") {
    io::process_callbacks cb;
    cb.on_lines = [&](std::vector<std::string>&& lines) {
      rec.add({lines.front(), loop.events_in_this_dispatch(), loop.events_waiting()});
    };
    loop.spawn(shell("alone"), std::move(cb));
    REQUIRE(rec.wait_for(1));
    std::lock_guard<std::mutex> lock(rec.m);
    CHECK(rec.lines[0].line == "alone");
    CHECK(rec.lines[0].events == (count_known() ? 1u : 0u));
    CHECK_FALSE(rec.lines[0].waiting);
  }

  SECTION("two lines that became readable while the loop was busy: one look finds both") {
    // The first process's callback holds the loop thread until the other two have printed
    // (they start when it lets them and say when they are done), so the next look finds both
    // of their pipes readable.
    char dir_template[] = "/tmp/dhara-loop-XXXXXX";
    REQUIRE(::mkdtemp(dir_template) != nullptr);
    const std::filesystem::path dir = dir_template;
    const std::string go = (dir / "go").string();
    for (const char* name : {"second", "third"}) {  // spawned first: the loop starts them before
      io::process_callbacks cb;                     // the first one's callback can hold it
      cb.on_lines = [&](std::vector<std::string>&& lines) {
        rec.add({lines.front(), loop.events_in_this_dispatch(), loop.events_waiting()});
      };
      loop.spawn(shell(name, go), std::move(cb));
    }
    io::process_callbacks first;
    bool both_printed = false;
    first.on_lines = [&](std::vector<std::string>&& lines) {
      std::ofstream{go};
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      while (!(std::filesystem::exists(go + ".second.done") && std::filesystem::exists(go + ".third.done")) &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(5ms);
      both_printed = std::filesystem::exists(go + ".second.done") && std::filesystem::exists(go + ".third.done");
      rec.add({lines.front(), loop.events_in_this_dispatch(), false});
    };
    loop.spawn(shell("first"), std::move(first));
    REQUIRE(rec.wait_for(3));
    std::filesystem::remove_all(dir);
    std::lock_guard<std::mutex> lock(rec.m);
    REQUIRE(both_printed);
    REQUIRE(rec.lines[0].line == "first");
    // The one delivered first of the two: its look found at least both, and the other's
    // line was still unread, so something waited.
    const seen& next = rec.lines[1];
    CHECK((next.line == "second" || next.line == "third"));
    if (count_known()) CHECK(next.events >= 2);
    else CHECK(next.events == 0);
    CHECK(next.waiting);
    // The last one: nothing of the others is left unread.
    CHECK_FALSE(rec.lines[2].waiting);
  }
  loop.stop(500);
}
