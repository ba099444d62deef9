// Lines written to a descriptor by a thread of their own: serve's answers to its client and
// batch's result lines, so that a reader who stops reading never holds an actor.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace dhara::io {

/// Writes lines to a file descriptor (serve's answers, batch's results); safe from any thread.
/// The lines are written in order by a thread of its own, so a reader that stops reading holds
/// no actor (nor the io thread, which may run actors: see actors::run_here_scope) until
/// `max_queued_bytes` wait unwritten; then write_line waits for room (nothing is dropped). A
/// reader that went away (EPIPE, or any failed write) makes every later write a no-op. The
/// destructor writes what is queued, then ends the thread.
class line_output {
 public:
  explicit line_output(int fd, std::size_t max_queued_bytes = std::size_t{64} << 20);
  ~line_output();
  line_output(const line_output&) = delete;
  line_output& operator=(const line_output&) = delete;
  /// Queues `line` and a newline.
  void write_line(std::string line);
  /// Bytes queued and not yet written: what the reader has not taken yet.
  std::size_t queued_bytes();
  /// The most that may wait before write_line waits for room.
  std::size_t max_queued_bytes() const { return max_queued_bytes_; }
  /// Writes what is queued and ends the thread (as the destructor does), then says why a
  /// write failed: its errno, or 0 when every line was written.
  int finish();

 private:
  void run();
  std::mutex mutex_;
  std::condition_variable work_;  ///< lines queued, or closing
  std::condition_variable room_;  ///< bytes written (or the client went away)
  std::deque<std::string> queue_;
  std::size_t queued_bytes_ = 0;  ///< queued and not yet written
  const std::size_t max_queued_bytes_;
  const int fd_;
  bool broken_ = false;
  int error_ = 0;  ///< errno of the write that failed (EPIPE, ENOSPC, EBADF, …)
  bool closing_ = false;
  std::thread thread_;  ///< last: started once the rest is ready
};

}  // namespace dhara::io
