// A program started with its stdin and stdout on pipes, as dhara-launch runs an extension but
// without dhara or a sandbox: the baselines of `dhara bench` and bench/runtime_bench.cpp.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace dhara::io {

struct piped_child {
  pid_t pid = -1;
  int in = -1;   ///< its stdin (ours to write, close-on-exec)
  int out = -1;  ///< its stdout (ours to read, close-on-exec)
};

/// Starts `command` (argv; the first word is looked up in PATH) in `folder` with stdin and stdout
/// on pipes, stderr on /dev/null, and SCHED_BATCH, as dhara-launch schedules an extension.
/// `env`: its environment (null: this process's). Returns 0, or the error number why it did not
/// start (nothing is left open then).
int spawn_piped(piped_child& child, const std::vector<std::string>& command, const std::string& folder,
                char* const* env = nullptr);

}  // namespace dhara::io
