// io::line_output (serve's answers, batch's results): lines reach the reader in order and
// whole, a reader that stops reading holds no caller until the allowance is queued, nothing
// is dropped past it, and a reader that went away makes writes no-ops.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "io/line_output.hpp"

using namespace dhara;
using namespace std::chrono_literals;

namespace {

std::string numbered_line(int i) { return "{\"id\":" + std::to_string(i) + ",\"pad\":\"" + std::string(200, 'x') + "\"}"; }

// Everything readable from `fd` until EOF.
std::string read_all(int fd) {
  std::string all;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) all.append(buf, static_cast<std::size_t>(n));
  return all;
}

struct pipe_pair {
  int fds[2] = {-1, -1};
  pipe_pair() { REQUIRE(::pipe2(fds, O_CLOEXEC) == 0); }
  ~pipe_pair() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
};

}  // namespace

TEST_CASE("line output: a reader that does not read holds no caller, and gets every line in order",
          "[io][line_output]") {
  pipe_pair p;
  const int lines = 20000;  // about 4 MiB: far more than a pipe holds (64 KiB)
  auto out = std::make_unique<io::line_output>(p.fds[1]);
  auto writing = std::async(std::launch::async, [&] {
    for (int i = 0; i < lines; ++i) out->write_line(numbered_line(i));
  });
  // Nobody reads yet: the writes still return.
  REQUIRE(writing.wait_for(30s) == std::future_status::ready);
  std::string expected;
  for (int i = 0; i < lines; ++i) expected += numbered_line(i) + "\n";
  auto reading = std::async(std::launch::async, [&] { return read_all(p.fds[0]); });
  out.reset();  // writes what is queued, then ends its thread
  ::close(p.fds[1]);
  p.fds[1] = -1;
  CHECK(reading.get() == expected);
}

TEST_CASE("line output: past its allowance a writer waits for the reader, and nothing is dropped",
          "[io][line_output]") {
  pipe_pair p;
  io::line_output out(p.fds[1], 4096);
  std::string expected;
  auto writing = std::async(std::launch::async, [&] {
    for (int i = 0; i < 2000; ++i) out.write_line(numbered_line(i));
  });
  // 2000 lines of ~220 bytes do not fit the pipe (64 KiB) and the allowance (4 KiB) together.
  CHECK(writing.wait_for(500ms) == std::future_status::timeout);
  for (int i = 0; i < 2000; ++i) expected += numbered_line(i) + "\n";
  std::string got;
  char buf[65536];
  while (got.size() < expected.size()) {
    ssize_t n = ::read(p.fds[0], buf, sizeof buf);
    REQUIRE(n > 0);
    got.append(buf, static_cast<std::size_t>(n));
  }
  REQUIRE(writing.wait_for(30s) == std::future_status::ready);
  CHECK(got == expected);
}

TEST_CASE("line output: a reader that went away makes every later line a no-op", "[io][line_output]") {
  ::signal(SIGPIPE, SIG_IGN);  // as dhara runs: a closed pipe is EPIPE, not a signal
  pipe_pair p;
  ::close(p.fds[0]);
  p.fds[0] = -1;
  io::line_output out(p.fds[1], 4096);
  auto writing = std::async(std::launch::async, [&] {
    for (int i = 0; i < 2000; ++i) out.write_line(numbered_line(i));
  });
  CHECK(writing.wait_for(30s) == std::future_status::ready);
}

TEST_CASE("a process killed while its reader lags leaves no torn line behind", "[io][line_output]") {
  // dhara killed mid-batch (tests/cli/faults_test.py) must leave only whole result lines on
  // its stdout. A child writes lines of 1-2 KiB into a pipe whose reader has stopped, so
  // the writer thread waits inside write(2) for room; SIGKILL then ends it there. A write
  // larger than PIPE_BUF would have put part of its lines in the pipe already.
  for (int round = 0; round < 8; ++round) {
    INFO("round " << round);
    pipe_pair p;
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      ::close(p.fds[0]);
      io::line_output out(p.fds[1]);
      for (int i = 0;; ++i) out.write_line("line " + std::to_string(i) + " " + std::string(1000 + (i * 379) % 1000, 'x'));
    }
    struct reaper {  // a failed REQUIRE below must not leave the child writing forever
      pid_t pid;
      ~reaper() {
        if (pid <= 0) return;  // never kill(-1): that would signal every process
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    } reap{child};
    ::close(p.fds[1]);
    p.fds[1] = -1;
    std::string got;
    char buf[4096];
    while (got.size() < 6000) {  // some lines, then the reader stops
      ssize_t n = ::read(p.fds[0], buf, sizeof buf);
      REQUIRE(n > 0);
      got.append(buf, static_cast<std::size_t>(n));
    }
    std::this_thread::sleep_for(30ms);  // the pipe fills; the writer waits for room
    REQUIRE(::kill(child, SIGKILL) == 0);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    reap.pid = 0;  // reaped: nothing left for the destructor
    got += read_all(p.fds[0]);
    REQUIRE_FALSE(got.empty());
    CHECK(got.back() == '\n');
    // Every line whole: "line N " and the length the child gave line N.
    std::size_t start = 0;
    for (int i = 0; start < got.size(); ++i) {
      std::size_t nl = got.find('\n', start);
      if (nl == std::string::npos) break;  // the torn tail, reported above
      CHECK(got.substr(start, nl - start) == "line " + std::to_string(i) + " " + std::string(1000 + (i * 379) % 1000, 'x'));
      start = nl + 1;
    }
  }
}
