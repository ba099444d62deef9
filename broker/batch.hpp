// The headless batch (`dhara run --calls`, DESIGN §6 and §9 "Batch output"): one call per
// input line, one JSON result per line on stdout as each call finishes, a summary on stderr,
// and the exit code by precedence 4 > 3 > 0.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/approval.hpp"
#include "broker/batch_parse.hpp"  // batch_call, parse_batch
#include "broker/extension_host.hpp"
#include "broker/hitl_mode.hpp"

namespace dhara::broker {

struct batch_options {
  std::size_t concurrency = 1;     ///< calls in flight at once (-j)
  std::string session_id;
  std::string cwd;
  hitl_mode mode = hitl_mode::automatic;
  actors::hitl_actor approver{};   ///< answers approve/review questions (the terminal)
  bool progress = false;           ///< a progress line on stderr (a terminal) for long batches
  /// Called once the batch runs, with a function that interrupts it as a `q` would (Ctrl-C):
  /// safe to call from any thread, any number of times.
  std::function<void(std::function<void()> interrupt)> on_start{};
};

/// What the batch did.
struct batch_summary {
  std::size_t ok = 0, error = 0, denied = 0, rejected = 0, cancelled = 0;
  bool quit = false;               ///< the user answered q: in-flight calls were cancelled
  double seconds = 0;
  int exit_code = 0;               ///< 130 (quit) > 1 (results not written) > 4 (error/crash/timeout/cancel) > 3 (denied/rejected) > 0
  int output_error = 0;            ///< errno of the write of a result line that failed (0: all written)
};

/// Runs the calls through the host's extensions, writing result lines to `out`'s descriptor as
/// they finish (by a thread of their own: a reader that stops reading holds no actor); every
/// line is written when it returns.
batch_summary run_batch(caf::actor_system& sys, const extension_host& host, std::vector<batch_call> calls,
                        const batch_options& options, std::FILE* out);

}  // namespace dhara::broker
