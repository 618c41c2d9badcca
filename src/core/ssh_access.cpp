#include "core/ssh_access.h"

#include <cctype>

namespace pf::core {

bool plain_host(const std::string& host) {
  if (host.empty() || host.size() > 253 || host.front() == '-') return false;
  for (const char c : host) {
    const auto u = static_cast<unsigned char>(c);
    if (!std::isalnum(u) && c != '.' && c != '-' && c != ':') return false;
  }
  return true;
}

std::vector<std::string> ssh_commands(const SshEndpoints& e) {
  std::vector<std::string> out;
  auto add = [&](const std::string& host, int port) {
    if (!plain_host(host) || port <= 0 || port > 65535) return;
    out.push_back("ssh -p " + std::to_string(port) + " root@" + host);
  };
  add(e.proxy_host, e.proxy_port);
  add(e.direct_host, e.direct_port);
  return out;
}

}  // namespace pf::core
