// The scheduler dhara's actor systems run on: CAF's work sharing, except that a message one
// worker sends to an idle actor stays on that worker when nothing else is waiting (see
// docs/architecture.md, "Threads").
#pragma once

#include <cstddef>

#include <caf/fwd.hpp>

namespace dhara::actors {

/// Makes `cfg` run `workers` scheduler threads with dhara's scheduling policy. Call before
/// the actor system is made from `cfg`.
void use_dhara_scheduler(caf::actor_system_config& cfg, std::size_t workers);

/// What the workers of dhara's scheduler are doing (for tests): how many sleep, how many look
/// for a job before they sleep, how many such looks began since the system started, how many
/// jobs a run_here_scope's thread kept to run itself because no worker was busy, and how many
/// jobs are queued (a worker woken for one still counts as sleeping until it takes it). All 0
/// on CAF's own scheduler.
struct worker_activity {
  std::size_t sleeping = 0;
  std::size_t looking = 0;
  std::size_t looks = 0;
  std::size_t held = 0;
  std::size_t queued = 0;
};
worker_activity activity_of_workers(caf::actor_system& sys);

/// For a thread outside the workers that sends messages (the io thread delivering an
/// extension's lines): while the scope lives, a message it sends when every worker sleeps
/// wakes nobody. When the scope ends, this thread runs the jobs waiting, up to `budget` of
/// them (the hops of one tool call), and wakes a worker for any left, unless `busy(ctx)` says
/// it has other work (then it wakes a worker at once, so one thread never does everything
/// while the workers sleep). Without dhara's scheduler, or inside another such scope, it does
/// nothing. The actors it runs must not block (as on any worker).
class run_here_scope {
 public:
  static constexpr std::size_t budget = 32;                ///< jobs (actor runs) at most
  static constexpr std::size_t max_messages_per_run = 64;  ///< messages of one actor's run
  run_here_scope(caf::actor_system& sys, bool (*busy)(const void*), const void* ctx);
  ~run_here_scope();
  run_here_scope(const run_here_scope&) = delete;
  run_here_scope& operator=(const run_here_scope&) = delete;

 private:
  void* coordinator_ = nullptr;  ///< dhara's coordinator, when `sys` runs it
  bool (*busy_)(const void*);
  const void* ctx_;
};

}  // namespace dhara::actors
