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
// backlog still spreads over every worker. Jobs from outside the workers (the io thread,
// detached actors, the clock, the main thread) always wake a worker: nobody else would run
// them.
//
// The queue's lock and condition variable are the scheduler's own, as in CAF's policies; no
// actor state is shared.
#include "actors/scheduler.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>

#include <caf/actor_system_config.hpp>
#include <caf/policy/unprofiled.hpp>
#include <caf/resumable.hpp>
#include <caf/scheduler/coordinator.hpp>

namespace dhara::actors {
namespace {

class affine_sharing : public caf::policy::unprofiled {
 public:
  struct coordinator_data {
    explicit coordinator_data(caf::scheduler::abstract_coordinator*) {}
    std::deque<caf::resumable*> queue;
    std::mutex lock;
    std::condition_variable cv;
    std::size_t sleeping = 0;  ///< workers waiting on `cv`
  };

  struct worker_data {
    explicit worker_data(caf::scheduler::abstract_coordinator*) {}
  };

  /// From outside the workers: always wake one.
  template <class Coordinator>
  void central_enqueue(Coordinator* self, caf::resumable* job) {
    push(d(self), job, true);
  }

  /// The coordinator hands a worker a job (its shutdown): wake one.
  template <class Worker>
  void external_enqueue(Worker* self, caf::resumable* job) {
    push(d(self->parent()), job, true);
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
    std::unique_lock<std::mutex> guard(q.lock);
    if (q.queue.empty()) {
      ++q.sleeping;
      q.cv.wait(guard, [&] { return !q.queue.empty(); });
      --q.sleeping;
    }
    caf::resumable* job = q.queue.front();
    q.queue.pop_front();
    if (!q.queue.empty() && q.sleeping > 0) q.cv.notify_one();  // more waits than this worker takes
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
      f(job);
    }
  }

 private:
  static void push(coordinator_data& q, caf::resumable* job, bool wake) {
    std::lock_guard<std::mutex> guard(q.lock);
    q.queue.push_back(job);
    if ((wake || q.queue.size() > 1) && q.sleeping > 0) q.cv.notify_one();
  }
};

}  // namespace

void use_dhara_scheduler(caf::actor_system_config& cfg, std::size_t workers) {
  cfg.set("scheduler.max-threads", workers);
  cfg.module_factories.push_back([](caf::actor_system& sys) -> caf::actor_system::module* {
    return new caf::scheduler::coordinator<affine_sharing>(sys);
  });
}

}  // namespace dhara::actors
