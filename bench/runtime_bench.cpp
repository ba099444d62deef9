// Whole-runtime figures, each next to a baseline measured in the same run (DESIGN §7):
//  - round trip to the native echo extension: a raw libuv pipe (the physical limit here)
//    versus a call through dhara (actor → supervisor → io thread → extension and back);
//  - calls/s with 16 calls in flight, raw versus dhara;
//  - start time of 50 node and 100 native extensions (all in parallel), next to the same
//    processes started bare, without dhara or a sandbox;
//  - dhara's peak RSS with 100 extensions (the dhara binary, measured by the kernel).
// The round trips and the calls in flight are measured in blocks that alternate between the
// raw pipe and dhara, each side warmed up first; each fleet is started twice in turns.
// Usage: dhara_bench_runtime [round_trips]
// A plain main, not Google Benchmark: it reports latency distributions (p50/p99 of each
// round trip) and one-shot fleet start times, which an iterations-per-second harness hides.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/scheduler.hpp"
#include "broker/extension_host.hpp"
#include "io/piped_child.hpp"
#include "support/extension_fixture.hpp"

using namespace dhara;
using clk = std::chrono::steady_clock;

namespace {

std::string request_line(std::int64_t id) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
         R"(,"method":"tools/execute","params":{"toolCallId":"b","toolName":"echo","input":{"text":"hello"},"context":{"cwd":"/","sessionId":"b"}}})" "\n";
}

struct percentiles {
  double p50 = 0, p99 = 0;
};

percentiles of(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  if (us.empty()) return {};
  return {us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)]};
}

// ---- raw libuv: spawn the native echo and talk to it on this thread --------------------
struct raw_client {
  uv_loop_t loop{};
  uv_process_t proc{};
  uv_pipe_t in{}, out{};
  std::string buf;
  char chunk[65536];
  std::size_t want = 0, got = 0;  // replies to wait for, replies seen
  std::int64_t id = 0;            // the last request's
  bool timing = false;            // in round_trips: each reply's round trip is a sample
  std::vector<double> samples;    // the round trips' times, in µs
  clk::time_point sent;

  explicit raw_client(const std::string& exe, const std::string& dir) {
    uv_loop_init(&loop);
    uv_pipe_init(&loop, &in, 0);
    uv_pipe_init(&loop, &out, 0);
    in.data = out.data = proc.data = this;
    char* args[] = {const_cast<char*>(exe.c_str()), nullptr};
    // Connected as dhara connects an extension: pipes (not libuv's socketpairs), and the echo
    // scheduled SCHED_BATCH as dhara-launch schedules it (below, once it runs).
    int to_child[2], from_child[2];
    if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0) std::abort();
    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_INHERIT_FD;
    stdio[0].data.fd = to_child[0];
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = from_child[1];
    stdio[2].flags = UV_IGNORE;
    uv_process_options_t o{};
    o.file = exe.c_str();
    o.args = args;
    o.cwd = dir.c_str();
    o.stdio_count = 3;
    o.stdio = stdio;
    o.exit_cb = [](uv_process_t* p, int64_t, int) { uv_close(reinterpret_cast<uv_handle_t*>(p), nullptr); };
    if (uv_spawn(&loop, &proc, &o) != 0) std::abort();
    ::close(to_child[0]);
    ::close(from_child[1]);
    if (uv_pipe_open(&in, to_child[1]) != 0 || uv_pipe_open(&out, from_child[0]) != 0) std::abort();
    sched_param none{};
    (void)::sched_setscheduler(proc.pid, SCHED_BATCH, &none);
    uv_read_start(reinterpret_cast<uv_stream_t*>(&out),
                  [](uv_handle_t* h, size_t, uv_buf_t* b) {
                    auto* c = static_cast<raw_client*>(h->data);
                    *b = uv_buf_init(c->chunk, sizeof c->chunk);
                  },
                  [](uv_stream_t* s, ssize_t n, const uv_buf_t*) {
                    auto* c = static_cast<raw_client*>(s->data);
                    if (n <= 0) return;
                    c->buf.append(c->chunk, static_cast<std::size_t>(n));
                    std::size_t pos;
                    while ((pos = c->buf.find('\n')) != std::string::npos) {
                      c->buf.erase(0, pos + 1);
                      ++c->got;
                      if (c->timing) c->samples.push_back(std::chrono::duration<double, std::micro>(clk::now() - c->sent).count());
                    }
                    if (c->got >= c->want) uv_stop(&c->loop);
                  });
    send(R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"0.1.0","capabilities":{"tools":true},"config":{}}})" "\n");
    wait(1);
  }

  void send(std::string line) {
    auto* w = new std::pair<uv_write_t, std::string>{{}, std::move(line)};
    uv_buf_t b = uv_buf_init(w->second.data(), static_cast<unsigned>(w->second.size()));
    uv_write(&w->first, reinterpret_cast<uv_stream_t*>(&in), &b, 1,
             [](uv_write_t* r, int) { delete reinterpret_cast<std::pair<uv_write_t, std::string>*>(r); });
  }

  void wait(std::size_t n) {
    want = n;
    got = 0;
    uv_run(&loop, UV_RUN_DEFAULT);
  }

  // `n` sequential round trips, each one's time added to `samples`.
  void round_trips(std::size_t n) {
    timing = true;
    for (std::size_t i = 0; i < n; ++i) {
      sent = clk::now();
      send(request_line(++id));
      wait(1);
    }
    timing = false;
  }

  // `total` calls with `inflight` outstanding at a time: the seconds they took.
  double throughput(std::size_t total, std::size_t inflight) {
    auto start = clk::now();
    std::size_t done = 0;
    while (done < total) {
      std::size_t batch = std::min(inflight, total - done);
      for (std::size_t i = 0; i < batch; ++i) send(request_line(++id));
      wait(batch);
      done += batch;
    }
    return std::chrono::duration<double>(clk::now() - start).count();
  }

  ~raw_client() {
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&out));
    uv_close(reinterpret_cast<uv_handle_t*>(&in), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&out), nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);  // the process exits on stdin EOF; its handle closes
    uv_loop_close(&loop);
  }
};

// ---- through dhara: an event-based driver actor, as a session would be --------------------
using go_atom = caf::atom_constant<caf::atom("go")>;

constexpr std::size_t blocks = 10;  // of each side's measured calls, in turns (main)

struct driver_state {
  std::vector<double> samples;
  std::size_t remaining = 0, inflight_now = 0;
  std::uint64_t failed = 0;    // calls answered with an error, or not answered
  std::string first_failure;   // why the first of them failed
  clk::time_point started;
};

// Sequential round trips (inflight 1) record latency; otherwise keeps `inflight` calls out.
// Answers the samples, the seconds, and how many calls failed with the first one's reason: a
// failed call is answered at once, and would make dhara look fast.
caf::behavior driver(caf::stateful_actor<driver_state>* self, actors::supervisor_actor sup, std::size_t total,
                     std::size_t inflight) {
  return {[=](go_atom) {
    auto rp = self->make_response_promise();
    self->state.remaining = total;
    self->state.started = clk::now();
    auto fire = std::make_shared<std::function<void()>>();
    *fire = [=, weak = std::weak_ptr<std::function<void()>>(fire)]() {
      auto again = weak.lock();
      auto& st = self->state;
      while (st.remaining > 0 && st.inflight_now < inflight) {
        --st.remaining;
        ++st.inflight_now;
        actors::tool_call c;
        c.tool_call_id = "b";
        c.tool = "echo";
        c.input = {{"text", "hello"}};
        auto t0 = clk::now();
        // `why`: empty when the call was answered with a result.
        auto settle = [=](std::string why) mutable {
          auto& s = self->state;
          --s.inflight_now;
          if (inflight == 1) s.samples.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
          if (!why.empty() && s.failed++ == 0) s.first_failure = std::move(why);
          if (s.remaining == 0 && s.inflight_now == 0) {
            double secs = std::chrono::duration<double>(clk::now() - s.started).count();
            rp.deliver(s.samples, secs, s.failed, s.first_failure);
            return;
          }
          (*again)();
        };
        self->request(sup, caf::infinite, actors::execute_atom::value, std::move(c))
            .then([=](actors::call_result& r) mutable { settle(r.ok ? std::string() : r.message); },
                  [=](caf::error& e) mutable { settle(self->system().render(e)); });
      }
    };
    (*fire)();
    return rp;
  }};
}

// dhara's own peak memory: `dhara extensions list` (start every extension, list, shut down)
// with `n` native extensions, as GNU time reports it. An intermediate process is needed: the
// kernel folds the address space a child had before exec into its ru_maxrss, so a child
// spawned from this benchmark would report the benchmark's memory.
double dhara_max_rss_mib(int n) {
  testing::temp_home home;
  for (int i = 0; i < n; ++i) home.add_extension("echo-native", "echo-" + std::to_string(i));
  std::string out = (home.root / "maxrss.txt").string();
  std::string home_env = "HOME=" + home.home().string(), dh_env = "DHARA_HOME=" + home.dhara_home().string();
  char* envp[] = {home_env.data(), dh_env.data(), const_cast<char*>("PATH=/usr/local/bin:/usr/bin:/bin"), nullptr};
  char* argv[] = {const_cast<char*>("/usr/bin/time"), const_cast<char*>("-f"), const_cast<char*>("%M"),
                  const_cast<char*>("-o"), out.data(), const_cast<char*>(DHARA_BINARY),
                  const_cast<char*>("extensions"), const_cast<char*>("list"), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addchdir_np(&fa, home.project().c_str());
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, argv[0], &fa, nullptr, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  std::ifstream in(out);
  double kib = -1;
  in >> kib;
  return kib / 1024.0;
}

// How long a fleet took to start, or why it was not measured.
struct fleet_start {
  double secs = 0;
  std::string failure;  // empty: measured
};

// `n` extensions of `kind` started by dhara's extension host; not measured when one of them
// did not come up (how many, and the first one's reason).
fleet_start start_extensions(caf::actor_system& sys, const std::string& kind, int n) {
  testing::temp_home home;
  for (int i = 0; i < n; ++i) home.add_extension(kind, kind + "-" + std::to_string(i));
  auto loaded = broker::load_policy({home.home().string(), home.dhara_home().string(), home.project().string(),
                                     home.project().string()},
                                    false);
  if (!loaded) return {0, "the bench's own configuration did not load"};
  broker::extension_host host(sys, *loaded);
  auto t0 = clk::now();
  host.start();
  fleet_start out{std::chrono::duration<double>(clk::now() - t0).count(), {}};
  int down = 0;
  std::string first;
  for (const auto& info : host.extensions()) {
    if (info.state == actors::extension_state::ready) continue;
    if (down++ == 0) first = info.name + ": " + info.reason;
  }
  if (down > 0) out.failure = std::to_string(down) + " of them did not start; " + first;
  host.shutdown();
  return out;
}

// The same fleet without dhara: `argv` started n times at once in `folder`, each sent the
// initialize request dhara sends, timed until every one has answered a line. No sandbox, no
// supervisor; the scheduling policy and the environment are dhara's (io/piped_child.hpp). What
// starting the runtime itself costs on this machine (node's start-up is ~0.1 s of CPU a process
// here): the floor of the start-time row, measured in the same run.
fleet_start raw_fleet_start(const std::string& folder, const std::vector<std::string>& argv, int n) {
  // The environment dhara gives an extension (the user's NODE_EXTRA_CA_CERTS, say, would
  // make each node read a file of certificates first).
  std::vector<std::string> env = broker::extension_environment("echo", false, environ);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  struct child {
    pid_t pid = -1;
    int in = -1;
    int out = -1;
    bool answered = false;
  };
  static const std::string init =
      R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"0.1.0","capabilities":{"tools":true},"config":{}}})" "\n";
  std::vector<child> kids;
  fleet_start out;
  const auto t0 = clk::now();
  for (int i = 0; i < n && out.failure.empty(); ++i) {
    io::piped_child c;
    if (const int why = io::spawn_piped(c, argv, folder, envp.data()); why != 0) {
      out.failure = "cannot start " + argv.front() + ": " + std::strerror(why);
      break;
    }
    kids.push_back({c.pid, c.in, c.out, false});
    if (::write(c.in, init.data(), init.size()) != static_cast<ssize_t>(init.size()))
      out.failure = argv.front() + " did not take its initialize request";
  }
  std::size_t left = kids.size();
  char chunk[4096];
  while (out.failure.empty() && left > 0) {
    std::vector<pollfd> fds;
    for (const child& k : kids)
      if (!k.answered) fds.push_back({k.out, POLLIN, 0});
    const int ready = ::poll(fds.data(), fds.size(), 30000);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      out.failure = std::to_string(left) + " of them did not answer within 30 s";
      break;
    }
    for (const pollfd& f : fds) {
      if (f.revents == 0) continue;
      for (child& k : kids) {
        if (k.out != f.fd) continue;
        const ssize_t got = ::read(k.out, chunk, sizeof chunk);
        if (got <= 0) {
          out.failure = argv.front() + " ended without answering its initialize request";
          break;
        }
        if (std::memchr(chunk, '\n', static_cast<std::size_t>(got)) != nullptr) {
          k.answered = true;
          --left;
        }
      }
    }
  }
  out.secs = std::chrono::duration<double>(clk::now() - t0).count();
  for (child& k : kids) {
    ::close(k.in);  // EOF: each echo ends
    if (!out.failure.empty()) ::kill(k.pid, SIGKILL);
  }
  for (child& k : kids) {
    ::close(k.out);
    int status = 0;
    ::waitpid(k.pid, &status, 0);
  }
  return out;
}

// "<dhara> s; started bare <raw> s; dhara <ratio>x that", or why either was not measured.
std::string against_bare(const fleet_start& dhara, const fleet_start& bare) {
  if (!dhara.failure.empty()) return "not measured (" + dhara.failure + ")";
  char secs[120];
  if (!bare.failure.empty()) {
    std::snprintf(secs, sizeof secs, "%.2f s; ", dhara.secs);
    return secs + ("the bare start was not measured (" + bare.failure + ")");
  }
  std::snprintf(secs, sizeof secs, "%.2f s; started bare %.2f s; dhara %.2fx that", dhara.secs, bare.secs,
                dhara.secs / bare.secs);
  return secs;
}

// The mean of two timed starts, or the failure of either.
fleet_start mean(const fleet_start& a, const fleet_start& b) {
  if (!a.failure.empty()) return a;
  if (!b.failure.empty()) return b;
  return {(a.secs + b.secs) / 2, {}};
}

constexpr const char* usage =
    "usage: dhara_bench_runtime [round_trips]\n"
    "  round_trips: how many round trips each side measures, a whole number from 100 to 100000000\n"
    "  (default 20000)\n";

// The round trips to measure, from the one optional argument. Returns the exit code to stop
// with (0 after --help, 2 after a bad argument, with one sentence why) or -1 to go on.
int parse_round_trips(int argc, char** argv, std::size_t& n) {
  if (argc == 1) return -1;
  const std::string_view arg = argv[1];
  if (argc == 2 && (arg == "--help" || arg == "-h")) {
    std::fputs(usage, stdout);
    return 0;
  }
  if (argc > 2) {
    std::fprintf(stderr, "dhara_bench_runtime: takes at most one argument, the number of round trips.\n%s", usage);
    return 2;
  }
  unsigned long long v = 0;
  const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), v);
  if (ec != std::errc() || end != arg.data() + arg.size() || v < 100 || v > 100'000'000) {
    std::fprintf(stderr, "dhara_bench_runtime: '%s' is not a number of round trips from 100 to 100000000.\n%s",
                 argv[1], usage);
    return 2;
  }
  n = static_cast<std::size_t>(v);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = 20000;
  if (int rc = parse_round_trips(argc, argv, n); rc >= 0) return rc;
  spdlog::set_level(spdlog::level::warn);
  caf::actor_system_config cfg;
  actors::use_dhara_scheduler(cfg, 2);  // as a session runs
  caf::actor_system sys{cfg};

  testing::temp_home home;
  auto folder = home.add_extension("echo-native");
  std::string exe = (folder / "echo-native").string();

  // Both sides are started and warmed up first; then their measured calls alternate in blocks
  // (raw, dhara, dhara, raw, raw, ...), as `dhara bench` runs them: this machine's speed changes
  // within seconds, and a baseline measured apart from dhara's would meet another machine.
  std::vector<double> raw_samples, dh_samples;
  double raw_secs = 0, dh_secs = 0;  // the calls with 16 in flight, summed over the blocks
  std::uint64_t dh_failed = 0;       // calls through dhara that failed, warm-up included
  std::string dh_failure;            // why the first of them did
  {
    raw_client raw(exe, folder.string());
    raw.round_trips(n / 10);  // warm-up
    raw.throughput(n / 2, 16);
    raw.samples.clear();
    auto loaded = broker::load_policy({home.home().string(), home.dhara_home().string(), home.project().string(),
                                       home.project().string()},
                                      false);
    if (!loaded) {
      std::fprintf(stderr, "dhara_bench_runtime: the bench's own configuration did not load; nothing was measured.\n");
      return 1;
    }
    broker::extension_host host(sys, *loaded);
    host.start();
    auto sup = host.supervisor("echo-native");
    caf::scoped_actor self{sys};
    // `total` calls through dhara with `inflight` out at a time: their samples (one in flight)
    // added to dh_samples, and the seconds they took; failures counted in dh_failed.
    auto run = [&](std::size_t total, std::size_t inflight) {
      double secs = 0;
      auto d = sys.spawn(driver, sup, total, inflight);
      self->request(d, caf::infinite, go_atom::value)
          .receive(
              [&](std::vector<double>& s, double t, std::uint64_t failed, std::string& why) {
                dh_samples.insert(dh_samples.end(), s.begin(), s.end());
                secs = t;
                if (failed > 0 && dh_failed == 0) dh_failure = std::move(why);
                dh_failed += failed;
              },
              [&](caf::error& e) {
                if (dh_failed == 0) dh_failure = sys.render(e);
                dh_failed += total;
              });
      caf::anon_send_exit(d, caf::exit_reason::user_shutdown);
      return secs;
    };
    run(n / 10, 1);  // warm-up
    run(n / 2, 16);
    dh_samples.clear();
    // Block b holds the calls from total*b/blocks on; the side that goes first alternates in
    // pairs, so that neither always follows the other.
    auto in_blocks = [](std::size_t total, auto&& raw_part, auto&& dhara_part) {
      for (std::size_t b = 0; b < blocks; ++b) {
        const std::size_t k = total * (b + 1) / blocks - total * b / blocks;
        if (b % 2 == 0) raw_part(k);
        dhara_part(k);
        if (b % 2 == 1) raw_part(k);
      }
    };
    in_blocks(n, [&](std::size_t k) { raw.round_trips(k); }, [&](std::size_t k) { run(k, 1); });
    in_blocks(n * 5, [&](std::size_t k) { raw_secs += raw.throughput(k, 16); },
              [&](std::size_t k) { dh_secs += run(k, 16); });
    raw_samples = std::move(raw.samples);
    host.shutdown();
  }
  if (dh_failed > 0) {  // answered at once, failed calls would make dhara look fast
    std::fprintf(stderr,
                 "dhara_bench_runtime: %llu calls through dhara failed (the first: %s); no figures are printed.\n",
                 static_cast<unsigned long long>(dh_failed), dh_failure.c_str());
    return 1;
  }
  const percentiles raw_rt = of(raw_samples), dh_rt = of(dh_samples);
  const double raw_tput = static_cast<double>(n * 5) / raw_secs, dh_tput = static_cast<double>(n * 5) / dh_secs;

  // Each fleet twice, in the order dhara, bare, bare, dhara; each side's time is its mean.
  auto fleets = [&](const std::string& kind, int count, const std::string& bare_folder,
                    const std::vector<std::string>& bare_argv) {
    const fleet_start dhara_first = start_extensions(sys, kind, count);
    const fleet_start bare_first = raw_fleet_start(bare_folder, bare_argv, count);
    const fleet_start bare =
        bare_first.failure.empty() ? mean(bare_first, raw_fleet_start(bare_folder, bare_argv, count)) : bare_first;
    return std::pair{mean(dhara_first, start_extensions(sys, kind, count)), bare};
  };
  const auto [node50, raw_node50] = fleets("echo-node", 50, home.add_extension("echo-node").string(), {"node", "index.js"});
  const auto [native100, raw_native100] = fleets("echo-native", 100, folder.string(), {exe});
  double rss_100 = dhara_max_rss_mib(100);

  std::printf("== runtime (ratios against baselines measured in this run) ==\n");
  std::printf("round trip, native echo   raw libuv p50 %6.1f us  p99 %6.1f us\n", raw_rt.p50, raw_rt.p99);
  std::printf("                          dhara     p50 %6.1f us  p99 %6.1f us   p50 ratio %.2fx (target <= 2x)\n",
              dh_rt.p50, dh_rt.p99, dh_rt.p50 / raw_rt.p50);
  std::printf("16 in flight, calls/s     raw %.0f   dhara %.0f   (%.0f%% of raw)\n", raw_tput, dh_tput, 100 * dh_tput / raw_tput);
  std::printf("  (the measured calls alternate between the raw pipe and dhara in %zu blocks of each kind,\n"
              "  after a warm-up of each, so that both meet the machine alike: its speed changes within seconds)\n",
              blocks);
  std::printf("start 50 node extensions  %s\n", against_bare(node50, raw_node50).c_str());
  std::printf("  (target <= 1.5 s; TS Dhara 3.9 s sequential; bare: the same processes with dhara's environment and\n"
              "  scheduling policy, without dhara or a sandbox; each fleet started twice, dhara, bare, bare, dhara:\n"
              "  the means)\n");
  std::printf("start 100 native          %s\n", against_bare(native100, raw_native100).c_str());
  if (rss_100 >= 0) std::printf("dhara max RSS, 100 ext.   %.1f MiB (`dhara extensions list`; target <= 30 MiB)\n", rss_100);
  else std::printf("dhara max RSS, 100 ext.   not measured (`dhara extensions list` failed under /usr/bin/time)\n");
  // A row not measured is a failed run: a table with a hole would pass for a whole one.
  const bool whole = node50.failure.empty() && raw_node50.failure.empty() && native100.failure.empty() &&
                     raw_native100.failure.empty() && rss_100 >= 0;
  std::fflush(stdout);  // the table first, then the sentence about it
  if (!whole) std::fprintf(stderr, "dhara_bench_runtime: some rows were not measured; the table says why.\n");
  return whole ? 0 : 1;
}
