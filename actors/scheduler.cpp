// dhara's scheduling policy: one shared job queue (as CAF's `sharing` policy), but a job a
// worker enqueues itself wakes no other worker unless a job is already waiting.
//
// Why: in a tool call most hops are one actor sending to the next (driver -> checker -> audit
// writer -> checker -> driver -> supervisor). Under `sharing` each of those hops notifies the
// queue's condition variable, which wakes the idle worker; the job then moves to the other
// core, and a wake-up across cores costs ~25-45 us on this machine. The worker that sent the
// message is about to ask the queue for work itself, so it runs the job a few microseconds
// later with no wake-up at all. When more than one job waits, the idle worker is woken as
// before, and a worker that takes a job while others still wait wakes the next one, so a
// backlog still spreads over every worker. Jobs from outside the workers (detached actors,
// the clock, the main thread) always wake a worker: nobody else would run them. The io
// thread's are the exception below.
//
// The io thread may run jobs itself (run_here_scope): when it delivers an extension's lines
// while every worker sleeps, waking one costs more than the supervisor's work on the line and
// the hops that follow (supervisor -> caller -> checker -> audit writer -> ... -> the next
// request written to a pipe). So the io thread runs those jobs at once, up to a budget, and
// wakes a worker only for what is left: one wake-up per round trip fewer, as in a raw libuv
// loop, where the thread that reads the reply is the one that handles it.
//
// A worker that finds the queue empty looks again for a short while before it sleeps,
// giving its core away between looks (sched_yield). A job sent to an idle actor on another
// thread usually comes within tens of microseconds (the next hop of a call, the next line from
// an extension), and a worker still looking takes it without being woken: the sender makes no
// futex call and the worker pays no sleep and wake-up, which on this machine's virtual CPUs
// cost more than the hop itself. It stops looking at once when a look took long (another
// thread wanted the core: an extension, the io thread), so it never holds a core that others
// need; and it counts as idle for the io thread, which still runs a reply's hops itself.
//
// The queue's lock and condition variable are the scheduler's own, as in CAF's policies; no
// actor state is shared.
#include "actors/scheduler.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <utility>

#include <sched.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/execution_unit.hpp>
#include <caf/policy/unprofiled.hpp>
#include <caf/resumable.hpp>
#include <caf/scheduler/coordinator.hpp>

namespace dhara::actors {
namespace {

struct coordinator_data;

// The thread inside a run_here_scope (the io thread delivering lines) and its coordinator.
thread_local coordinator_data* running_here = nullptr;
thread_local bool held_here = false;  // that thread queued a job and woke nobody

// What the actors that run_here_scope resumes see as their execution unit: their sends to
// idle actors go to the shared queue, where that scope's thread takes them next. Called from
// any other thread (an actor's context used after its run), the job wakes a worker as a job
// from outside does.
class here_unit final : public caf::execution_unit {
 public:
  here_unit(caf::actor_system* sys, coordinator_data* q) : caf::execution_unit(sys), q_(q) {}
  void exec_later(caf::resumable* job) override;

 private:
  coordinator_data* q_;
};

struct coordinator_data {
  explicit coordinator_data(caf::scheduler::abstract_coordinator* c) : here(&c->system(), this) {}
  std::deque<caf::resumable*> queue;
  std::deque<caf::resumable*> for_workers;  ///< jobs only a worker may run (its shutdown)
  std::mutex lock;
  std::condition_variable cv;
  std::size_t sleeping = 0;  ///< workers waiting on `cv`
  /// Jobs a looking worker may take: `queue`'s and `for_workers`' sizes, set under `lock`.
  std::atomic<std::size_t> waiting{0};
  std::atomic<std::size_t> looking{0};  ///< workers looking for a job before they sleep
  std::atomic<std::size_t> looks{0};    ///< looks begun (tests read it)
  std::size_t held = 0;                 ///< jobs a run_here_scope's thread kept (tests read it)
  here_unit here;
};

// Tells the workers that look for a job how many wait; called with `q.lock` held.
void publish(coordinator_data& q) {
  q.waiting.store(q.queue.size() + q.for_workers.size(), std::memory_order_relaxed);
}

// How long a worker looks for a job before it sleeps, and the look that says another thread
// wants the core (an undisturbed sched_yield returns in about a microsecond here).
constexpr auto look_for = std::chrono::microseconds(100);
constexpr auto wanted_core = std::chrono::microseconds(5);

// Looks for a job until one waits, another thread wants the core, or the time is up. The
// worker stays counted in `looking` until it holds the lock again (dequeue), so that it
// never seems busy to the io thread between looking and sleeping.
void look_before_sleeping(coordinator_data& q) {
  using clock = std::chrono::steady_clock;
  q.looking.fetch_add(1, std::memory_order_relaxed);
  q.looks.fetch_add(1, std::memory_order_relaxed);
  const auto until = clock::now() + look_for;
  bool found = false;
  for (auto now = clock::now(); !found && now < until;) {
    ::sched_yield();
    const auto then = std::exchange(now, clock::now());
    found = q.waiting.load(std::memory_order_relaxed) > 0;
    if (now - then > wanted_core) break;
  }
}

// Appends a job; wakes a sleeping worker when `wake`, or when more than this one job waits.
// The worker is woken after the lock is released, so it does not wake into a held lock.
void push(coordinator_data& q, caf::resumable* job, bool wake) {
  bool notify;
  {
    std::lock_guard<std::mutex> guard(q.lock);
    q.queue.push_back(job);
    publish(q);
    notify = (wake || q.queue.size() > 1) && q.sleeping > 0;
  }
  if (notify) q.cv.notify_one();
}

void here_unit::exec_later(caf::resumable* job) { push(*q_, job, running_here != q_); }

class affine_sharing : public caf::policy::unprofiled {
 public:
  using coordinator_data = actors::coordinator_data;

  struct worker_data {
    explicit worker_data(caf::scheduler::abstract_coordinator*) {}
  };

  /// From outside the workers: wake one, unless the sender is a run_here_scope's thread and
  /// every worker sleeps or looks for a job (that thread runs the job when its scope ends).
  /// Kept, it is not published, so a looking worker does not stop looking for it; a worker can
  /// still run it from the queue when its look ends, or when a job pushed after it publishes
  /// the queue's size, before the scope does.
  template <class Coordinator>
  void central_enqueue(Coordinator* self, caf::resumable* job) {
    coordinator_data& q = d(self);
    if (running_here == &q) {
      std::lock_guard<std::mutex> guard(q.lock);
      if (q.sleeping + q.looking.load(std::memory_order_relaxed) >= self->num_workers()) {
        q.queue.push_back(job);
        ++q.held;
        held_here = true;
        return;
      }
    }
    push(q, job, true);
  }

  /// The coordinator hands a worker a job (its shutdown): wake one. Only a worker takes it.
  template <class Worker>
  void external_enqueue(Worker* self, caf::resumable* job) {
    coordinator_data& q = d(self->parent());
    {
      std::lock_guard<std::mutex> guard(q.lock);
      q.for_workers.push_back(job);
      publish(q);
    }
    q.cv.notify_one();
  }

  /// A worker sends to an idle actor: it runs the job itself when its current run ends.
  template <class Worker>
  void internal_enqueue(Worker* self, caf::resumable* job) {
    push(d(self->parent()), job, false);
  }

  /// An actor yielded after its throughput limit: back of the queue; its worker asks next.
  template <class Worker>
  void resume_job_later(Worker* self, caf::resumable* job) {
    push(d(self->parent()), job, false);
  }

  template <class Worker>
  caf::resumable* dequeue(Worker* self) {
    coordinator_data& q = d(self->parent());
    const bool looked = q.waiting.load(std::memory_order_relaxed) == 0;
    if (looked) look_before_sleeping(q);
    std::unique_lock<std::mutex> guard(q.lock);
    if (looked) q.looking.fetch_sub(1, std::memory_order_relaxed);
    if (q.queue.empty() && q.for_workers.empty()) {
      ++q.sleeping;
      q.cv.wait(guard, [&] { return !q.queue.empty() || !q.for_workers.empty(); });
      --q.sleeping;
    }
    auto& from = q.for_workers.empty() ? q.queue : q.for_workers;
    caf::resumable* job = from.front();
    from.pop_front();
    publish(q);
    const bool more = !q.queue.empty() && q.sleeping > 0;  // more waits than this worker takes
    guard.unlock();
    if (more) q.cv.notify_one();
    return job;
  }

  template <class Worker, class UnaryFunction>
  void foreach_resumable(Worker*, UnaryFunction) {}  // no per-worker queues

  template <class Coordinator, class UnaryFunction>
  void foreach_central_resumable(Coordinator* self, UnaryFunction f) {
    coordinator_data& q = d(self);
    std::unique_lock<std::mutex> guard(q.lock);
    while (!q.queue.empty()) {
      caf::resumable* job = q.queue.front();
      q.queue.pop_front();
      publish(q);
      f(job);
    }
  }
};

using dhara_coordinator = caf::scheduler::coordinator<affine_sharing>;

}  // namespace

run_here_scope::run_here_scope(caf::actor_system& sys, bool (*busy)(const void*), const void* ctx)
    : busy_(busy), ctx_(ctx) {
  if (running_here != nullptr) return;  // nested: the outer scope runs the jobs
  auto* c = dynamic_cast<dhara_coordinator*>(&sys.scheduler());
  if (c == nullptr) return;  // CAF's own scheduler: sends wake a worker as usual
  coordinator_ = c;
  running_here = &c->data();
}

run_here_scope::~run_here_scope() {
  if (coordinator_ == nullptr) return;
  auto* c = static_cast<dhara_coordinator*>(coordinator_);
  coordinator_data& q = c->data();
  running_here = nullptr;
  if (!std::exchange(held_here, false)) return;  // what it sent woke a worker already
  // Run what waits, as a worker would, until the queue is empty or the budget is spent; with
  // other work of its own, this thread leaves it all to a worker.
  const std::size_t runs = busy_(ctx_) ? 0 : budget;
  if (runs > 0) running_here = &q;
  // An actor's run here ends after this many messages (it goes to the back of the queue),
  // so a mailbox that keeps filling cannot hold this thread.
  const std::size_t throughput = std::min<std::size_t>(c->max_throughput(), max_messages_per_run);
  for (std::size_t n = 0; n < runs; ++n) {
    caf::resumable* job;
    {
      std::lock_guard<std::mutex> guard(q.lock);
      if (q.queue.empty()) break;
      job = q.queue.front();
      q.queue.pop_front();
      publish(q);
    }
    switch (job->resume(&q.here, throughput)) {
      case caf::resumable::resume_later: push(q, job, false); break;
      case caf::resumable::done:
      case caf::resumable::awaiting_message:
      case caf::resumable::shutdown_execution_unit:  // never in `queue`: shutdowns go to for_workers
        caf::intrusive_ptr_release(job);
        break;
    }
  }
  running_here = nullptr;
  held_here = false;  // sends made while it ran were queued here; what is left goes to a worker
  // Left over: a worker takes it.
  bool notify;
  {
    std::lock_guard<std::mutex> guard(q.lock);
    publish(q);  // what this thread held is now for the workers
    notify = !q.queue.empty() && q.sleeping > 0;
  }
  if (notify) q.cv.notify_one();
}

worker_activity activity_of_workers(caf::actor_system& sys) {
  auto* c = dynamic_cast<dhara_coordinator*>(&sys.scheduler());
  if (c == nullptr) return {};
  coordinator_data& q = c->data();
  std::lock_guard<std::mutex> guard(q.lock);
  return {q.sleeping, q.looking.load(std::memory_order_relaxed), q.looks.load(std::memory_order_relaxed), q.held,
          q.queue.size() + q.for_workers.size()};
}

void use_dhara_scheduler(caf::actor_system_config& cfg, std::size_t workers) {
  cfg.set("scheduler.max-threads", workers);
  cfg.module_factories.push_back([](caf::actor_system& sys) -> caf::actor_system::module* {
    return new caf::scheduler::coordinator<affine_sharing>(sys);
  });
}

}  // namespace dhara::actors
