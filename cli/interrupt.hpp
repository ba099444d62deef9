// Ctrl-C and SIGTERM for the commands that run extensions: instead of dying with calls in
// flight, `run` and `serve` treat them like the user's `q` — cancel what is running, report
// it, stop every extension, exit 130 (SIGINT) or 143 (SIGTERM). A second signal ends the
// process at once.
#pragma once

namespace dhara::cli {

class interrupt_watch {
 public:
  /// Blocks SIGINT and SIGTERM in this thread — construct it before any other thread starts,
  /// so every thread inherits the mask — and opens a signalfd for them.
  interrupt_watch();
  ~interrupt_watch();
  interrupt_watch(const interrupt_watch&) = delete;
  interrupt_watch& operator=(const interrupt_watch&) = delete;

  /// Readable when a signal arrived (for poll), or -1 when none could be opened.
  int fd() const { return fd_; }
  /// The signal that arrived (SIGINT, SIGTERM) or 0; the second one exits the process.
  int take();
  /// The exit code for a signal: 130 for SIGINT, 143 for SIGTERM.
  static int exit_code(int signal);

 private:
  int fd_ = -1;
  int seen_ = 0;
};

}  // namespace dhara::cli
