// The outcome of a check: never a bare bool, always a verdict with its reason,
// who decided it, and which rule matched.
#pragma once

#include <string>
#include <string_view>

namespace dhara::policy {

/// What a check concluded.
enum class verdict_kind {
  allow,  ///< the request may proceed
  deny,   ///< the request is refused; `reason` says why
  ask,    ///< the capability is pending and the session can prompt: ask the approval actor
  /// a URL's host must be looked up before its check can be decided (`resolved` names the
  /// host; net_rules.hpp, host_lookup). Whoever cannot look it up treats it as the denial its
  /// reason states.
  lookup,
};

/// Who or what made the decision (the audit line's `decidedBy`).
enum class decider {
  rule,            ///< a configured or built-in rule (paths, domains, manifest, pending-headless)
  user,            ///< the user's recorded approval or denial
  trusted_author,  ///< auto-approved because the author is in trustedAuthors
  yolo,            ///< granted by the yolo level
  failure,         ///< a failure (unreadable file, lost prompt, audit error): always a denial
};

/// "allow", "deny", "ask".
std::string_view to_string(verdict_kind v);
/// The audit spelling: "rule", "user", "trusted-author", "yolo", "failure".
std::string_view to_string(decider d);

/// A decision. `matched_rule` points into the snapshot that made it (valid while that
/// snapshot lives): for a denied path the entry as the user wrote it, for an allowed path the
/// resolved allowed root (where host file operations open beneath). `reason` is empty for
/// plain allows.
struct decision {
  verdict_kind verdict = verdict_kind::deny;
  std::string reason;
  decider decided_by = decider::failure;
  std::string_view matched_rule;
  /// For a path check allowed (or asked about) through a resolver that follows links: the
  /// path's resolution, the one the rules matched. Host file operations open exactly this
  /// path, refusing any symlink met on the way (io/host_ops.hpp). For `lookup`: the host name
  /// to look up. Empty otherwise.
  std::string resolved = {};

  bool allowed() const { return verdict == verdict_kind::allow; }
};

/// A denial by a failure, with its reason.
inline decision failure_decision(std::string reason) {
  return {verdict_kind::deny, std::move(reason), decider::failure, {}};
}

}  // namespace dhara::policy
