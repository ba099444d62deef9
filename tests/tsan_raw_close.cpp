// ThreadSanitizer build only (DHARA_TSAN): tells TSan about the descriptors libuv closes.
// libuv (Debian's build, without TSan) closes every descriptor with syscall(SYS_close, fd), not
// close(), so TSan never sees the close. The loop's thread creates and reads descriptors (the
// pipe uv_spawn waits on for the child's exec, the extensions' pipes), libuv closes them
// unseen, and when another thread then opens a file and gets the same number, TSan reports a
// race on the descriptor between that open and the loop thread's old use of it. libuv built
// with clang and TSan wraps its syscall the same way: __sanitizer_syscall_pre_close before,
// __sanitizer_syscall_post_close after. This interposes libc's syscall() for the libraries
// (the executables export it with -rdynamic, as for tests/tsan_caf_handoff.cpp) and adds
// exactly those two calls for SYS_close; every other system call passes through unchanged.
#include <dlfcn.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

extern "C" void __sanitizer_syscall_pre_impl_close(long fd);
extern "C" void __sanitizer_syscall_post_impl_close(long res, long fd);

namespace {

using syscall_fn = long (*)(long, ...);

syscall_fn real_syscall() {
  static const syscall_fn real = [] {
    auto f = reinterpret_cast<syscall_fn>(dlsym(RTLD_NEXT, "syscall"));
    if (!f) {
      std::fprintf(stderr, "tsan_raw_close: syscall not found in libc\n");
      std::abort();
    }
    return f;
  }();
  return real;
}

}  // namespace

// Linux system calls take at most six arguments, passed in registers; reading six as glibc's
// own syscall() does is how a variadic wrapper forwards them.
extern "C" long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (long& x : a) x = va_arg(ap, long);
  va_end(ap);
  if (number == SYS_close) __sanitizer_syscall_pre_impl_close(a[0]);
  long rc = real_syscall()(number, a[0], a[1], a[2], a[3], a[4], a[5]);
  if (number == SYS_close) {
    int saved = errno;  // the caller reads errno after a failed close
    __sanitizer_syscall_post_impl_close(rc, a[0]);
    errno = saved;
  }
  return rc;
}
