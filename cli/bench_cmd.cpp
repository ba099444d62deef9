// `dhara bench` (issue 7): the whole-system load generator. It builds a throwaway home with N
// copies of the bench echo extension, opens a real session (checker, audit writer,
// supervisors, OS sandbox launcher), drives M calls with K in flight through the same call
// path as `dhara run`, verifies the audit trail, and reports each figure next to a baseline
// measured in the same run: a raw pipe ping-pong to the same echo program, whose measured calls
// alternate with dhara's in blocks, and raw batched write(2) of the same audit bytes.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "broker/call_flow.hpp"
#include "broker/extension_host.hpp"
#include "cli/commands.hpp"
#include "cli/session.hpp"
#include "io/audit_log.hpp"
#include "io/permissions_file.hpp"
#include "io/path_resolver.hpp"
#include "io/piped_child.hpp"
#include "io/settings_file.hpp"
#include "policy/tool_gate.hpp"
#include "sandbox/launcher.hpp"

namespace dhara::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using clk = std::chrono::steady_clock;

/// What the user asked for.
struct bench_options {
  long long extensions = 4;
  long long calls = 20000;
  long long inflight = 16;
  long long warmup = 0;  ///< calls run first and not measured (when given)
  bool warmup_given = false;  ///< else min(calls, default_warmup)
  std::string durability = "write";
  std::string runtime = "native";
  bool json = false;
};

/// Warm-up calls when --warmup is not given (fewer when --calls is smaller): node's echo gets
/// faster for about this many calls (docs/performance.md, "Warm-up").
constexpr std::size_t default_warmup = 20000;

/// The measured calls alternate between dhara and the raw pipes in blocks: the machine's speed
/// changes within seconds (a round trip on one core took 15 µs in one run and 20 µs in the next,
/// docs/performance.md), and a baseline measured before dhara's run can meet another phase.
/// A block holds at least 1 000 calls and 64 rounds of the calls in flight (each block starts
/// and ends with fewer out), and there are at most 20; a run too short for two has one.
std::size_t block_count(std::size_t calls, std::size_t inflight) {
  return std::clamp<std::size_t>(calls / std::max<std::size_t>(1000, 64 * inflight), 1, 20);
}

/// With more extensions, the raw pipes' processes are measured and stopped before dhara's
/// start, not kept beside dhara's for the blocks.
constexpr std::size_t max_interleaved_extensions = 64;

/// The capability every bench call is checked for (one path check per call).
constexpr const char* bench_capability = "filesystem:read";

double seconds_between(clk::time_point a, clk::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct latency {
  double p50 = 0, p95 = 0, p99 = 0;
};

// Nearest-rank percentiles of samples in microseconds.
latency percentiles(std::vector<double> us) {
  if (us.empty()) return {};
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[std::min(us.size() - 1, static_cast<std::size_t>(q * static_cast<double>(us.size())))]; };
  return {at(0.50), at(0.95), at(0.99)};
}

std::string exe_dir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : self.parent_path().string();
}

bool write_text(const fs::path& path, const std::string& text, std::string& error) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) error = "cannot write " + path.string();
  return static_cast<bool>(out);
}

// ---- the throwaway home -------------------------------------------------------------------

/// The temporary world the bench runs in: never the user's HOME or DHARA_HOME.
struct bench_home {
  std::optional<sandbox::private_dir> held;  ///< its folder, removed at the end
  fs::path home, dhara_home, project, target;
  std::vector<std::string> names;    ///< installed extension names
  std::vector<fs::path> folders;     ///< their folders
  std::vector<std::string> command;  ///< the manifest's command, split on spaces (raw baseline)
};

// Copies the echo folder N times with a bench manifest (capabilities: filesystem:read), approves
// that capability in permissions.json and writes the durability into the global config.
bool make_home(bench_home& h, const bench_options& o, const fs::path& echo_src, std::string& error) {
  auto dir = sandbox::make_private_dir("dhara-bench-");
  if (!dir) {
    error = dir.err().message;
    return false;
  }
  const fs::path root = h.held.emplace(std::move(*dir)).path();
  h.home = root / "home";
  h.dhara_home = h.home / ".dhara";
  h.project = root / "project";
  h.target = h.project / "bench.txt";
  std::error_code ec;
  fs::create_directories(h.dhara_home / "extensions", ec);
  fs::create_directories(h.project, ec);
  if (ec) {
    error = "cannot create " + root.string() + ": " + ec.message();
    return false;
  }
  if (!write_text(h.target, "bench\n", error)) return false;

  // The native echo ships as a bare binary next to dhara: its manifest is built in.
  json manifest = {{"name", "echo-native"},
                   {"version", "1.0.0"},
                   {"description", "Native echo extension for benchmarks"},
                   {"author", "dhara"},
                   {"runtime", {{"type", "subprocess"}, {"command", "./echo-native"}, {"protocol", "json-rpc"}}}};
  if (fs::exists(echo_src / "manifest.json", ec)) {
    auto manifest_text = std::ifstream(echo_src / "manifest.json");
    manifest = json::parse(manifest_text, nullptr, false);
  }
  if (!manifest.is_object() || !manifest.contains("runtime") || !manifest["runtime"].value("command", "").size()) {
    error = "the bench echo extension's manifest in " + echo_src.string() + " is unreadable";
    return false;
  }
  std::istringstream words(manifest["runtime"]["command"].get<std::string>());
  for (std::string w; words >> w;) h.command.push_back(w);
  json permissions = json::object();
  for (long long i = 0; i < o.extensions; ++i) {
    std::string name = "bench-echo-" + std::to_string(i);
    fs::path folder = h.dhara_home / "extensions" / name;
    fs::copy(echo_src, folder, fs::copy_options::recursive, ec);
    if (ec) {
      error = "cannot copy " + echo_src.string() + " to " + folder.string() + ": " + ec.message();
      return false;
    }
    json m = manifest;
    m["name"] = name;
    m["capabilities"] = json::array({bench_capability});
    if (!write_text(folder / "manifest.json", m.dump(2) + "\n", error)) return false;
    // The seed's shape (no folder): applies to $DHARA_HOME/extensions/<name> only.
    permissions[name] = {{"version", m.value("version", "1.0.0")}, {"capabilities", {{bench_capability, "approved"}}}};
    h.names.push_back(name);
    h.folders.push_back(folder);
  }
  if (!write_text(io::permissions_path(h.dhara_home.string()), permissions.dump(2) + "\n", error)) return false;
  json config = {{"security", {{"audit", {{"durability", o.durability}}}}}};
  return write_text(io::global_settings_path(h.dhara_home.string()), config.dump(2) + "\n", error);
}

// ---- load through the real session ---------------------------------------------------------

using start_atom = caf::atom_constant<caf::atom("start")>;  // the warm-up calls
using block_atom = caf::atom_constant<caf::atom("block")>;  // the next block of measured calls

/// What the dhara run measured (the warm-up calls apart), summed over its blocks.
struct run_result {
  std::size_t ok = 0, failed = 0, checks = 0;
  std::size_t warmup_failed = 0, warmup_checks = 0;
  std::string first_error;
  std::vector<double> latencies_us;
  double seconds = 0;
  double cpu_seconds = 0;  ///< the process's CPU over the measured calls
};

/// Shared with the thread that runs the bench: it asks the driver for the warm-up or a block,
/// waits for `finished`, and reads `r` only then (the driver writes it while a part runs).
struct run_shared {
  std::atomic<std::size_t> done{0};  ///< calls answered, for the progress bar
  run_result r;
  std::promise<void> finished;  ///< a new one before each part asked for
};

struct driver_state {
  std::size_t next = 0, inflight = 0;
  std::size_t until = 0;  ///< the part under way ends when `next` reaches this and none is out
  bool warming = false;   ///< the warm-up calls are out: nothing is recorded
  bool running = false;   ///< a part is under way (`finished` not yet set)
  double cpu0 = 0;
  clk::time_point started;
  actors::call_replies replies;  ///< the answers its calls wait for
  static inline const char* name = "bench_driver";
};

struct run_params {
  std::vector<broker::registered_tool> tools;  // one per extension, calls go round-robin
  std::size_t calls = 0, inflight = 1, warmup = 0;
  std::string cwd, session_id;
  json input;
  std::size_t checks_per_call = 0;
};

double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

// Keeps `inflight` calls out through run_tool_call (gate → audit → extension), as the batch
// driver does, and times each call from its start to its outcome. Asked for the warm-up calls
// (tool call ids `warmup-N`), it runs them untimed; asked for a block of n measured calls
// (`bench-N`, numbered on from the last block), it runs and times them, adding the block's
// time and CPU to the run's. Each part ends when its last call is answered: `finished` is set
// then, and after the last measured call the driver quits.
caf::behavior bench_driver(caf::stateful_actor<driver_state>* self, const broker::extension_host* host,
                           std::shared_ptr<const run_params> p, std::shared_ptr<run_shared> shared) {
  auto fire = std::make_shared<std::function<void()>>();
  *fire = [self, host, p, shared, weak = std::weak_ptr<std::function<void()>>(fire)] {
    auto again = weak.lock();
    auto& st = self->state;
    while (st.inflight < p->inflight && st.next < st.until) {
      std::size_t i = st.next++;
      ++st.inflight;
      const bool warm = st.warming;
      broker::call_spec spec{p->tools[i % p->tools.size()], {}};
      spec.call.tool_call_id = (warm ? "warmup-" : "bench-") + std::to_string(i + 1);
      spec.call.tool = spec.tool.name;
      spec.call.input = p->input;
      spec.call.cwd = p->cwd;
      spec.call.session_id = p->session_id;
      (warm ? shared->r.warmup_checks : shared->r.checks) += p->checks_per_call;
      auto t0 = clk::now();
      broker::run_tool_call(self, *host, std::move(spec), broker::hitl_mode::automatic, actors::hitl_actor{},
                            [self, t0, warm, shared, again](broker::call_outcome o) {
                              auto& r = shared->r;
                              if (!warm)
                                r.latencies_us.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
                              --self->state.inflight;
                              if (o.result.ok && !(o.result.result.is_object() && o.result.result.value("isError", false))) {
                                r.ok += !warm;
                              } else {
                                if (r.failed + r.warmup_failed == 0)
                                  r.first_error = o.result.ok ? o.result.result.dump() : o.result.message;
                                ++(warm ? r.warmup_failed : r.failed);
                              }
                              shared->done.fetch_add(1, std::memory_order_relaxed);
                              (*again)();
                            });
    }
    if (st.running && st.inflight == 0 && st.next == st.until) {
      st.running = false;
      if (!st.warming) {
        shared->r.seconds += seconds_between(st.started, clk::now());
        shared->r.cpu_seconds += cpu_seconds() - st.cpu0;
      }
      const bool last = !st.warming && st.next == p->calls;
      shared->finished.set_value();  // the bench's thread may read `r` from here on
      if (last) self->quit();
    }
  };
  self->set_down_handler([self](caf::down_msg& m) { self->state.replies.down(m); });
  return {
      [self, fire, p](start_atom) {
        auto& st = self->state;
        st.warming = true;
        st.next = 0;
        st.until = p->warmup;
        st.running = true;
        (*fire)();
      },
      [self, fire, p](block_atom, std::size_t n) {
        auto& st = self->state;
        if (st.warming) st.next = 0;  // the measured calls are numbered from 1
        st.warming = false;
        st.until = std::min(p->calls, st.next + n);
        st.running = true;
        st.started = clk::now();
        st.cpu0 = cpu_seconds();
        (*fire)();
      },
      [self](actors::check_outcome& o) { self->state.replies.answered(o); },
      [self](actors::check_outcomes& os) { self->state.replies.answered(os); },
      [self](actors::call_result& r) { self->state.replies.answered(r); },
      [self](actors::call_results& rs) { self->state.replies.answered(rs); },
  };
}

// ---- baselines ------------------------------------------------------------------------------

/// The request line dhara writes for one call (same shape and input).
std::string request_line(std::size_t id, const std::string& tool_call_id, const json& input, const std::string& cwd,
                         const std::string& session) {
  json req = {{"jsonrpc", "2.0"},
              {"id", id},
              {"method", "tools/execute"},
              {"params",
               {{"toolCallId", tool_call_id}, {"toolName", "echo"}, {"input", input}, {"context", {{"cwd", cwd}, {"sessionId", session}}}}}};
  return req.dump() + "\n";
}

struct raw_proc {
  pid_t pid = -1;
  int in = -1, out = -1;
  std::string buf;
  std::deque<clk::time_point> sent;  // echo answers in order: FIFO timestamps
};

bool write_all(int fd, const std::string& s) {
  for (std::size_t off = 0; off < s.size();) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

// Scheduled as dhara-launch schedules every extension (SCHED_BATCH): the same program, run the
// same way (io/piped_child.hpp).
bool spawn_raw(raw_proc& p, const std::vector<std::string>& command, const fs::path& folder) {
  io::piped_child child;
  if (io::spawn_piped(child, command, folder.string()) != 0) return false;
  p.pid = child.pid;
  p.in = child.in;
  p.out = child.out;
  ::fcntl(p.in, F_SETFL, O_NONBLOCK);
  return true;
}

void stop_raw(std::vector<raw_proc>& procs) {
  for (auto& p : procs) {
    if (p.in >= 0) ::close(p.in);  // EOF: the echo exits
    p.in = -1;
  }
  for (auto& p : procs) {
    if (p.out >= 0) ::close(p.out);
    if (p.pid > 0) ::waitpid(p.pid, nullptr, 0);
  }
}

// Reads what is there from `p`; each complete line ends one request (latency recorded).
bool drain(raw_proc& p, std::vector<double>* samples, std::size_t& answered) {
  char chunk[65536];
  ssize_t n = ::read(p.out, chunk, sizeof chunk);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;
  auto now = clk::now();
  p.buf.append(chunk, static_cast<std::size_t>(n));
  std::size_t start = 0, nl;
  while ((nl = p.buf.find('\n', start)) != std::string::npos) {
    start = nl + 1;
    if (p.sent.empty()) continue;
    if (samples) samples->push_back(std::chrono::duration<double, std::micro>(now - p.sent.front()).count());
    p.sent.pop_front();
    ++answered;
  }
  p.buf.erase(0, start);
  return true;
}

// Writes one request; while the echo's stdin is full, reads its answers (both pipes full
// would otherwise deadlock with many calls in flight).
bool send_line(raw_proc& p, const std::string& s, std::vector<double>* samples, std::size_t& answered) {
  for (std::size_t off = 0; off < s.size();) {
    ssize_t n = ::write(p.in, s.data() + off, s.size() - off);
    if (n > 0) {
      off += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return false;
    pollfd f[2] = {{p.in, POLLOUT, 0}, {p.out, POLLIN, 0}};
    if (::poll(f, 2, 10000) <= 0) return false;
    if (f[1].revents && !drain(p, samples, answered)) return false;
  }
  return true;
}

// The physical limit: the same echo program, spawned here with plain pipes (no sandbox, no
// actors), sent the same request lines over N processes with K in flight. The processes are
// started, greeted and warmed up (the same number of warm-up calls as dhara's) once; the
// measured calls then come in blocks, run between dhara's (run_bench).
class raw_pipes {
 public:
  raw_pipes() = default;
  raw_pipes(const raw_pipes&) = delete;
  raw_pipes& operator=(const raw_pipes&) = delete;
  ~raw_pipes() { stop(); }

  /// Spawns the processes and runs the handshake and the warm-up calls; an error sentence, or "".
  std::string start(const bench_home& h, const run_params& p) {
    procs_.resize(h.folders.size());
    for (std::size_t i = 0; i < procs_.size(); ++i)
      if (!spawn_raw(procs_[i], h.command, h.folders[i])) return "cannot start " + h.command.front() + " in " + h.folders[i].string();
    for (const raw_proc& rp : procs_) fds_.push_back({rp.out, POLLIN, 0});
    for (std::size_t i = 0; i < 1024; ++i)
      lines_.push_back(request_line(i + 1, "bench-" + std::to_string(i + 1), p.input, p.cwd, p.session_id));
    samples.reserve(p.calls);
    const std::vector<std::string> init = {
        R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"0.1.0","capabilities":{"tools":true},"config":{}}})" "\n"};
    // The warm-up calls, as dhara's run has them: the echo's runtime is warm when timing starts.
    if (!pump(procs_.size(), procs_.size(), init, nullptr) || (p.warmup > 0 && !pump(p.warmup, p.inflight, lines_, nullptr)))
      return lost;
    return "";
  }

  /// Runs `n` measured calls with `inflight` out at once, adding their latencies and time; an
  /// error sentence, or "".
  std::string run(std::size_t n, std::size_t inflight) {
    const auto t0 = clk::now();
    const bool ok = pump(n, inflight, lines_, &samples);
    seconds += seconds_between(t0, clk::now());
    return ok ? "" : lost;
  }

  /// Ends the processes (their stdin closed: they exit) and waits for them.
  void stop() {
    stop_raw(procs_);
    procs_.clear();
    fds_.clear();
  }

  std::vector<double> samples;  ///< the measured calls' latencies, in microseconds
  double seconds = 0;           ///< the measured calls' time, summed over the blocks

 private:
  static constexpr const char* lost = "the raw pipe baseline lost its echo process";

  // Sends `total` lines with up to `inflight` unanswered; a stuck echo (10 s without an answer)
  // fails the baseline instead of hanging it.
  bool pump(std::size_t total, std::size_t inflight, const std::vector<std::string>& lines, std::vector<double>* out) {
    std::size_t issued = 0, answered = 0;
    while (answered < total) {
      while (issued - answered < inflight && issued < total) {
        raw_proc& rp = procs_[issued % procs_.size()];
        rp.sent.push_back(clk::now());
        if (!send_line(rp, lines[issued % lines.size()], out, answered)) return false;
        ++issued;
      }
      int n = ::poll(fds_.data(), fds_.size(), 10000);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      for (std::size_t i = 0; i < fds_.size(); ++i)
        if (fds_[i].revents && !drain(procs_[i], out, answered)) return false;
    }
    return true;
  }

  std::vector<raw_proc> procs_;
  std::vector<pollfd> fds_;
  std::vector<std::string> lines_;
};

// The disk's limit: the audit bytes of this run, packed into 64 KiB write(2)s to a file beside
// the audit, with fdatasync every 10 ms in fsync durability; repeated for at least 0.2 s.
double raw_write_lines_per_s(const std::string& bytes, std::size_t lines, const std::string& path, bool sync) {
  if (lines == 0 || bytes.empty()) return 0;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  double spent = 0;
  std::size_t written = 0;
  constexpr std::size_t chunk = 64 * 1024;
  while (spent < 0.2 || written == 0) {
    if (::ftruncate(fd, 0) != 0) break;
    auto t0 = clk::now();
    auto last_sync = t0;
    // Cut at line ends, as a batched writer would.
    for (std::size_t off = 0; off < bytes.size();) {
      std::size_t end = std::min(bytes.size(), off + chunk);
      if (end < bytes.size()) {
        std::size_t nl = bytes.rfind('\n', end - 1);
        end = nl != std::string::npos && nl >= off ? nl + 1 : end;
      }
      if (!write_all(fd, bytes.substr(off, end - off))) {
        ::close(fd);
        return 0;
      }
      off = end;
      if (sync && clk::now() - last_sync >= std::chrono::milliseconds(10)) {
        ::fdatasync(fd);
        last_sync = clk::now();
      }
    }
    if (sync) ::fdatasync(fd);
    spent += seconds_between(t0, clk::now());
    written += lines;
  }
  ::close(fd);
  ::unlink(path.c_str());
  return static_cast<double>(written) / spent;
}

// ---- the audit trail -----------------------------------------------------------------------

struct audit_report {
  bool verified = false;
  std::string why;             ///< what failed, one sentence
  std::size_t entries = 0;     ///< lines of this run's measured calls
  std::size_t warmup_entries = 0;  ///< lines of its warm-up calls
  std::size_t all_lines = 0;   ///< every line in the trail
  std::string bytes;           ///< the bytes of this run's lines
};

audit_report check_audit(const std::string& dir, std::size_t checks, std::size_t warmup_checks) {
  audit_report a;
  auto v = io::verify_audit(dir);
  if (!v) {
    a.why = v.err().message;
    return a;
  }
  a.all_lines = v->lines;
  for (const std::string& file : v->files) {
    std::ifstream in(file, std::ios::binary);
    for (std::string line; std::getline(in, line);) {
      // One search for the key, then the id's prefix: bench-N for measured calls, warmup-N.
      constexpr std::string_view key = R"("toolCallId":")";
      const std::size_t at = line.find(key);
      if (at == std::string::npos) continue;
      const std::string_view id = std::string_view(line).substr(at + key.size());
      if (id.starts_with("warmup-")) ++a.warmup_entries;
      if (!id.starts_with("bench-")) continue;
      ++a.entries;
      a.bytes += line;
      a.bytes.push_back('\n');
    }
  }
  if (!v->ok) {
    a.why = "the hash chain breaks at " + v->first_bad_file + " line " + std::to_string(v->first_bad_line) + ": " + v->why;
    return a;
  }
  auto entries = [](std::size_t n) { return std::to_string(n) + (n == 1 ? " entry" : " entries"); };
  auto checks_of = [](std::size_t n) { return std::to_string(n) + (n == 1 ? " check" : " checks"); };
  if (a.entries != checks) {
    a.why = "the audit has " + entries(a.entries) + " for " + checks_of(checks);
    return a;
  }
  if (a.warmup_entries != warmup_checks) {
    a.why = "the audit has " + entries(a.warmup_entries) + " for the warm-up calls' " + checks_of(warmup_checks);
    return a;
  }
  a.verified = true;
  return a;
}

// ---- process figures -----------------------------------------------------------------------

std::uint64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  return 0;
}

void draw_progress(std::size_t done, std::size_t total, clk::time_point started) {
  constexpr int width = 30;
  int filled = total ? static_cast<int>(static_cast<double>(done) / static_cast<double>(total) * width) : width;
  double secs = seconds_between(started, clk::now());
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(width, ' ');
  std::fprintf(stderr, "\r\033[Kdhara bench [%s] %zu/%zu calls  %.0f calls/s", bar.c_str(), done, total,
               secs > 0 ? static_cast<double>(done) / secs : 0.0);
  std::fflush(stderr);
}

std::string human_rate(double v) {
  char buf[32];
  if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.2f M", v / 1e6);
  else if (v >= 1e3) std::snprintf(buf, sizeof buf, "%.1f k", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

int usage_error(const std::string& sentence) {
  std::fprintf(stderr, "dhara bench: %s\n", sentence.c_str());
  return 2;
}

int run_bench(const global_options& g, const bench_options& o) {
  // The parser checked the ranges and sets (add_bench_command); this only guards the counts'
  // conversions to unsigned should another caller skip it.
  if (o.extensions < 1 || o.calls < 1 || o.inflight < 1 || o.warmup < 0)
    return usage_error("--extensions, --calls and --inflight must be at least 1, --warmup at least 0");
  const char* folder_name = o.runtime == "native" ? "echo-native" : o.runtime == "python" ? "echo-py"
                          : o.runtime == "node"   ? "echo-node"
                                                  : nullptr;
  if (!folder_name) return usage_error("--runtime takes one of native, python, node, not '" + o.runtime + "'");
  fs::path echo_src = fs::path(exe_dir()) / "extensions" / folder_name;
  std::error_code ec;
  bool present = o.runtime == "native" ? fs::is_regular_file(echo_src / "echo-native", ec)
                                        : fs::is_regular_file(echo_src / "manifest.json", ec);
  if (!present)
    return usage_error("--runtime " + o.runtime + " needs the bench echo extension at " + echo_src.string() +
                       ", which this installation lacks (the build places it there).");

  ::signal(SIGPIPE, SIG_IGN);  // a dead echo in the raw baseline is an error, not a crash
  bench_home h;
  std::string error;
  if (!make_home(h, o, echo_src, error)) {
    std::fprintf(stderr, "dhara bench: %s\n", error.c_str());
    return 1;
  }
  // An interpreter that is not installed is the machine's set-up: which one, and what to do (it
  // said "cannot start python3 in <a temporary folder already gone>", exit 1: a review).
  if (h.command.front().find('/') == std::string::npos) {
    const char* path_env = std::getenv("PATH");
    if (!io::path_executable_locator(path_env ? path_env : "/usr/local/bin:/usr/bin:/bin", h.project.string())
             .locate(h.command.front()))
      return usage_error("--runtime " + o.runtime + " runs its echo with '" + h.command.front() +
                         "', which is not on PATH: install it, or use --runtime native");
  }
  // The session reads HOME and DHARA_HOME; the extensions inherit them.
  ::setenv("HOME", h.home.c_str(), 1);
  ::setenv("DHARA_HOME", h.dhara_home.c_str(), 1);

  auto p = std::make_shared<run_params>();
  p->calls = static_cast<std::size_t>(o.calls);
  p->inflight = static_cast<std::size_t>(o.inflight);
  p->warmup = o.warmup_given ? static_cast<std::size_t>(o.warmup) : std::min<std::size_t>(p->calls, default_warmup);
  p->cwd = h.project.string();
  p->session_id = "bench-" + std::to_string(::getpid());
  p->input = {{"text", "hello from dhara bench"}, {"path", h.target.string()}};

  // The raw pipes' processes start first, and are greeted and warmed up before dhara's session
  // opens. With many extensions they are measured then and stopped (two sets of processes
  // would share the machine's memory); otherwise they wait, idle, for their blocks.
  const bool interleaved = h.folders.size() <= max_interleaved_extensions;
  const std::size_t blocks = interleaved ? block_count(p->calls, p->inflight) : 1;
  raw_pipes pipes;
  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "dhara bench: %s\n", why.c_str());
    return 1;
  };
  if (std::string why = pipes.start(h, *p); !why.empty()) return fail(why);
  if (!interleaved) {
    if (std::string why = pipes.run(p->calls, p->inflight); !why.empty()) return fail(why);
    pipes.stop();
  }

  run_result r;
  std::size_t extensions_ready = 0;
  double start_seconds = 0, cpu = 0;
  std::uint64_t rss = 0;
  {
    global_options sg = g;
    sg.no_prompt = true;  // nothing is pending; never ask
    int rc = 0;
    session_options so;
    so.cwd = h.project.string();
    so.interactive = false;
    so.prompt_at_load = false;
    so.session_id = p->session_id;
    so.error = &error;
    auto t_start = clk::now();
    auto s = open_session(sg, rc, so);
    start_seconds = seconds_between(t_start, clk::now());
    if (!s) {
      std::fprintf(stderr, "dhara bench: the session did not open: %s\n", error.c_str());
      return 1;
    }
    for (const auto& info : s->host->extensions()) {
      if (info.state == actors::extension_state::ready) {
        ++extensions_ready;
        continue;
      }
      std::fprintf(stderr, "dhara bench: extension %s did not start: %s\n", info.name.c_str(), info.reason.c_str());
    }
    if (extensions_ready != h.names.size()) return 1;
    for (const std::string& name : h.names) {
      auto resolved = s->host->resolve("echo", name);
      if (auto* err = std::get_if<broker::resolve_error>(&resolved)) {
        std::fprintf(stderr, "dhara bench: %s\n", err->message.c_str());
        return 1;
      }
      broker::registered_tool tool = std::get<broker::registered_tool>(resolved);
      // The echo declares `capabilities: []`; the bench tool requires filesystem:read (its
      // manifest declares it and it is approved) so that each call is checked and audited.
      tool.required.insert(policy::capability::filesystem_read);
      p->tools.push_back(std::move(tool));
    }
    p->checks_per_call = policy::tool_call_checks(p->tools.front().required, p->input).size();

    auto shared = std::make_shared<run_shared>();
    bool progress = ::isatty(2) == 1;
    auto t0 = clk::now();
    auto driver = s->sys->spawn(bench_driver, s->host.get(), std::shared_ptr<const run_params>(p), shared);
    // Asks the driver for one part (the warm-up, or a block) and waits for its last answer.
    auto dhara_part = [&](auto... what) {
      shared->finished = std::promise<void>();
      auto fut = shared->finished.get_future();
      caf::anon_send(driver, what...);
      while (fut.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready)
        if (progress) draw_progress(shared->done.load(std::memory_order_relaxed), p->warmup + p->calls, t0);
    };
    if (p->warmup > 0) dhara_part(start_atom::value);
    // Block b holds the calls from calls*b/blocks on; the side that goes first alternates in
    // pairs (raw, dhara, dhara, raw, ...), so neither always follows the other.
    std::string raw_error;
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::size_t n = p->calls * (b + 1) / blocks - p->calls * b / blocks;
      auto raw_part = [&] {
        if (interleaved && raw_error.empty()) raw_error = pipes.run(n, p->inflight);
      };
      if (b % 2 == 0) raw_part();
      dhara_part(block_atom::value, n);
      if (b % 2 == 1) raw_part();
    }
    if (progress) std::fputs("\r\033[K", stderr);
    pipes.stop();
    if (!raw_error.empty()) return fail(raw_error);
    r = std::move(shared->r);
    cpu = r.cpu_seconds;
    rss = peak_rss_bytes();
  }  // the session ends here: extensions stopped, the audit writer flushed and gone

  audit_report audit = check_audit(h.dhara_home.string(), r.checks, r.warmup_checks);
  double raw_lines = raw_write_lines_per_s(audit.bytes, audit.entries, (h.dhara_home / "raw-write.jsonl").string(),
                                           o.durability == "fsync");

  latency lat = percentiles(r.latencies_us);
  const latency pipe_lat = percentiles(std::move(pipes.samples));
  const double pipe_calls_per_s = pipes.seconds > 0 ? static_cast<double>(p->calls) / pipes.seconds : 0;
  double calls_per_s = static_cast<double>(p->calls) / r.seconds;
  double checks_per_s = static_cast<double>(r.checks) / r.seconds;
  double lines_per_s = static_cast<double>(audit.entries) / r.seconds;
  double bytes_per_s = static_cast<double>(audit.bytes.size()) / r.seconds;
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  bool all_ok = r.failed == 0 && r.warmup_failed == 0;

  if (o.json) {
    json out = {
        {"extensions", o.extensions},
        {"runtime", o.runtime},
        {"inflight", o.inflight},
        {"durability", o.durability},
        {"calls", p->calls},
        {"calls_ok", r.ok},
        {"calls_failed", r.failed},
        {"warmup_calls", p->warmup},
        {"blocks", blocks},
        {"warmup_calls_failed", r.warmup_failed},
        {"seconds", r.seconds},
        {"start_seconds", start_seconds},
        {"calls_per_s", calls_per_s},
        {"latency_us", {{"p50", lat.p50}, {"p95", lat.p95}, {"p99", lat.p99}}},
        {"checks", r.checks},
        {"checks_per_s", checks_per_s},
        {"audit_entries", audit.entries},
        {"warmup_audit_entries", audit.warmup_entries},
        {"audit_bytes", audit.bytes.size()},
        {"audit_lines_per_s", lines_per_s},
        {"audit_bytes_per_s", bytes_per_s},
        {"audit_verified", audit.verified},
        {"rss_bytes", rss},
        {"cpu_seconds", cpu},
        {"cpu_percent", 100.0 * ratio(cpu, r.seconds)},
        {"baseline",
         {{"pipe_round_trip_us_p50", pipe_lat.p50},
          {"pipe_round_trip_us_p99", pipe_lat.p99},
          {"pipe_calls_per_s", pipe_calls_per_s},
          {"raw_write_lines_per_s", raw_lines}}},
        {"ratios",
         {{"round_trip_p50_vs_pipe", ratio(lat.p50, pipe_lat.p50)},
          {"calls_per_s_vs_pipe", ratio(calls_per_s, pipe_calls_per_s)},
          {"audit_lines_vs_raw_write", ratio(lines_per_s, raw_lines)}}},
    };
    if (!audit.verified) out["audit_error"] = audit.why;
    if (!all_ok) out["first_error"] = r.first_error;
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("dhara bench: %lld %s echo extension%s, %zu call%s, %zu in flight, durability %s\n", o.extensions,
                o.runtime.c_str(), o.extensions == 1 ? "" : "s", p->calls, p->calls == 1 ? "" : "s", p->inflight,
                o.durability.c_str());
    std::printf("  (extensions started in %.2f s; every call goes gate -> audit -> extension)\n", start_seconds);
    if (p->warmup > 0)
      std::printf("  (%zu warm-up call%s first on each side, not measured)\n", p->warmup, p->warmup == 1 ? "" : "s");
    if (blocks > 1)
      std::printf("  (the measured calls alternate between dhara and the raw pipes in %zu blocks, so that both\n"
                  "   meet the machine alike: its speed changes within seconds)\n",
                  blocks);
    else if (!interleaved)
      std::printf("  (the raw pipes ran before dhara's session opened: more than %zu extensions are not kept\n"
                  "   running twice)\n",
                  max_interleaved_extensions);
    // A cross-core wake-up costs far more than a pipe round trip on one core, and each side's
    // placement is the kernel's choice (docs/performance.md, "three regimes").
    if (p->inflight == 1)
      std::printf("  (one call in flight: the latencies depend on whether the kernel keeps each side's two ends\n"
                  "   on one core; run under `taskset -c 0` to compare both sides on one core)\n");
    std::printf("\n");
    std::printf("  %-22s %14s %16s %10s\n", "", "dhara", "baseline", "ratio");
    std::printf("  %-22s %14s %16s %9.2fx  (raw pipes to the same echo, same load)\n", "calls/s",
                human_rate(calls_per_s).c_str(), human_rate(pipe_calls_per_s).c_str(), ratio(calls_per_s, pipe_calls_per_s));
    std::printf("  %-22s %11.1f us %13.1f us %9.2fx\n", "latency p50", lat.p50, pipe_lat.p50, ratio(lat.p50, pipe_lat.p50));
    std::printf("  %-22s %11.1f us %13.1f us %9.2fx\n", "latency p95", lat.p95, pipe_lat.p95, ratio(lat.p95, pipe_lat.p95));
    std::printf("  %-22s %11.1f us %13.1f us %9.2fx\n", "latency p99", lat.p99, pipe_lat.p99, ratio(lat.p99, pipe_lat.p99));
    std::printf("  %-22s %14s\n", "checks/s", human_rate(checks_per_s).c_str());
    std::printf("  %-22s %14s %16s %9.3fx  (raw batched write(2)%s of the same bytes)\n", "audit lines/s",
                human_rate(lines_per_s).c_str(), human_rate(raw_lines).c_str(), ratio(lines_per_s, raw_lines),
                o.durability == "fsync" ? " + fdatasync/10 ms" : "");
    std::printf("  %-22s %12sB/s\n", "audit bytes/s", human_rate(bytes_per_s).c_str());
    std::printf("  %-22s %11.1f MiB\n", "dhara peak RSS", static_cast<double>(rss) / (1024.0 * 1024.0));
    std::printf("  %-22s %12.2f s  (%.0f%% of one core over %.2f s)\n", "dhara CPU", cpu, 100.0 * ratio(cpu, r.seconds),
                r.seconds);
    std::printf("\n");
    if (audit.verified)
      std::printf("audit: verified: %zu %s for %zu check%s, one each%s; the hash chain holds (%zu line%s in all)\n",
                  audit.entries, audit.entries == 1 ? "entry" : "entries", r.checks, r.checks == 1 ? "" : "s",
                  p->warmup > 0 ? (", and " + std::to_string(audit.warmup_entries) + " for the warm-up calls").c_str() : "",
                  audit.all_lines, audit.all_lines == 1 ? "" : "s");
    else
      std::printf("audit: NOT verified: %s\n", audit.why.c_str());
    if (!all_ok)
      std::printf("calls: %zu of %zu failed, and %zu of %zu warm-up calls; the first failure: %s\n", r.failed, p->calls,
                  r.warmup_failed, p->warmup, r.first_error.c_str());
  }
  if (!audit.verified || !all_ok) {
    if (o.json) {
      if (!audit.verified) std::fprintf(stderr, "dhara bench: the audit is not verified: %s\n", audit.why.c_str());
      if (!all_ok)
        std::fprintf(stderr, "dhara bench: %zu call%s failed (%zu of them warm-up calls): %s\n", r.failed + r.warmup_failed,
                     r.failed + r.warmup_failed == 1 ? "" : "s", r.warmup_failed, r.first_error.c_str());
    }
    return 1;
  }
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, command_context& ctx) {
  auto o = std::make_shared<bench_options>();
  auto* bench = app.add_subcommand("bench", "Measure the whole system: tool calls through a real session, next to raw baselines");
  // The ranges and sets are checked by the parser, so a bad value is said as every usage
  // error is ("dhara bench: --calls takes a whole number from 1 to 100000000, not '0'; …").
  bench->add_option("--extensions", o->extensions, "Copies of the bench echo extension to start (default 4)")
      ->check(CLI::Range(1, 1000));
  bench->add_option("--calls", o->calls, "Tool calls to run (default 20000)")->check(CLI::Range(1, 100000000));
  bench->add_option("--inflight", o->inflight, "Calls in flight at once (default 16)")->check(CLI::Range(1, 65536));
  auto* warmup = bench->add_option("--warmup", o->warmup,
                    "Calls run first on each side and not measured, so that caches and a JIT runtime are warm "
                    "(default: as many as --calls, at most 20000; 0 for a cold start)")
      ->check(CLI::Range(0, 100000000));
  bench->add_option("--durability", o->durability, "Audit durability: none, write or fsync (default write)")
      ->check(CLI::IsMember({"none", "write", "fsync"}));
  bench->add_option("--runtime", o->runtime, "Bench extension runtime: native (default), python or node")
      ->check(CLI::IsMember({"native", "python", "node"}));
  bench->add_flag("--json", o->json, "Print one JSON object instead of the table");
  bench->footer("Runs in a fresh temporary DHARA_HOME and HOME (yours are never touched), verifies the audit "
                "trail and exits 1 if it does not hold.\nExamples:\n  dhara bench\n  dhara bench --durability fsync "
                "--calls 100000 --inflight 64 --json");
  bench->callback([&ctx, o, warmup] {
    o->warmup_given = warmup->count() > 0;
    ctx.action = [&ctx, o] { return run_bench(ctx.g, *o); };
  });
}

}  // namespace dhara::cli
