// Many openat2(2) calls in one system call, through an io_uring of this thread's own. In this
// VM a system call costs ~1-1.4 µs to enter and leave, more than the walk of a short cached path,
// so a checker with many path checks waiting asks for all their first looks, and the walks of
// the paths under links it knows, at once (docs/performance.md, "First looks asked together").
#pragma once

#include <fcntl.h>

#include <cstdint>
#include <span>

struct open_how;

namespace dhara::io {

/// One open of a batch: `path` in, `result` out (a new descriptor, or -errno). `dir` and
/// `how`, where given, take the place of AT_FDCWD and the batch's `how` for this open.
struct batched_open {
  const char* path = nullptr;
  int result = 0;
  int dir = AT_FDCWD;
  const open_how* how = nullptr;
};

/// Runs openat2(dir, path, how) for every entry, in as few io_uring submissions as its
/// ring holds (128 a submission), and waits for all of them. False when this thread cannot use
/// io_uring (the kernel has none or refuses it, a seccomp filter, a ring that failed): then
/// no entry was opened and the caller makes the calls itself. An entry the kernel could not
/// run as asked (an opcode it does not know) says so with its own -errno, as a call would.
/// Every descriptor in a result is the caller's to close.
bool open_all(std::span<batched_open> opens, const open_how& how);

/// Closes `fds` in one submission, or one close(2) each when the ring cannot be used.
void close_all(std::span<const int> fds);

/// Tests only: whether open_all may use io_uring on any thread (true unless turned off).
void allow_open_batches(bool allowed);

}  // namespace dhara::io
