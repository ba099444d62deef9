// Signals as a quit request (see interrupt.hpp).
#include "cli/interrupt.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "io/event_loop.hpp"

namespace dhara::cli {
namespace {

// SIGINT and SIGTERM; and SIGHUP (a closed terminal, a dropped ssh session: results were lost)
// unless it came ignored, as `nohup` and daemon managers leave it: that choice stands (a
// review: `nohup dhara run` ended at the terminal's close).
sigset_t quit_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  struct sigaction hup {};
  if (::sigaction(SIGHUP, nullptr, &hup) == 0 && hup.sa_handler != SIG_IGN) sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

interrupt_watch::interrupt_watch() {
  sigset_t set = quit_signals();
  if (::pthread_sigmask(SIG_BLOCK, &set, nullptr) == 0) fd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd_ < 0) {
    ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);  // no signalfd: the default action stays
  }
}

interrupt_watch::~interrupt_watch() {
  if (watcher_.joinable()) {
    std::uint64_t one = 1;
    if (::write(stop_, &one, sizeof one) < 0) { /* the thread also ends with the process */ }
    watcher_.join();
  }
  if (stop_ >= 0) ::close(stop_);
  if (fd_ < 0) return;
  // A signal that came while nobody looked (a second Ctrl-C during the teardown of an
  // interrupted start) is read here and dropped: unblocked, it would kill the process by the
  // signal instead of leaving it the exit code it has (and take() would _exit, losing output).
  signalfd_siginfo info{};
  while (::read(fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
  }
  ::close(fd_);
  sigset_t set = quit_signals();
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

int interrupt_watch::take() {
  signalfd_siginfo info{};
  if (fd_ < 0 || ::read(fd_, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return 0;
  int sig = static_cast<int>(info.ssi_signo);
  if (seen_ != 0) {  // the second Ctrl-C: no more waiting
    io::kill_every_process_group_now();  // but no extension left behind where no sandbox ends it (a review)
    ::_exit(exit_code(sig));
  }
  seen_ = sig;
  return sig;
}

void interrupt_watch::keep_watching(std::function<void(int)> on_first) {
  if (fd_ < 0 || watcher_.joinable()) return;
  stop_ = ::eventfd(0, EFD_CLOEXEC);
  if (stop_ < 0) return;  // nothing watches: the signals wait, blocked, as before
  watcher_ = std::thread([this, on_first = std::move(on_first)] {
    for (;;) {
      pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
      if (fds[1].revents) return;
      if (fds[0].revents)
        if (int sig = take(); sig != 0 && on_first) on_first(sig);  // a second exits inside take()
    }
  });
}

int interrupt_watch::exit_code(int signal) { return signal == SIGTERM ? 143 : signal == SIGHUP ? 129 : 130; }

}  // namespace dhara::cli
