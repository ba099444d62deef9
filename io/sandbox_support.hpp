// What the running kernel offers for the OS sandbox (Landlock, seccomp, user namespaces).
#pragma once

namespace dhara::io {}  // namespace dhara::io
