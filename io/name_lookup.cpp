// Host name lookups (see name_lookup.hpp).
#include "io/name_lookup.hpp"

#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>

namespace dhara::io {

std::optional<policy::ip_address> address_of(const sockaddr* sa, std::size_t len) {
  policy::ip_address ip;
  if (sa->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    std::memcpy(ip.bytes.data(), &in->sin_addr, 4);
    return ip;
  }
  if (sa->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    ip.v6 = true;
    std::memcpy(ip.bytes.data(), &in6->sin6_addr, 16);
    static constexpr std::uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    if (std::memcmp(ip.bytes.data(), mapped, 12) == 0) {  // fold ::ffff:a.b.c.d to IPv4
      std::array<std::uint8_t, 16> v4{};
      std::memcpy(v4.data(), ip.bytes.data() + 12, 4);
      ip.bytes = v4;
      ip.v6 = false;
    }
    return ip;
  }
  return std::nullopt;
}

policy::host_addresses look_up_host(const std::string& host) {
  policy::host_addresses out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0) {
    out.failure = gai_strerror(rc);
    return out;
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, &::freeaddrinfo);
  for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
    auto ip = address_of(a->ai_addr, a->ai_addrlen);
    if (ip && std::find(out.addresses.begin(), out.addresses.end(), *ip) == out.addresses.end())
      out.addresses.push_back(*ip);
  }
  if (out.addresses.empty()) out.failure = "it has no IPv4 or IPv6 address";
  return out;
}

const policy::host_addresses* system_host_lookup::find(std::string_view host) const {
  auto it = answers_.find(host);
  if (it == answers_.end()) it = answers_.emplace(std::string(host), look_up_host(std::string(host))).first;
  return &it->second;
}

}  // namespace dhara::io
