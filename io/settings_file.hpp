// Reading and atomically rewriting a settings file (config.json) for `dhara config set`.
#pragma once

namespace dhara::io {}  // namespace dhara::io
