// What the commands that change permissions share (`config permissions …`, `extensions
// install|remove`): loading the policy for a command, the audit entry of a change the user
// made, and appending such entries to the trail. Implemented in cli/permissions_cmd.cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "broker/policy_loader.hpp"
#include "policy/audit_entry.hpp"

namespace dhara::cli {

/// Loads config, manifests and permissions as a session does, without prompting. On failure
/// prints "dhara: <one sentence>" to stderr, sets `rc` to 2 and returns nullopt.
std::optional<broker::loaded_policy> load_policy_for_command(int& rc);

/// The audit entry of a permission change made by the user from the command line:
/// decidedBy user, details {"change": `change`}. `change` is "approve", "revoke" or "reset"
/// (a reset is capability "*", denied); the reason of a denial says it was the user's.
policy::audit_entry user_change_entry(const std::string& extension, const std::string& capability, bool allowed,
                                      const std::string& change);

/// Appends `entries` to `$DHARA_HOME/audit.jsonl` with the effective audit settings. On
/// failure prints "`failed`: …" to stderr and returns false (the command then exits 1).
/// `failed`: the start of the message when they cannot be written (the change was made, or,
/// for approvals, which are audited before they are recorded, will not be).
bool audit_user_changes(const broker::loaded_policy& loaded, std::vector<policy::audit_entry> entries,
                        std::string_view failed = "the change was made but could not be audited");

}  // namespace dhara::cli
