// URL parsing, domain matching and IP literal classification.
#include "policy/net_rules.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstring>
#include <optional>

namespace dhara::policy {
namespace {

// ASCII only, as the C locale's tolower (dhara never sets a locale): host names are compared
// byte for byte once lowered.
char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

bool equals_lowered(std::string_view s, std::string_view lowered) {
  if (s.size() != lowered.size()) return false;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (ascii_lower(s[i]) != lowered[i]) return false;
  return true;
}

// The parts of an absolute http(s) URL, as views into it; the host is not lowered yet.
struct url_parts {
  bool https = false;
  std::string_view host;  // no brackets, no trailing dot, not empty
  std::uint16_t port = 0;
  std::string_view path;  // from the first '/', '?' or '#' (may be empty)
  std::optional<ip_address> ip;  // the host read as an IP literal: bracketed, or ending in a number
};

// The bytes a host name may hold: ASCII letters, digits, '-', '.', '_'.
constexpr std::array<bool, 256> name_bytes = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c)
    t[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
  return t;
}();

// A host whose last label is a number is an IPv4 address to a client (WHATWG's "ends in a
// number": `0x` is 0.0.0.0 to Node's fetch).
bool ends_in_a_number(std::string_view host) {
  const std::string_view last = host.substr(host.rfind('.') + 1);  // all of it without a dot
  if (last.empty()) return false;
  if (last.size() >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X'))
    return std::all_of(last.begin() + 2, last.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
  return std::all_of(last.begin(), last.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Splits `url` into `out`, and reads a host that is an IP literal into `out.ip`, without
// allocating (but for an IPv4 literal over 64 bytes). Returns nullptr, or why the URL is
// refused: the end of the sentence "the URL '<url>' …".
const char* split_url(std::string_view url, url_parts& out) {
  auto colon = url.find("://");
  if (colon == std::string_view::npos) return "is not an absolute http(s) URL";
  std::string_view scheme = url.substr(0, colon);
  if (equals_lowered(scheme, "https")) out.https = true;
  else if (equals_lowered(scheme, "http")) out.https = false;
  else return "does not use http or https";
  std::string_view rest = url.substr(colon + 3);
  std::size_t end = 0;  // the authority ends at the first '/', '?' or '#'
  bool refused_char = false;
  for (; end < rest.size(); ++end) {
    const char c = rest[end];
    if (c == '/' || c == '?' || c == '#') break;
    refused_char |= static_cast<unsigned char>(c) <= 0x20 || c == '\\' || c == '%' || c == 0x7F;
  }
  if (refused_char) return "has a character in its host part that dhara does not accept";
  std::string_view authority = rest.substr(0, end);
  out.path = rest.substr(end);
  if (auto at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
  std::string_view host = authority, port;
  if (authority.starts_with('[')) {
    auto close = authority.find(']');
    if (close == std::string_view::npos) return "has an unclosed '['";
    host = authority.substr(1, close - 1);
    // Brackets hold an IPv6 address and nothing else (a zone id, `%25eth0`, included).
    out.ip = host.find(':') != std::string_view::npos ? parse_ip_literal(host) : std::nullopt;
    if (!out.ip) return "has no IPv6 address dhara can read in its brackets";
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return "has text after its IPv6 address";
      port = after.substr(1);
    }
  } else if (auto c = authority.rfind(':'); c != std::string_view::npos) {
    host = authority.substr(0, c);
    port = authority.substr(c + 1);
    // `http://127.0.0.1:80:80/` and `http://::1/`: a client reads such a host otherwise.
    if (host.find(':') != std::string_view::npos) return "has a ':' in its host outside brackets";
  }
  if (!authority.starts_with('[')) {
    // A name's bytes, as a client sends them to DNS: a client maps non-ASCII (fullwidth
    // letters, circled digits, U+3002 as a dot) to ASCII first, so `ｌｏｃａｌｈｏｓｔ`
    // would be checked as a public name and fetched as localhost.
    for (char ch : host) {
      const auto c = static_cast<unsigned char>(ch);
      if (name_bytes[c]) continue;
      if (c >= 0x80) return "has a host that is not ASCII; write an international name in its punycode (xn--) form";
      return "has a character in its host that no host name holds";
    }
  }
  if (!port.empty()) {
    unsigned value = 0;
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc{} || p != port.data() + port.size() || value == 0 || value > 65535) return "has an invalid port";
    out.port = static_cast<std::uint16_t>(value);
  } else {
    out.port = out.https ? 443 : 80;
  }
  while (!host.empty() && host.back() == '.') host.remove_suffix(1);
  if (host.empty()) return "has no host";
  if (!authority.starts_with('[') && ends_in_a_number(host)) {
    out.ip = parse_ip_literal(host);
    if (!out.ip) return "has a host that ends in a number but is no IPv4 address dhara can read";
  }
  out.host = host;
  return nullptr;
}

std::string refused_url(std::string_view url, const char* why) {
  return "the URL '" + std::string(url) + "' " + why;
}

decision deny(std::string reason, std::string_view rule = {}) {
  return {verdict_kind::deny, std::move(reason), decider::rule, rule};
}

bool in_v4(const std::uint8_t* b, std::uint32_t net, int prefix) {
  std::uint32_t a = (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
  std::uint32_t mask = prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - prefix);
  return (a & mask) == (net & mask);
}

bool refused_v4(const std::uint8_t* b) {
  return in_v4(b, 0x00000000, 8) || in_v4(b, 0x0A000000, 8) || in_v4(b, 0x64400000, 10) ||
         in_v4(b, 0x7F000000, 8) || in_v4(b, 0xA9FE0000, 16) || in_v4(b, 0xAC100000, 12) ||
         in_v4(b, 0xC0A80000, 16) || in_v4(b, 0xE0000000, 4) /* multicast */ ||
         in_v4(b, 0xF0000000, 4) /* reserved, broadcast */;
}

// Names that resolve to loopback by convention (RFC 6761) without asking DNS.
bool is_local_name(std::string_view host) {
  return host == "localhost" || host.ends_with(".localhost") || host == "localhost.localdomain" ||
         host.ends_with(".local") || host == "ip6-localhost" || host == "ip6-loopback";
}

bool listed_by_name(const domain_rules& rules, std::string_view host) {
  if (std::find(rules.exact.begin(), rules.exact.end(), host) != rules.exact.end()) return true;
  for (const std::string& s : rules.suffixes)
    if (host.size() > s.size() && host.ends_with(s)) return true;  // not the bare domain
  return false;
}

}  // namespace

std::string ip_address::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (v6) {
    inet_ntop(AF_INET6, bytes.data(), buf, sizeof buf);
  } else {
    inet_ntop(AF_INET, bytes.data(), buf, sizeof buf);
  }
  return buf;
}

result<parsed_url> parse_url(std::string_view url) {
  url_parts parts;
  if (const char* why = split_url(url, parts)) return make_error(errc::invalid_value, refused_url(url, why));
  parsed_url out;
  out.scheme = parts.https ? "https" : "http";
  out.host = lower(parts.host);
  out.port = parts.port;
  out.path = std::string(parts.path);
  return out;
}

std::optional<ip_address> parse_ip_literal(std::string_view host) {
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  if (host.empty()) return std::nullopt;
  // No length cap: a resolver reads `000…0177.0.0.1`, with any number of zeros, as 127.0.0.1.
  // A usual host is copied on the stack, a longer one to the heap.
  char small[65];
  std::string large;
  const char* buf = small;
  if (host.size() < sizeof small) {
    std::memcpy(small, host.data(), host.size());
    small[host.size()] = '\0';
  } else {
    large.assign(host);
    buf = large.c_str();
  }
  ip_address ip;
  if (host.find(':') != std::string_view::npos) {
    if (host.size() > 64 || inet_pton(AF_INET6, buf, ip.bytes.data()) != 1) return std::nullopt;
    ip.v6 = true;
    static constexpr std::uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    if (std::memcmp(ip.bytes.data(), mapped, 12) == 0) {  // ::ffff:a.b.c.d is IPv4
      std::array<std::uint8_t, 16> v4{};
      std::memcpy(v4.data(), ip.bytes.data() + 12, 4);
      ip.bytes = v4;
      ip.v6 = false;
    }
    return ip;
  }
  // inet_aton accepts every legacy IPv4 spelling a resolver would ("127.1", "0x7f.1",
  // "2130706433", "0177.0.0.1"), which is exactly what an attacker would try.
  for (char c : host)
    if (!std::isxdigit(static_cast<unsigned char>(c)) && c != '.' && c != 'x' && c != 'X')
      return std::nullopt;
  in_addr addr{};
  if (inet_aton(buf, &addr) == 0) return std::nullopt;
  std::memcpy(ip.bytes.data(), &addr.s_addr, 4);
  return ip;
}

bool is_refused_address(const ip_address& ip) {
  const std::uint8_t* b = ip.bytes.data();
  if (!ip.v6) return refused_v4(b);
  static constexpr std::uint8_t zero[16] = {};
  if (std::memcmp(b, zero, 15) == 0 && (b[15] == 0 || b[15] == 1)) return true;  // :: and ::1
  if ((b[0] & 0xFE) == 0xFC) return true;                                      // fc00::/7
  if (b[0] == 0xFE && (b[1] & 0xC0) == 0x80) return true;                      // fe80::/10
  if (b[0] == 0xFE && (b[1] & 0xC0) == 0xC0) return true;                      // fec0::/10 (site-local)
  if (b[0] == 0xFF) return true;                                               // multicast
  if (std::memcmp(b, zero, 12) == 0) return refused_v4(b + 12);                // ::a.b.c.d
  static constexpr std::uint8_t nat64[12] = {0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::memcmp(b, nat64, 12) == 0) return refused_v4(b + 12);               // 64:ff9b::/96
  if (b[0] == 0x20 && b[1] == 0x02) return refused_v4(b + 2);                  // 6to4 2002::/16
  return false;
}

domain_rules compile_domain_rules(const std::optional<std::vector<std::string>>& domains) {
  domain_rules rules;
  if (!domains) return rules;
  rules.listed = true;
  for (const std::string& d : *domains) {
    std::string entry = lower(d);
    while (!entry.empty() && entry.back() == '.') entry.pop_back();
    if (entry.starts_with("*.") && entry.size() > 2) {
      rules.suffixes.push_back(entry.substr(1));
    } else if (auto ip = parse_ip_literal(entry)) {
      rules.exact.push_back(ip->to_string());
    } else if (!entry.empty()) {
      rules.exact.push_back(std::move(entry));
    }
  }
  return rules;
}

std::string listed_host_note(std::string_view entry) {
  const std::optional<ip_address> ip = parse_ip_literal(entry);
  if (!ip) {
    std::string name = lower(entry);
    if (name.ends_with('.')) name.pop_back();
    return is_local_name(name) ? "a name of this machine or the local network, not of a public host" : std::string();
  }
  const std::string shown = ip->to_string();
  const bool refused = is_refused_address(*ip);
  if (!refused && (shown == entry || "[" + shown + "]" == entry)) return {};
  return "the address " + shown + (refused ? ", a loopback, private or link-local address" : "");
}

decision vet_host_name(std::string_view host, std::span<const ip_address> addresses, std::string_view failure) {
  if (addresses.empty())
    return deny("the host '" + std::string(host) + "' could not be resolved (" +
                (failure.empty() ? std::string("no address") : std::string(failure)) +
                "); a host that is not listed must resolve to a public address: check its spelling, or list it in network.outbound");
  for (const ip_address& ip : addresses)
    if (is_refused_address(ip))
      return deny("the host '" + std::string(host) + "' resolves to " + ip.to_string() +
                  ", a loopback, private or link-local address; list the host by name in network.outbound to allow it");
  return {verdict_kind::allow, {}, decider::rule, {}};
}

decision check_url(const domain_rules& rules, std::string_view url, const host_lookup* hosts) {
  url_parts parts;
  if (const char* why = split_url(url, parts)) return deny(refused_url(url, why));
  // The host lowered: on the stack (a DNS name has at most 253 bytes), on the heap if longer.
  char small[256];
  std::string large;
  std::string_view host;
  if (parts.host.size() <= sizeof small) {
    for (std::size_t i = 0; i < parts.host.size(); ++i) small[i] = ascii_lower(parts.host[i]);
    host = {small, parts.host.size()};
  } else {
    large = lower(parts.host);
    host = large;
  }
  if (const std::optional<ip_address>& ip = parts.ip) {
    std::string canonical = ip->to_string();
    bool listed = std::find(rules.exact.begin(), rules.exact.end(), canonical) != rules.exact.end();
    if (listed) return {verdict_kind::allow, {}, decider::rule, {}};
    if (is_refused_address(*ip))
      return deny("the address " + canonical + " in '" + std::string(url) +
                  "' is loopback, private or link-local; list it literally in network.outbound to allow it");
    if (rules.listed) return deny("the host " + canonical + " is not in the extension's network.outbound list");
    return {verdict_kind::allow, {}, decider::rule, {}};
  }
  bool listed = listed_by_name(rules, host);
  if (!listed && is_local_name(host))
    return deny("the host '" + std::string(host) + "' is a local name; list it in network.outbound to allow it");
  if (rules.listed && !listed)
    return deny("the host '" + std::string(host) + "' is not in the extension's network.outbound list" +
                (rules.exact.empty() && rules.suffixes.empty() ? std::string(" (the list is empty: no host is allowed)") : std::string()));
  if (listed || hosts == nullptr) return {verdict_kind::allow, {}, decider::rule, {}};
  // Any public host: this one must resolve, and only to public addresses.
  if (const host_addresses* answer = hosts->find(host)) return vet_host_name(host, answer->addresses, answer->failure);
  return {verdict_kind::lookup, "the host '" + std::string(host) + "' must be looked up before it can be checked",
          decider::rule, {}, std::string(host)};
}

}  // namespace dhara::policy
