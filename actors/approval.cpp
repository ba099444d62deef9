// The approval actor (see approval.hpp): prompts on the terminal, one key per answer.
#include "actors/approval.hpp"

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <caf/all.hpp>

#include "policy/capability.hpp"

namespace dhara::actors {
namespace {

// The terminal in single-key mode for the duration of one prompt; restored in all cases.
class tty_session {
 public:
  explicit tty_session(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC)) {
    if (fd_ < 0) return;
    if (::tcgetattr(fd_, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
      raw.c_cc[VMIN] = 1;
      raw.c_cc[VTIME] = 0;
      restore_ = ::tcsetattr(fd_, TCSANOW, &raw) == 0;
    }
  }
  ~tty_session() {
    if (restore_) ::tcsetattr(fd_, TCSANOW, &saved_);
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }

  void say(const std::string& text) {
    for (std::size_t done = 0; done < text.size();) {
      ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
      if (n <= 0) return;
      done += static_cast<std::size_t>(n);
    }
  }

  /// One of y/n/q (upper case accepted); Enter and other keys are skipped. 0 on EOF/error.
  char key() {
    for (;;) {
      char c = 0;
      ssize_t n = ::read(fd_, &c, 1);
      if (n <= 0) return 0;
      if (c == 'y' || c == 'Y') return 'y';
      if (c == 'n' || c == 'N') return 'n';
      if (c == 'q' || c == 'Q' || c == 3 /* Ctrl-C in raw mode */) return 'q';
    }
  }

 private:
  int fd_;
  termios saved_{};
  bool restore_ = false;
};

// Asks one question; the answer key is echoed with a newline.
char ask(tty_session& tty, const std::string& question) {
  tty.say(question + "\nApprove? (y/n) ");
  char k = tty.key();
  tty.say(k ? std::string(1, k) + "\n" : std::string("\n"));
  return k;
}

approval_answer prompt(const approval_request& r, const std::string& tty_path) {
  approval_answer out;
  tty_session tty(tty_path);
  if (!tty.ok()) {
    out.failure = "no terminal to ask on (" + tty_path + ")";
    return out;
  }
  std::string who = r.extension + " v" + r.version + (r.author.empty() ? "" : " (" + r.author + ")");
  if (!r.per_capability) {
    char k = ask(tty, package_prompt(r));
    if (k == 0) out.failure = "the terminal closed before an answer";
    else if (k == 'q') out.quit = true;
    else (k == 'y' ? out.approved : out.denied) = r.capabilities;
    return out;
  }
  for (const std::string& cap : r.capabilities) {
    auto parsed = policy::parse_capability(cap);
    std::string meaning = parsed ? std::string(policy::meaning(*parsed)) : std::string();
    char k = ask(tty, who + " requests " + cap + (meaning.empty() ? "" : " — " + meaning));
    if (k == 0) {
      out.failure = "the terminal closed before an answer";
      return out;
    }
    if (k == 'q') {
      out.quit = true;
      return out;
    }
    (k == 'y' ? out.approved : out.denied).push_back(cap);
  }
  return out;
}

}  // namespace

std::string package_prompt(const approval_request& r) {
  std::string caps;
  for (const std::string& c : r.capabilities) caps += (caps.empty() ? "" : ", ") + c;
  return r.extension + " v" + r.version + (r.author.empty() ? "" : " (" + r.author + ")") + " requests " + caps;
}

approval_actor spawn_approval(caf::actor_system& sys, std::string tty_path) {
  // Detached: a prompt blocks its thread on the terminal, never a scheduler worker. Its
  // mailbox serializes prompts while other actors keep working.
  return sys.spawn<caf::detached>([](approval_actor::pointer, std::string path) -> approval_actor::behavior_type {
    return {[path](ask_atom, const approval_request& r) { return prompt(r, path); }};
  }, std::move(tty_path));
}

}  // namespace dhara::actors
