// Security levels (paranoid, standard, trusted, yolo), what each means for a pending
// capability, and trusted-author matching.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "policy/result.hpp"

namespace dhara::policy {

/// The user's security posture, strictest first.
enum class security_level {
  paranoid,  ///< every capability approved individually; OS sandbox required
  standard,  ///< one approval per package; every check audited (the default)
  trusted,   ///< packages of trusted authors auto-approved, others as standard
  yolo,      ///< everything granted, no OS sandbox (dhara's state files stay denied)
};

/// "paranoid", "standard", "trusted" or "yolo".
std::string_view to_string(security_level level);

/// Parses a level name; an unknown name is errc::unknown_level naming the four.
result<security_level> parse_security_level(std::string_view name);

/// True when `a` is at least as strict as `b` (paranoid is the strictest).
constexpr bool at_least_as_strict(security_level a, security_level b) {
  return static_cast<int>(a) <= static_cast<int>(b);
}

/// What happens to a capability that is neither approved nor denied.
enum class pending_action {
  ask_each_capability,   ///< paranoid: one prompt per capability
  ask_package,           ///< standard, or trusted with an untrusted author: one prompt per package
  approve_trusted_author,///< trusted level and a trusted author: approved, audited as trusted-author
  grant_yolo,            ///< yolo: granted
};

/// The rule for pending capabilities at `level`, given whether the author is trusted.
pending_action pending_rule(security_level level, bool author_is_trusted);

/// The author of an extension: a manifest's "Name <email>", bare name, or {name, email}.
struct author_info {
  std::string name;
  std::string email;
  bool operator==(const author_info&) const = default;
};

/// Parses "Name <email>" or a bare name (whitespace trimmed).
author_info parse_author(std::string_view text);

/// True when a `trustedAuthors` entry names this package's author: the entry equals the
/// author's name or email (case-insensitive), or the entry is an npm-style scope
/// ("zosmaai" or "@zosmaai") and the package name is "@zosmaai/…".
bool is_trusted_author(std::span<const std::string> trusted_authors, const author_info& author,
                       std::string_view package_name);

}  // namespace dhara::policy
