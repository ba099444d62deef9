// Looking host names up with the system resolver (getaddrinfo): the addresses a URL's host
// stands for, which the rules vet (policy/net_rules.hpp, host_lookup).
#pragma once

#include <sys/socket.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "policy/net_rules.hpp"

namespace dhara::io {

/// The address in a socket address (IPv4, or IPv6 with IPv4-mapped ones folded into IPv4);
/// nullopt for any other family or a short length.
std::optional<policy::ip_address> address_of(const sockaddr* sa, std::size_t len);

/// Every address the system resolver gives for `host` (blocking; the resolver's own timeouts
/// apply), each once; or why there is none.
policy::host_addresses look_up_host(const std::string& host);

/// Looks each name up when asked, and keeps the answer for its own life (a command that checks
/// a few URLs and ends: `dhara demo`). The checker keeps answers for a while and looks names up
/// off its thread (actors/checker.cpp).
class system_host_lookup final : public policy::host_lookup {
 public:
  const policy::host_addresses* find(std::string_view host) const override;

 private:
  mutable std::map<std::string, policy::host_addresses, std::less<>> answers_;
};

}  // namespace dhara::io
