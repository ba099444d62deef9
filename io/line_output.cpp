// The writer thread behind io::line_output: lines in order, whole, in writes of at most
// PIPE_BUF bytes.
#include "io/line_output.hpp"

#include <unistd.h>

#include <cerrno>
#include <climits>

namespace dhara::io {

line_output::line_output(int fd, std::size_t max_queued_bytes)
    : max_queued_bytes_(max_queued_bytes), fd_(fd), thread_([this] { run(); }) {}

line_output::~line_output() { finish(); }

int line_output::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
  }
  work_.notify_one();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void line_output::write_line(std::string line) {
  line.push_back('\n');
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // A line larger than the whole allowance still goes, once everything before it is written.
    room_.wait(lock, [&] { return broken_ || queued_bytes_ == 0 || queued_bytes_ + line.size() <= max_queued_bytes_; });
    if (broken_) return;
    queued_bytes_ += line.size();
    queue_.push_back(std::move(line));
  }
  work_.notify_one();
}

std::size_t line_output::queued_bytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  return broken_ ? 0 : queued_bytes_;
}

// Takes every queued line, writes them, and gives their room back; a failed write means the
// reader is gone. Each write(2) holds whole lines and at most PIPE_BUF bytes (a line longer
// than that goes alone): a pipe takes such a write whole or not at all, so a process killed
// while it waits for room in the pipe (SIGKILL mid-batch) leaves no torn line behind. Larger
// writes did: the part that fitted was in the pipe already (docs/reliability.md).
void line_output::run() {
  std::string buffer;
  for (;;) {
    std::deque<std::string> lines;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock, [&] { return !queue_.empty() || closing_; });
      if (queue_.empty()) return;  // closing, and everything is written
      lines.swap(queue_);
    }
    std::size_t taken = 0;
    bool broken = false;
    while (!lines.empty() && !broken) {
      buffer.clear();
      while (!lines.empty() && (buffer.empty() || buffer.size() + lines.front().size() <= PIPE_BUF)) {
        buffer += lines.front();
        lines.pop_front();
      }
      taken += buffer.size();
      for (std::size_t done = 0; done < buffer.size();) {
        ssize_t n = ::write(fd_, buffer.data() + done, buffer.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          broken = true;
          const int why = n < 0 ? errno : EIO;
          std::lock_guard<std::mutex> lock(mutex_);
          error_ = why;
          break;
        }
        done += static_cast<std::size_t>(n);
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (broken) {
        broken_ = true;
        queue_.clear();
        queued_bytes_ = 0;
      } else {
        queued_bytes_ -= taken;
      }
    }
    room_.notify_all();
  }
}

}  // namespace dhara::io
