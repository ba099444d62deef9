// Programs on pipes for the benchmarks' baselines (see piped_child.hpp).
#include "io/piped_child.hpp"

#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <unistd.h>

#include <cerrno>

namespace dhara::io {

int spawn_piped(piped_child& child, const std::vector<std::string>& command, const std::string& folder,
                char* const* env) {
  if (command.empty()) return EINVAL;
  int to[2], from[2];
  if (::pipe2(to, O_CLOEXEC) != 0) return errno;
  if (::pipe2(from, O_CLOEXEC) != 0) {
    const int why = errno;
    ::close(to[0]);
    ::close(to[1]);
    return why;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, to[0], 0);
  posix_spawn_file_actions_adddup2(&fa, from[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addchdir_np(&fa, folder.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sched_param none{};
  posix_spawnattr_setschedpolicy(&attr, SCHED_BATCH);
  posix_spawnattr_setschedparam(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSCHEDULER);
  std::vector<std::string> words = command;
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  // A relative first word ("./echo-native") is found from the new folder.
  const int rc = ::posix_spawnp(&child.pid, argv[0], &fa, &attr, argv.data(), env ? env : environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  ::close(to[0]);
  ::close(from[1]);
  if (rc != 0) {
    ::close(to[1]);
    ::close(from[0]);
    child = {};
    return rc;
  }
  child.in = to[1];
  child.out = from[0];
  return 0;
}

}  // namespace dhara::io
