// The libuv loop on its own thread, and the extension processes it owns: spawn with pipes,
// newline framing of stdout, stderr to a capped log, signals to the process group, writes
// with a bounded queue, and exit reports. Callers never touch libuv: commands are posted to
// the loop thread through a uv_async_t, and events come back through callbacks that run on
// the loop thread (the actor layer turns them into messages).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace dhara::io {

/// How to start one extension process.
struct spawn_request {
  std::vector<std::string> argv;       ///< argv[0] is an absolute path (resolved once)
  std::string cwd;                     ///< the extension's folder
  std::vector<std::string> env;        ///< "KEY=value" entries: the whole environment
  std::size_t max_line_bytes = 8 * 1024 * 1024;
  std::size_t max_write_queue_bytes = 64 * 1024 * 1024;  ///< unread input before a violation
  std::string stderr_log;              ///< file for the process's stderr ("" = discard)
  std::size_t stderr_log_cap = 10 * 1024 * 1024;         ///< then one rotated backup (.1)
};

/// How a process ended.
struct process_exit {
  std::int64_t exit_status = 0;  ///< meaningful when term_signal == 0
  int term_signal = 0;           ///< 0 after a normal exit
  std::string stderr_tail;       ///< the last few KiB of its stderr
  std::string violation;         ///< non-empty when dhara killed it for a protocol violation
};

/// Flow control between the loop and the receiver of a process's lines, shared by both
/// threads: the loop counts batches handed out and stops reading at `limit` undelivered
/// ones; the receiver calls consumed() after each batch and resumes reading at half.
struct read_credit {
  static constexpr int limit = 64;
  std::atomic<int> pending{0};
  std::atomic<bool> paused{false};
  /// Called by the receiver after handling one batch; true when it must call
  /// event_loop::resume_reading.
  bool consumed() { return pending.fetch_sub(1) - 1 <= limit / 2 && paused.exchange(false); }
};

/// Events of one process, called on the loop thread: keep them short and thread-safe towards
/// their receiver (e.g. caf::anon_send).
struct process_callbacks {
  /// Optional flow control (see read_credit); without it, reading never pauses.
  std::shared_ptr<read_credit> credit;
  /// Complete stdout lines from one read (several lines per call when they arrived together).
  std::function<void(std::vector<std::string>&&)> on_lines;
  /// The process could not be started (uv_spawn failed): the reason.
  std::function<void(std::string)> on_spawn_error;
  /// The process ended and its stdout is closed (reported exactly once after a spawn).
  std::function<void(process_exit)> on_exit;
};

/// The loop thread and the processes it owns. Thread-safe: every public member may be called
/// from any thread except the loop thread's own callbacks calling stop().
class event_loop {
 public:
  event_loop();
  ~event_loop();
  event_loop(const event_loop&) = delete;
  event_loop& operator=(const event_loop&) = delete;

  /// Starts a process; returns its id (never 0). Events arrive through `callbacks`.
  std::uint64_t spawn(spawn_request request, process_callbacks callbacks);
  /// Writes bytes to the process's stdin (the caller adds the newline), in call order. When
  /// nothing is queued and the pipe has room, the caller's thread writes them at once, which
  /// spares the loop thread a wake-up; otherwise they queue on the loop.
  void write(std::uint64_t id, std::string bytes);
  /// Sends a signal to the process's whole group (it and anything it forked).
  void signal(std::uint64_t id, int signum);
  /// Kills the process group with SIGKILL and reports `reason` as a violation in its exit.
  void kill_for_violation(std::uint64_t id, std::string reason);
  /// Bytes written to the process's stdin (by write) that it has not taken yet, the pipe's
  /// own 64 KiB aside: what counts against max_write_queue_bytes. 0 once its stdin is closed.
  std::size_t queued_bytes(std::uint64_t id);
  /// Starts reading stdout again after read_credit paused it.
  void resume_reading(std::uint64_t id);

  /// Watches a directory (inotify, read on the loop): `on_change(filename)` runs on the loop
  /// thread when an entry is created, deleted, renamed (the atomic write of permissions.json
  /// renames a file over another), changes its attributes, or is closed after a write (not at
  /// every write: appends to a log beside it wake nobody); "" when the kernel dropped events
  /// or the folder itself was deleted or moved (anything may have changed). Watches end with
  /// stop().
  void watch_directory(std::string dir, std::function<void(std::string)> on_change);

  /// Graceful stop: close every stdin, SIGTERM each group, SIGKILL after `grace_ms`, wait for
  /// every exit, close all handles and join the loop thread. Idempotent.
  void stop(std::uint64_t grace_ms = 2000);

  /// True when the loop has events it has not handled yet (a pipe with bytes to read, a
  /// command posted): one poll(2) of the loop's epoll descriptor, without waiting. Called on
  /// the loop thread from a callback whose event was the only one the loop's last look found,
  /// false without a system call (see events_in_this_dispatch).
  bool events_waiting() const;

  /// On the loop thread, inside a callback of libuv's poll phase: how many events the epoll
  /// look being dispatched returned (this callback's among them). 0 elsewhere, and with a
  /// libuv that does not keep the count where 1.44 does (1.45 and later).
  std::size_t events_in_this_dispatch() const;

  /// Processes currently alive (spawned and not yet reported as exited).
  std::size_t live_processes() const { return live_.load(); }
  /// uv_loop_close's result after stop(): 0 when every handle was closed.
  int loop_close_result() const { return loop_close_rc_; }

  struct impl;

 private:
  void post(std::function<void()> f);
  void post_locked(std::function<void()> f);
  /// A process's stdin as writers see it, under its own lock (a write to one extension never
  /// waits for a write to another): its descriptor while the loop keeps it open, and how many
  /// queued writes the loop has not finished. The map of them is guarded by mtx_; a thread
  /// may take mtx_ while it holds a stdin lock, never the other way round.
  struct stdin_state {
    std::mutex lock;
    int fd = -1;
    std::size_t queued = 0;
    std::size_t queued_bytes = 0;  // their bytes
  };
  std::shared_ptr<stdin_state> find_stdin(std::uint64_t id);
  std::unique_ptr<impl> impl_;
  std::mutex mtx_;
  std::vector<std::function<void()>> queue_;
  std::unordered_map<std::uint64_t, std::shared_ptr<stdin_state>> stdin_;
  bool stopped_ = false;
  std::atomic<std::uint64_t> next_id_{1};
  std::atomic<std::size_t> live_{0};
  int loop_close_rc_ = -1;
  std::thread thread_;
};

/// SIGKILL to the process group of every extension any event loop of this process runs: for
/// an exit that cannot wait for the loops (a second Ctrl-C), so that no extension outlives
/// dhara where no sandbox would end it (yolo). Safe from any thread; not from a signal handler.
void kill_every_process_group_now();

}  // namespace dhara::io
