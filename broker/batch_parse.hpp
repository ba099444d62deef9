// The batch file's line parser (`dhara run --calls`, DESIGN §6): untrusted bytes in, one
// decoded call or line error out per non-blank line. Pure (no CAF), so it is fuzzed alone.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace dhara::broker {

/// One line of the batch file, decoded (or the error that line produces).
struct batch_call {
  nlohmann::json id;               ///< the input's id, else its 1-based line number
  std::string tool;
  std::string extension;
  nlohmann::json input = nlohmann::json::object();
  int error_code = 0;              ///< non-zero: the line itself is bad (-32700, -32600)
  std::string error_message;
};

/// Decodes the batch text: blank lines are skipped but counted for line numbers.
std::vector<batch_call> parse_batch(std::string_view text);

}  // namespace dhara::broker
