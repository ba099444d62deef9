// dhara's own log: $DHARA_HOME/logs/dhara.log (rotating), warnings and errors also on stderr.
#pragma once

#include <string>

namespace dhara::io {

/// Sets spdlog's default logger: a rotating file (5 MiB × 3) at debug level with -v, else
/// info, and stderr for warnings and errors (debug too with -v). A log folder that cannot be
/// created leaves only stderr, with one warning. Never log secrets or full tool inputs at
/// info level: inputs are logged only at debug.
void init_logging(const std::string& dhara_home, bool verbose);

}  // namespace dhara::io
