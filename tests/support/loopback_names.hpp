// Host names that resolve to loopback on this machine, for tests of the rules that vet what a
// name resolves to.
#pragma once

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dhara::testing {

// Names from /etc/hosts (and this machine's own name) that resolve only to loopback and are
// not conventional local names: only the resolution step can catch them.
inline std::vector<std::string> loopback_names() {
  std::vector<std::string> candidates;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) candidates.emplace_back(host);
  std::ifstream hosts("/etc/hosts");
  for (std::string line; std::getline(hosts, line);) {
    std::istringstream words(line);
    std::string addr, name;
    if (!(words >> addr) || !addr.starts_with("127.")) continue;
    while (words >> name && !name.starts_with('#')) candidates.push_back(name);
  }
  std::vector<std::string> out;
  for (const std::string& c : candidates) {
    if (c.find("localhost") != std::string::npos || c.ends_with(".local") || c.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-.") != std::string::npos)
      continue;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(c.c_str(), nullptr, &hints, &res) != 0) continue;
    bool all_loopback = true;
    for (addrinfo* a = res; a; a = a->ai_next)
      all_loopback = all_loopback && a->ai_family == AF_INET &&
                     (ntohl(reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr.s_addr) >> 24) == 127;
    ::freeaddrinfo(res);
    if (all_loopback && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

}  // namespace dhara::testing
