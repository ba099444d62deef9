// The user's terminal for prompts: opened per prompt (normally /dev/tty, so prompts work
// while stdin carries a batch), put in single-key mode, and restored in all cases.
#pragma once

#include <string>
#include <string_view>

#include <termios.h>

namespace dhara::io {

class terminal {
 public:
  explicit terminal(const std::string& path = "/dev/tty");
  ~terminal();
  terminal(const terminal&) = delete;
  terminal& operator=(const terminal&) = delete;

  /// False when the terminal could not be opened: callers treat that as a lost prompt.
  bool ok() const { return fd_ >= 0; }

  /// Writes all of `text` (best effort: a closed terminal shows up as key() == 0).
  void say(std::string_view text);

  /// The next answer key: 'y', 'n' or 'q' (upper case accepted, Ctrl-C is 'q'); Enter and
  /// other keys are skipped. 0 on EOF or error.
  char key();

  /// Prints `question` (which ends with its own "(y/n) " hint), reads one key and echoes it
  /// with a newline. 0 when no answer could be read.
  char ask(std::string_view question);

 private:
  int fd_;
  termios saved_{};
  bool restore_ = false;
};

/// True when a prompt could be shown: /dev/tty (or `path`) opens read-write.
bool terminal_available(const std::string& path = "/dev/tty");

}  // namespace dhara::io
