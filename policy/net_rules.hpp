// Network rules (DESIGN §4, §9 "URLs and commands"): URL parsing, domain lists (exact or
// `*.suffix`, present-but-empty = none) and refusal of loopback, private and link-local
// IP literals in every spelling (decimal, hex, octal, short, IPv4-mapped IPv6).
// Name resolution is I/O: a URL's host that is not listed by name is vetted through a
// host_lookup the caller supplies (the checker's caches the system resolver's answers), and
// the host API resolves names again and re-checks the addresses it connects to.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/decision.hpp"
#include "policy/result.hpp"

namespace dhara::policy {

/// The parts of an http(s) URL that the rules look at.
struct parsed_url {
  std::string scheme;  ///< lower-case: "http" or "https"
  std::string host;    ///< lower-case, no brackets, no trailing dot
  std::uint16_t port = 0;
  std::string path;    ///< from the first '/' (may be empty)
};

/// Parses an absolute http(s) URL. Anything doubtful (other schemes, spaces, backslashes,
/// control characters or '%' in the authority, an empty host, a bad port) is an error.
result<parsed_url> parse_url(std::string_view url);

/// An IP address: IPv4 as 4 bytes (and IPv4-mapped IPv6 folded into IPv4), or IPv6.
struct ip_address {
  bool v6 = false;
  std::array<std::uint8_t, 16> bytes{};
  std::string to_string() const;
  bool operator==(const ip_address&) const = default;
};

/// Parses an IP literal in any form a resolver would accept ("127.1", "0x7f000001",
/// "2130706433", "0177.0.0.1", "::ffff:127.0.0.1", "[::1]"); nullopt for a host name.
std::optional<ip_address> parse_ip_literal(std::string_view host);

/// True for addresses refused unless listed literally: 0/8, 10/8, 100.64/10, 127/8,
/// 169.254/16, 172.16/12, 192.168/16, multicast and broadcast, ::, ::1, fc00::/7, fe80::/10,
/// and IPv6 forms that embed such an IPv4 address (mapped, compatible, NAT64).
bool is_refused_address(const ip_address& ip);

/// What a person approving a manifest's network.outbound entry should know that the entry
/// does not say: for an IP literal written in another spelling, or one refused unless listed
/// (loopback, private, link-local), "the address 127.0.0.1, a loopback, private or link-local
/// address" ("2130706433" and "0x7f.1" reach 127.0.0.1); empty for a host name and for a
/// public address written as it is shown.
std::string listed_host_note(std::string_view entry);

/// Compiled domain rules from a manifest's or approval's domain list.
struct domain_rules {
  bool listed = false;                 ///< a list was given (an empty list allows none)
  std::vector<std::string> exact;      ///< "api.example.com", IP literals normalized
  std::vector<std::string> suffixes;   ///< ".example.com" from "*.example.com"
};

/// Compiles a domain list (nullopt = no list: any public host).
domain_rules compile_domain_rules(const std::optional<std::vector<std::string>>& domains);

/// What the system resolver said about a host name: its addresses, or why there are none.
struct host_addresses {
  std::vector<ip_address> addresses;  ///< empty when the lookup failed
  std::string failure;                ///< why it failed ("Name or service not known"), else empty
};

/// The answers about host names a check may use. Looking a name up is I/O, so the caller
/// supplies it: check_url asks for a host that must be vetted, and gets what is known.
class host_lookup {
 public:
  virtual ~host_lookup() = default;
  /// The answer about `host` (lower-case, no trailing dot) if one is at hand; nullptr when it
  /// must be looked up first (the check's verdict is then `lookup`, naming the host).
  virtual const host_addresses* find(std::string_view host) const = 0;
};

/// Checks a URL: http/https only; host must match the list when one is given; IP literals
/// and names such as "localhost" that are loopback/private are refused unless listed by name.
/// With `hosts`, a host name that is not listed (there is no list) is vetted by what it
/// resolves to (DESIGN §4, §9): refused when the lookup failed or gave a loopback, private or
/// link-local address; verdict `lookup` when `hosts` has no answer yet. Without `hosts`, such
/// a name is allowed as written (the host API vets what it connects to itself).
decision check_url(const domain_rules& rules, std::string_view url, const host_lookup* hosts = nullptr);

/// The verdict on a host name that is not listed, by the addresses it resolved to (none:
/// refused, `failure` saying why the lookup found none). The gate and host/net/fetch both.
decision vet_host_name(std::string_view host, std::span<const ip_address> addresses, std::string_view failure = {});

}  // namespace dhara::policy
