// The capability catalog and its parsing.
#include "policy/capability.hpp"

#include <cctype>

#include "policy/text.hpp"

namespace dhara::policy {
namespace {

struct entry {
  std::string_view name;
  std::string_view meaning;
};

constexpr std::array<entry, capability_count> catalog{{
    {"filesystem:read", "read files inside the allowed paths"},
    {"filesystem:write", "create, change and delete files inside the allowed paths"},
    {"filesystem:watch", "watch files for changes"},
    {"network:outbound", "open network connections to other hosts (includes network:fetch)"},
    {"network:fetch", "make HTTP(S) requests"},
    {"network:inbound", "listen for incoming network connections"},
    {"network:dns", "look up host names"},
    {"process:spawn", "start other programs"},
    {"process:signal", "send signals to other processes"},
    {"process:system-info", "read system information (CPU, memory, OS)"},
    {"secrets:read", "read stored secrets"},
    {"secrets:write", "store secrets"},
    {"secrets:env", "see the full environment, including any secrets in it"},
    {"session:read", "read the agent session's messages and history"},
    {"session:write", "change the agent session"},
    {"session:fork", "fork the agent session"},
    {"clipboard:read", "read the clipboard"},
    {"clipboard:write", "write to the clipboard"},
    {"ui:render", "draw its own user interface elements"},
    {"ui:notify", "show notifications"},
    {"agent:prompt", "send prompts to the agent's model"},
    {"agent:tool-register", "register new tools while running"},
    {"agent:model-switch", "switch the agent's model"},
}};

constexpr std::array<std::string_view, capability_count> make_names() {
  std::array<std::string_view, capability_count> names{};
  for (std::size_t i = 0; i < capability_count; ++i) names[i] = catalog[i].name;
  return names;
}
constexpr auto names = make_names();

std::string_view group_of(std::string_view name) { return name.substr(0, name.find(':')); }

}  // namespace

std::string_view to_string(capability cap) { return catalog[static_cast<std::size_t>(cap)].name; }
std::string_view meaning(capability cap) { return catalog[static_cast<std::size_t>(cap)].meaning; }
const std::array<std::string_view, capability_count>& capability_names() { return names; }

result<capability> parse_capability(std::string_view name) {
  for (std::size_t i = 0; i < capability_count; ++i)
    if (names[i] == name) return static_cast<capability>(i);
  // Names are lower case: `NETWORK:FETCH` is suggested its own spelling (it got no suggestion).
  std::string lowered(name);
  for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return make_error(errc::unknown_capability,
                    "unknown capability '" + std::string(name) + "'" + did_you_mean(lowered, names) +
                        "; see 'dhara config permissions --help' for the catalog");
}

result<capability_set> parse_capability_pattern(std::string_view pattern) {
  if (pattern.size() > 2 && pattern.ends_with(":*")) {
    std::string_view group = pattern.substr(0, pattern.size() - 2);
    capability_set set;
    for (std::size_t i = 0; i < capability_count; ++i)
      if (group_of(names[i]) == group) set.insert(static_cast<capability>(i));
    if (!set.empty()) return set;
    std::array<std::string_view, 8> groups{"filesystem:*", "network:*", "process:*", "secrets:*",
                                           "session:*", "clipboard:*", "ui:*", "agent:*"};
    return make_error(errc::unknown_capability, "unknown capability group '" + std::string(pattern) +
                                                    "'" + did_you_mean(pattern, groups));
  }
  auto cap = parse_capability(pattern);
  if (!cap) return cap.err();
  capability_set set;
  set.insert(*cap);
  return set;
}

capability_set with_implied(capability_set granted) {
  if (granted.contains(capability::network_outbound)) granted.insert(capability::network_fetch);
  return granted;
}

std::string join_names(capability_set caps) {
  std::string out;
  caps.for_each([&](capability c) {
    if (!out.empty()) out += ", ";
    out += to_string(c);
  });
  return out;
}

}  // namespace dhara::policy
