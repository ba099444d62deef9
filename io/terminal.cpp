// The prompt terminal (see terminal.hpp).
#include "io/terminal.hpp"

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>

namespace dhara::io {

terminal::terminal(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC)) {
  if (fd_ < 0) return;
  if (::tcgetattr(fd_, &saved_) == 0) {
    termios raw = saved_;
    // ISIG off too: Ctrl-C arrives as a key (byte 3) and answers q, at every prompt.
    raw.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO | ISIG));
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    restore_ = ::tcsetattr(fd_, TCSANOW, &raw) == 0;
  }
}

terminal::~terminal() {
  if (restore_) ::tcsetattr(fd_, TCSANOW, &saved_);
  if (fd_ >= 0) ::close(fd_);
}

void terminal::say(std::string_view text) {
  for (std::size_t done = 0; done < text.size();) {
    ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

char terminal::key() {
  for (;;) {
    char c = 0;
    ssize_t n = ::read(fd_, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    if (c == 'y' || c == 'Y') return 'y';
    if (c == 'n' || c == 'N') return 'n';
    if (c == 'q' || c == 'Q' || c == 3 /* Ctrl-C in raw mode */) return 'q';
  }
}

char terminal::ask(std::string_view question) {
  // Keys typed before the question is shown answer nothing: `yy` at one prompt approved the
  // next one too, before it could be read.
  ::tcflush(fd_, TCIFLUSH);
  say(question);
  char k = key();
  say(k ? std::string(1, k) + "\n" : std::string("\n"));
  return k;
}

bool terminal_available(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

}  // namespace dhara::io
