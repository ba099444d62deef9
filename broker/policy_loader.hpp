// Loads everything a policy snapshot is compiled from: global and project config,
// extension manifests from the extension dirs, permissions.json; then compiles the
// snapshot with the real symlink resolver. Any file it cannot understand is an error:
// the caller refuses to run rather than guess (fail closed).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "io/files.hpp"
#include "policy/manifest.hpp"
#include "policy/permissions.hpp"
#include "policy/settings.hpp"
#include "policy/snapshot.hpp"

namespace dhara::broker {

/// An extension found in an extension dir.
struct discovered_extension {
  policy::manifest manifest;
  std::string folder;          ///< absolute folder holding the manifest
  bool from_project = false;   ///< found under <project>/.dhara/extensions
};

/// A folder that was not loaded, and why (shown by `extensions list` and `doctor`).
struct skipped_extension {
  std::string folder;
  std::string reason;
};

/// Everything loaded for a session.
struct loaded_policy {
  io::locations where;
  policy::settings settings;
  std::vector<std::string> warnings;
  std::vector<discovered_extension> extensions;
  std::vector<skipped_extension> skipped;
  policy::permissions permissions;
  policy::session_inputs inputs;  ///< what the snapshot is compiled from again on a change
  std::shared_ptr<const policy::policy_snapshot> snapshot;
};

/// Reads `folder`/manifest.json or `folder`/manifest.yaml, as a session finds an extension.
/// Both present is errc::invalid_value (ambiguous: remove one); neither is errc::not_found;
/// otherwise the file's read or parse error, naming it.
policy::result<policy::manifest> load_manifest(const std::filesystem::path& folder);

/// Loads and compiles. Errors name the file at fault and what to do.
policy::result<loaded_policy> load_policy(const io::locations& where, bool interactive);

}  // namespace dhara::broker
