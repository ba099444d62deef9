// ThreadSanitizer build only (DHARA_TSAN): tells TSan about the one synchronization it cannot
// see. libcaf_core is not built with TSan, so the atomics of its mailboxes and scheduler queues
// are invisible, and every message looks like a race between its sender and its receiver.
// These wrappers interpose CAF's exported enqueue/launch/resume/consume/dequeue (dynamic symbol
// interposition, the executables link with -rdynamic; the real functions are found with
// dlsym(RTLD_NEXT)) and add exactly the edge CAF guarantees: what a thread did before handing a
// message (or a new actor) to an actor happens before the actor handles it, and one handler of
// an actor happens before its next one, on whichever worker. A handler's writes are released
// when it returns, not only when resume returns: CAF may reschedule the actor on another worker
// before this one has left resume. Nothing else is hidden: a race between an actor and the
// libuv loop thread, or between two actors sharing memory, is still reported.
// Written against CAF 0.17.6's ABI (the top-level CMakeLists.txt accepts only 0.17.x).
#include <dlfcn.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>

extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);

namespace {

template <class F>
F real(const char* mangled) {
  void* f = dlsym(RTLD_NEXT, mangled);
  if (!f) {
    std::fprintf(stderr, "tsan_caf_handoff: %s not found in libcaf_core\n", mangled);
    std::abort();
  }
  return reinterpret_cast<F>(f);
}

// The scheduled_actor's `resumable` base sits at this offset (the _ZThn160_ thunk below).
constexpr std::ptrdiff_t resumable_offset = 160;

}  // namespace

// Itanium ABI: a std::unique_ptr argument is passed by invisible reference (void* here).
#define CAF_SCHED_ENQUEUE _ZN3caf15scheduled_actor7enqueueESt10unique_ptrINS_15mailbox_elementENS_6detail8disposerEEPNS_14execution_unitE
#define CAF_BLOCK_ENQUEUE _ZN3caf14blocking_actor7enqueueESt10unique_ptrINS_15mailbox_elementENS_6detail8disposerEEPNS_14execution_unitE
#define STR2(x) #x
#define STR(x) STR2(x)

extern "C" {

/// caf::scheduled_actor::enqueue: the sender publishes the message to the receiver.
void CAF_SCHED_ENQUEUE(void* self, void* msg, void* eu) {
  static auto f = real<void (*)(void*, void*, void*)>(STR(CAF_SCHED_ENQUEUE));
  __tsan_release(self);
  f(self, msg, eu);
}

/// caf::blocking_actor::enqueue (scoped_actor and friends).
void CAF_BLOCK_ENQUEUE(void* self, void* msg, void* eu) {
  static auto f = real<void (*)(void*, void*, void*)>(STR(CAF_BLOCK_ENQUEUE));
  __tsan_release(self);
  f(self, msg, eu);
}

/// caf::blocking_actor::dequeue: the receiver takes what its senders published.
void* _ZN3caf14blocking_actor7dequeueEv(void* self) {
  static auto f = real<void* (*)(void*)>("_ZN3caf14blocking_actor7dequeueEv");
  void* m = f(self);
  __tsan_acquire(self);
  return m;
}

/// caf::scheduled_actor::launch: the spawner's writes (initial state) before the first run.
void _ZN3caf15scheduled_actor6launchEPNS_14execution_unitEbb(void* self, void* eu, bool lazy, bool hide) {
  static auto f = real<void (*)(void*, void*, bool, bool)>("_ZN3caf15scheduled_actor6launchEPNS_14execution_unitEbb");
  __tsan_release(self);
  f(self, eu, lazy, hide);
}

/// caf::scheduled_actor::resume: a run sees its messages and every earlier run, on whichever
/// worker thread that ran (work stealing moves actors between threads).
int _ZN3caf15scheduled_actor6resumeEPNS_14execution_unitEm(void* self, void* eu, std::size_t max) {
  static auto f = real<int (*)(void*, void*, std::size_t)>("_ZN3caf15scheduled_actor6resumeEPNS_14execution_unitEm");
  __tsan_acquire(self);
  int r = f(self, eu, max);
  __tsan_release(self);
  return r;
}

/// The same through the `resumable` base (what the scheduler calls).
int _ZThn160_N3caf15scheduled_actor6resumeEPNS_14execution_unitEm(void* as_resumable, void* eu, std::size_t max) {
  void* self = static_cast<char*>(as_resumable) - resumable_offset;
  static auto f = real<int (*)(void*, void*, std::size_t)>("_ZN3caf15scheduled_actor6resumeEPNS_14execution_unitEm");
  __tsan_acquire(self);
  int r = f(self, eu, max);
  __tsan_release(self);
  return r;
}

/// caf::scheduled_actor::consume (virtual, one call per message): an actor that is already
/// running takes messages enqueued during its run, which the acquire in resume cannot cover.
int _ZN3caf15scheduled_actor7consumeERNS_15mailbox_elementE(void* self, void* msg) {
  static auto f = real<int (*)(void*, void*)>("_ZN3caf15scheduled_actor7consumeERNS_15mailbox_elementE");
  __tsan_acquire(self);
  int r = f(self, msg);
  __tsan_release(self);
  return r;
}

/// caf::scheduled_actor::reactivate: resume's loop calls it per message through the PLT, also
/// when the visitor above is inlined into resume.
int _ZN3caf15scheduled_actor10reactivateERNS_15mailbox_elementE(void* self, void* msg) {
  static auto f = real<int (*)(void*, void*)>("_ZN3caf15scheduled_actor10reactivateERNS_15mailbox_elementE");
  __tsan_acquire(self);
  int r = f(self, msg);
  __tsan_release(self);
  return r;
}

/// caf::scheduled_actor::activate(execution_unit*, mailbox_element&): the first message.
int _ZN3caf15scheduled_actor8activateEPNS_14execution_unitERNS_15mailbox_elementE(void* self, void* eu, void* msg) {
  static auto f = real<int (*)(void*, void*, void*)>("_ZN3caf15scheduled_actor8activateEPNS_14execution_unitERNS_15mailbox_elementE");
  __tsan_acquire(self);
  int r = f(self, eu, msg);
  __tsan_release(self);
  return r;
}

/// caf::scheduled_actor::activate(execution_unit*): the first run (initialize, behavior).
bool _ZN3caf15scheduled_actor8activateEPNS_14execution_unitE(void* self, void* eu) {
  static auto f = real<bool (*)(void*, void*)>("_ZN3caf15scheduled_actor8activateEPNS_14execution_unitE");
  __tsan_acquire(self);
  bool r = f(self, eu);
  __tsan_release(self);
  return r;
}

/// caf::scheduled_actor::mailbox_visitor::operator(): each message resume takes from the
/// mailbox (first member: the scheduled_actor*, caf/scheduled_actor.hpp).
int _ZN3caf15scheduled_actor15mailbox_visitorclERNS_15mailbox_elementE(void* visitor, void* msg) {
  static auto f = real<int (*)(void*, void*)>("_ZN3caf15scheduled_actor15mailbox_visitorclERNS_15mailbox_elementE");
  void* self = *static_cast<void**>(visitor);
  __tsan_acquire(self);
  int r = f(visitor, msg);
  __tsan_release(self);
  return r;
}

/// caf::blocking_actor::mailbox_visitor::operator(): the same for a blocking receive; the
/// visitor's first member is the blocking_actor* (caf/blocking_actor.hpp).
int _ZN3caf14blocking_actor15mailbox_visitorclERNS_15mailbox_elementE(void* visitor, void* msg) {
  static auto f = real<int (*)(void*, void*)>("_ZN3caf14blocking_actor15mailbox_visitorclERNS_15mailbox_elementE");
  __tsan_acquire(*static_cast<void**>(visitor));
  return f(visitor, msg);
}

}  // extern "C"

namespace {
// libspdlog is not instrumented either: its registry is a function-local static whose
// "already constructed" fast path TSan cannot see, so a registry first built inside an actor
// looks racy to every other thread that logs. Building it here, on the main thread before any
// other thread exists, gives the ordering TSan can see (pthread_create). Looked up at run time:
// the binaries without spdlog (the launcher, extensions) simply skip it.
const bool spdlog_registry_built = [] {
  using fn = void* (*)();
  if (auto f = reinterpret_cast<fn>(dlsym(RTLD_DEFAULT, "_ZN6spdlog18default_logger_rawEv"))) f();
  return true;
}();
}  // namespace
