// Names of the policy error codes.
#include "policy/result.hpp"

namespace dhara::policy {

std::string_view to_string(errc code) {
  switch (code) {
    case errc::parse_error: return "parse_error";
    case errc::invalid_type: return "invalid_type";
    case errc::invalid_value: return "invalid_value";
    case errc::missing_field: return "missing_field";
    case errc::unknown_capability: return "unknown_capability";
    case errc::unknown_level: return "unknown_level";
    case errc::unsupported_runtime: return "unsupported_runtime";
    case errc::invalid_path: return "invalid_path";
    case errc::resolve_failed: return "resolve_failed";
    case errc::not_found: return "not_found";
    case errc::refused: return "refused";
  }
  return "unknown_error";
}

}  // namespace dhara::policy
