// The host API (DESIGN §5, §9 "Host API results"): requests an extension makes to dhara —
// host/check, host/fs/read|write|list, host/env/get, host/net/fetch, host/process/spawn. Each
// is checked by the capability checker and audited like a tool call; allowed operations run
// on a detached worker (they block: file I/O, DNS, HTTP, child processes) with the io/
// host operations, which re-check what only I/O can know (openat2 beneath the allowed root,
// resolved addresses).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <nlohmann/json.hpp>

#include "actors/checker.hpp"
#include "actors/messages.hpp"
#include "policy/net_rules.hpp"

namespace dhara::actors {

using host_atom = caf::atom_constant<caf::atom("host")>;  ///< one host request

/// One request from an extension.
struct host_request {
  std::string extension;
  std::string method;        ///< "host/fs/read", …
  nlohmann::json params;
  std::string tool_call_id;  ///< the call it happened in, when known (for the audit)
};

/// The host API's interface: a request → its result object, or an error result: -32002
/// denied {capability, reason}, -32602 malformed params, -32601 unknown method, -32001 the
/// operation failed. It sends its checks and its operations with tickets; the answers come
/// back as the other two messages (actors/call_replies.hpp).
using host_api_actor = caf::typed_actor<caf::replies_to<host_atom, host_request>::with<call_result>,
                                        caf::reacts_to<check_outcome>, caf::reacts_to<check_outcomes>,
                                        caf::reacts_to<call_result>,
                                        /// the extension's sandbox changed: the programs it has dhara
                                        /// spawn from now on start through this launcher argv; when
                                        /// the change took something away (true), those running end
                                        caf::reacts_to<reconfine_atom, std::string, std::vector<std::string>, bool>>;

/// How the programs an extension has dhara spawn (host/process/spawn) are confined: as the
/// extension itself is, by the launcher with its profile (argv up to and including `--`),
/// with its private temp dir. No launcher: the extension runs without an OS sandbox too
/// (yolo, or none required and none available).
struct spawn_confinement {
  std::vector<std::string> launcher;
  std::string tmpdir;
};

/// What the host API needs to know about the session.
struct host_api_config {
  checker_actor checker;
  std::string session;
  std::string cwd;                                       ///< relative paths resolve against it
  std::string home;
  std::map<std::string, policy::domain_rules> domains;   ///< per extension (its network.outbound)
  std::map<std::string, std::vector<std::string>> envs;  ///< per extension: its scrubbed environment
  /// Per extension: the capabilities its manifest declares (which of a spawn's checks apply).
  std::map<std::string, policy::capability_set> declared;
  /// Per extension started. A spawn for one not listed is refused (no sandbox was made for it).
  std::map<std::string, spawn_confinement> confinements;
  std::string path_env;                                  ///< PATH, to locate spawned commands
  std::size_t max_file_bytes = 16u << 20;
  std::size_t max_output_bytes = 1u << 20;
  std::uint64_t spawn_timeout_ms = 30000;
};

/// Spawns the host API actor.
host_api_actor spawn_host_api(caf::actor_system& sys, host_api_config config);

}  // namespace dhara::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dhara::actors::host_request)
