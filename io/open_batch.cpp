// Many openat2(2) calls in one system call (see open_batch.hpp).
#include "io/open_batch.hpp"

#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace dhara::io {
namespace {

std::atomic<bool> batches_allowed{true};

// Bumped in every child fork() makes: a ring set up before the fork is the parent's (its
// mapping is shared with it), so the child sets up its own.
std::atomic<unsigned> fork_generation{0};

// This thread's io_uring: 128 submissions, the default 256 completions (never more than 128
// outstanding, so none is dropped). Set up on first use; a thread whose setup failed does not
// try again (each try is a system call).
class ring {
 public:
  static constexpr unsigned entries = 128;

  ring() = default;
  ring(const ring&) = delete;
  ring& operator=(const ring&) = delete;
  ~ring() { reset(); }

  bool ready() {
    [[maybe_unused]] static const int registered =
        ::pthread_atfork(nullptr, nullptr, [] { fork_generation.fetch_add(1); });
    const unsigned now = fork_generation.load(std::memory_order_relaxed);
    if (now != generation_) {  // a forked child: the inherited ring is the parent's
      reset();
      failed_ = false;
      generation_ = now;
    }
    if (fd_ >= 0) return true;
    if (failed_) return false;
    failed_ = !set_up();
    if (failed_) reset();
    return !failed_;
  }

  // Whether the kernel has taken every submission queued before: the queue this thread left
  // empty is still empty (nothing else writes to it; a forked child sets up its own).
  bool idle() const { return __atomic_load_n(sq_head_, __ATOMIC_ACQUIRE) == *sq_tail_ && queued_ == 0; }

  // Queues one submission (at most `entries` before submit_and_wait).
  io_uring_sqe& next_sqe() {
    const unsigned tail = *sq_tail_ + queued_;
    const unsigned index = tail & sq_mask_;
    io_uring_sqe& sqe = sqes_[index];
    std::memset(&sqe, 0, sizeof sqe);
    sq_array_[index] = index;
    ++queued_;
    return sqe;
  }

  // Submits what was queued and waits until every one has completed; `done(user_data, res)`
  // for each completion. False (and the ring given up) when the kernel refused the ring
  // itself: completions not seen are then the caller's to treat as not run, and what the
  // kernel took may still complete unseen (an open's descriptor is then lost, never misread).
  // Each submission carries this call's number in the top half of its user_data, and a
  // completion of another call's is passed over: no answer goes to a path it was not for.
  template <typename Done>
  bool submit_and_wait(Done&& done) {
    const unsigned total = queued_;
    const std::uint64_t tag = std::uint64_t{++submissions_} << 32;
    for (unsigned i = 0; i < total; ++i) sqes_[(*sq_tail_ + i) & sq_mask_].user_data |= tag;
    __atomic_store_n(sq_tail_, *sq_tail_ + queued_, __ATOMIC_RELEASE);
    queued_ = 0;
    unsigned to_submit = total, completed = 0, refusals = 0;
    while (completed < total) {
      const long r = ::syscall(__NR_io_uring_enter, fd_, to_submit, total - completed, IORING_ENTER_GETEVENTS,
                               nullptr, 0);
      // EINTR, EAGAIN and EBUSY ask for another try; anything else, or too many tries, gives the
      // ring up (the kernel cancels what it still holds).
      if (r < 0 && ((errno != EINTR && errno != EAGAIN && errno != EBUSY) || ++refusals > 16)) {
        reset();
        failed_ = true;
        return false;
      }
      if (r > 0) to_submit -= std::min<unsigned>(to_submit, static_cast<unsigned>(r));
      unsigned head = *cq_head_;
      const unsigned tail = __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE);
      for (; head != tail; ++head) {
        const io_uring_cqe& cqe = cqes_[head & cq_mask_];
        if ((cqe.user_data & ~std::uint64_t{0xffffffff}) != tag) continue;
        done(cqe.user_data & 0xffffffff, cqe.res);
        ++completed;
      }
      __atomic_store_n(cq_head_, head, __ATOMIC_RELEASE);
    }
    return true;
  }

 private:
  bool set_up() {
    io_uring_params p{};
    // SUBMIT_ALL (5.18) keeps submitting past an entry that fails; SINGLE_ISSUER and
    // DEFER_TASKRUN (6.1) let the kernel skip work for a ring one thread owns. Older kernels
    // refuse flags they do not know: fewer each try.
    const unsigned tries[] = {IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
                              IORING_SETUP_SUBMIT_ALL, 0};
    for (unsigned flags : tries) {
      p = {};
      p.flags = flags;
      fd_ = static_cast<int>(::syscall(__NR_io_uring_setup, entries, &p));
      if (fd_ >= 0 || errno != EINVAL) break;
    }
    if (fd_ < 0) return false;
    if (!(p.features & IORING_FEAT_SINGLE_MMAP) || p.sq_entries < entries) return false;
    ring_size_ = std::max(p.sq_off.array + p.sq_entries * sizeof(unsigned),
                          p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe));
    void* r = ::mmap(nullptr, ring_size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_SQ_RING);
    if (r == MAP_FAILED) return false;
    ring_ = static_cast<char*>(r);
    sqes_size_ = p.sq_entries * sizeof(io_uring_sqe);
    void* s = ::mmap(nullptr, sqes_size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_SQES);
    if (s == MAP_FAILED) return false;
    sqes_ = static_cast<io_uring_sqe*>(s);
    sq_head_ = reinterpret_cast<unsigned*>(ring_ + p.sq_off.head);
    sq_tail_ = reinterpret_cast<unsigned*>(ring_ + p.sq_off.tail);
    sq_mask_ = *reinterpret_cast<unsigned*>(ring_ + p.sq_off.ring_mask);
    sq_array_ = reinterpret_cast<unsigned*>(ring_ + p.sq_off.array);
    cq_head_ = reinterpret_cast<unsigned*>(ring_ + p.cq_off.head);
    cq_tail_ = reinterpret_cast<unsigned*>(ring_ + p.cq_off.tail);
    cq_mask_ = *reinterpret_cast<unsigned*>(ring_ + p.cq_off.ring_mask);
    cqes_ = reinterpret_cast<io_uring_cqe*>(ring_ + p.cq_off.cqes);
    return true;
  }

  void reset() {
    if (sqes_ != nullptr) ::munmap(sqes_, sqes_size_);
    if (ring_ != nullptr) ::munmap(ring_, ring_size_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    ring_ = nullptr;
    sqes_ = nullptr;
    queued_ = 0;
  }

  int fd_ = -1;
  bool failed_ = false;
  unsigned generation_ = 0;
  char* ring_ = nullptr;
  std::size_t ring_size_ = 0;
  io_uring_sqe* sqes_ = nullptr;
  std::size_t sqes_size_ = 0;
  unsigned* sq_head_ = nullptr;
  unsigned* sq_tail_ = nullptr;
  unsigned sq_mask_ = 0;
  unsigned* sq_array_ = nullptr;
  unsigned* cq_head_ = nullptr;
  unsigned* cq_tail_ = nullptr;
  unsigned cq_mask_ = 0;
  io_uring_cqe* cqes_ = nullptr;
  unsigned queued_ = 0;
  std::uint32_t submissions_ = 0;
};

ring* this_threads_ring() {
  if (!batches_allowed.load(std::memory_order_relaxed)) return nullptr;
  thread_local ring r;
  return r.ready() && r.idle() ? &r : nullptr;
}

}  // namespace

bool open_all(std::span<batched_open> opens, const open_how& how) {
  ring* r = this_threads_ring();
  if (r == nullptr) return false;
  for (batched_open& o : opens) o.result = -ECANCELED;  // not run, until its completion says
  for (std::size_t base = 0; base < opens.size(); base += ring::entries) {
    const std::size_t n = std::min<std::size_t>(ring::entries, opens.size() - base);
    for (std::size_t i = 0; i < n; ++i) {
      const batched_open& o = opens[base + i];
      io_uring_sqe& sqe = r->next_sqe();
      sqe.opcode = IORING_OP_OPENAT2;
      sqe.fd = o.dir;
      sqe.addr = reinterpret_cast<std::uint64_t>(o.path);
      sqe.len = sizeof(open_how);
      sqe.addr2 = reinterpret_cast<std::uint64_t>(o.how != nullptr ? o.how : &how);
      sqe.user_data = base + i;
    }
    const bool ok = r->submit_and_wait([&](std::uint64_t i, int res) {
      if (i < opens.size()) opens[i].result = res;
    });
    // A ring given up midway: what it opened stays reported, the rest says "not run".
    if (!ok) return true;
  }
  return true;
}

void close_all(std::span<const int> fds) {
  ring* r = fds.size() > 1 ? this_threads_ring() : nullptr;
  if (r == nullptr) {
    for (int fd : fds) ::close(fd);
    return;
  }
  for (std::size_t base = 0; base < fds.size(); base += ring::entries) {
    const std::size_t n = std::min<std::size_t>(ring::entries, fds.size() - base);
    for (std::size_t i = 0; i < n; ++i) {
      io_uring_sqe& sqe = r->next_sqe();
      sqe.opcode = IORING_OP_CLOSE;
      sqe.fd = fds[base + i];
      sqe.user_data = base + i;
    }
    bool closed[ring::entries] = {};
    // A close the kernel took is done whatever it answers (the descriptor leaves the table
    // first); only one it refused as a request (an opcode it does not know) is closed here.
    if (!r->submit_and_wait([&](std::uint64_t i, int res) {
          if (i >= base && i - base < n) closed[i - base] = res != -EINVAL;
        })) {
      // The ring was given up. What this submission held may still be closed by the kernel,
      // and a second close could hit a descriptor another thread has since been given: those
      // are left (at worst a descriptor is lost). The later ones are closed one call each.
      for (std::size_t rest = base + n; rest < fds.size(); ++rest) ::close(fds[rest]);
      return;
    }
    for (std::size_t i = 0; i < n; ++i)
      if (!closed[i]) ::close(fds[base + i]);
  }
}

void allow_open_batches(bool allowed) { batches_allowed.store(allowed); }

}  // namespace dhara::io
