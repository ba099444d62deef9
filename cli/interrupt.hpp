// Ctrl-C, SIGTERM and SIGHUP for the commands that run extensions: instead of dying with calls
// in flight, `run` and `serve` treat them like the user's `q` — cancel what is running, report
// it, stop every extension, exit 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP: the terminal
// closed). A second signal ends the process at once, also while the extensions are stopped.
#pragma once

#include <functional>
#include <thread>

namespace dhara::cli {

class interrupt_watch {
 public:
  /// Blocks SIGINT, SIGTERM and SIGHUP in this thread — construct it before any other thread
  /// starts, so every thread inherits the mask — and opens a signalfd for them.
  interrupt_watch();
  ~interrupt_watch();
  interrupt_watch(const interrupt_watch&) = delete;
  interrupt_watch& operator=(const interrupt_watch&) = delete;

  /// Readable when a signal arrived (for poll), or -1 when none could be opened.
  int fd() const { return fd_; }
  /// The signal that arrived (SIGINT, SIGTERM, SIGHUP) or 0; the second one exits the process.
  int take();
  /// From now until the destructor, a thread takes the signals that come and passes the first
  /// to `on_first` (when given); the second ends the process at once, also during the teardown,
  /// when nothing else looks (stopping a hung extension may take its grace periods). A second
  /// call while the thread runs changes nothing. No other take() after the first call.
  void keep_watching(std::function<void(int)> on_first = {});
  /// The exit code for a signal: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP.
  static int exit_code(int signal);

 private:
  int fd_ = -1;
  int seen_ = 0;
  int stop_ = -1;  // an eventfd that ends the thread of keep_watching()
  std::thread watcher_;
};

}  // namespace dhara::cli
