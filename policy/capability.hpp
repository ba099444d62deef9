// The capability catalog (DESIGN §4): names, groups, one-line meanings, parsing
// with "did you mean", group wildcards and the one implication.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "policy/result.hpp"

namespace dhara::policy {

/// One capability of the catalog. The order is the catalog's and is stable.
enum class capability : std::uint8_t {
  filesystem_read,     ///< read files under the allowed paths
  filesystem_write,    ///< create, change and delete files under the allowed paths
  filesystem_watch,    ///< watch files for changes
  network_outbound,    ///< open outbound network connections (implies network:fetch)
  network_fetch,       ///< make HTTP(S) requests
  network_inbound,     ///< listen for inbound connections
  network_dns,         ///< resolve host names
  process_spawn,       ///< start other programs
  process_signal,      ///< send signals to processes
  process_system_info, ///< read system information (CPU, memory, OS)
  secrets_read,        ///< read stored secrets
  secrets_write,       ///< store secrets
  secrets_env,         ///< see the full environment, including secrets in it
  session_read,        ///< read the agent session (messages, history)
  session_write,       ///< change the agent session
  session_fork,        ///< fork the agent session
  clipboard_read,      ///< read the clipboard
  clipboard_write,     ///< write the clipboard
  ui_render,           ///< render UI elements
  ui_notify,           ///< show notifications
  agent_prompt,        ///< send prompts to the agent's model
  agent_tool_register, ///< register new tools at run time
  agent_model_switch,  ///< switch the agent's model
};

/// Number of capabilities in the catalog.
inline constexpr std::size_t capability_count = 23;

/// The catalog name, e.g. "filesystem:read".
std::string_view to_string(capability cap);

/// One line saying what granting the capability lets an extension do.
std::string_view meaning(capability cap);

/// All catalog names, in catalog order (for suggestions and listings).
const std::array<std::string_view, capability_count>& capability_names();

/// A set of capabilities as a bitmask: cheap to copy, test and combine.
class capability_set {
 public:
  constexpr capability_set() = default;
  static constexpr capability_set all() { return capability_set{(1u << capability_count) - 1}; }

  constexpr bool contains(capability c) const { return (bits_ >> static_cast<unsigned>(c)) & 1u; }
  constexpr bool contains_all(capability_set o) const { return (bits_ & o.bits_) == o.bits_; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr void insert(capability c) { bits_ |= 1u << static_cast<unsigned>(c); }
  constexpr void erase(capability c) { bits_ &= ~(1u << static_cast<unsigned>(c)); }
  constexpr capability_set operator|(capability_set o) const { return capability_set{bits_ | o.bits_}; }
  constexpr capability_set operator&(capability_set o) const { return capability_set{bits_ & o.bits_}; }
  constexpr capability_set minus(capability_set o) const { return capability_set{bits_ & ~o.bits_}; }
  constexpr bool operator==(const capability_set&) const = default;
  constexpr std::uint32_t bits() const { return bits_; }

  /// Calls f(capability) for each member in catalog order.
  template <class F>
  void for_each(F&& f) const {
    for (unsigned i = 0; i < capability_count; ++i)
      if ((bits_ >> i) & 1u) f(static_cast<capability>(i));
  }

 private:
  constexpr explicit capability_set(std::uint32_t bits) : bits_(bits) {}
  std::uint32_t bits_ = 0;
};

/// Parses an exact catalog name. An unknown name is errc::unknown_capability with a
/// message naming the closest known capability.
result<capability> parse_capability(std::string_view name);

/// Parses a name or a group wildcard such as "filesystem:*" into the set it stands for.
result<capability_set> parse_capability_pattern(std::string_view pattern);

/// Adds what the granted capabilities imply: network:outbound ⇒ network:fetch.
capability_set with_implied(capability_set granted);

/// "network:fetch, network:dns" in catalog order.
std::string join_names(capability_set caps);

}  // namespace dhara::policy
