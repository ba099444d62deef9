// Extension manifests (DESIGN §3.4): parse and validate manifest.json / manifest.yaml
// (YAML is converted to JSON in io/ first) and split runtime.command without a shell.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/capability.hpp"
#include "policy/level.hpp"
#include "policy/result.hpp"

namespace dhara::policy {

/// A validated manifest.
struct manifest {
  std::string name;                 ///< "web-tools" or "@scope/name"; safe as a folder name
  std::string version;              ///< as written, non-empty
  std::string description;
  std::optional<author_info> author;
  std::string runtime_command;      ///< as written
  std::vector<std::string> argv;    ///< runtime_command split without a shell
  std::string protocol;             ///< "json-rpc"
  capability_set capabilities;      ///< declared capabilities (exact names, no wildcards)
  std::vector<std::string> capability_names;  ///< as written, in order, without duplicates
  /// network.outbound domains; nullopt when absent, empty when present but empty (= none).
  std::optional<std::vector<std::string>> network_domains;
  /// process.commands; nullopt when absent.
  std::optional<std::vector<std::string>> process_commands;
  nlohmann::json raw;               ///< the document as given (unknown fields kept)
};

/// Validates a manifest document. `source` names the file in messages. Every missing or
/// mistyped field is an error naming the source and the field; an unknown capability names
/// the closest known one; a runtime type other than "subprocess" is errc::unsupported_runtime.
result<manifest> parse_manifest(const nlohmann::json& doc, std::string_view source);

/// Parses manifest.json text (errors carry line and column).
result<manifest> parse_manifest_text(std::string_view json_text, std::string_view source);

/// Splits a command line into argv like a shell would split words, but never runs one:
/// whitespace separates, '…' and "…" quote, backslash escapes. Unbalanced quotes, an empty
/// command, and unquoted shell operators (| & ; < > ( ) $ ` and newlines) are errors.
result<std::vector<std::string>> split_command(std::string_view command);

/// True when `name` is a valid extension name: [a-z0-9][a-z0-9._-]* (max 214 bytes, no "..")
/// optionally prefixed by "@scope/".
bool is_valid_extension_name(std::string_view name);

}  // namespace dhara::policy
