// The SSH command the operator copies from the instance page to reach a rented machine. The
// market's instance record names the hosts and ports; they come from outside, so a host is
// taken only when it is a plain host name or address (letters, digits, '.', '-', ':') and a
// port only in 1..65535: nothing else reaches a command line the operator pastes into a shell.
#pragma once

#include <string>
#include <vector>

namespace pf::core {

struct SshEndpoints {
  std::string proxy_host;  // vast's ssh gateway (sshN.vast.ai)
  int proxy_port = 0;
  std::string direct_host;  // the machine's public address
  int direct_port = 0;      // the host port mapped to the container's 22/tcp
};

// A host name or IP address safe to put on a command line (1..253 characters of
// [A-Za-z0-9.:-], not starting with '-').
bool plain_host(const std::string& host);

// Commands in order of preference: the proxy one (works wherever the market's gateway does),
// then the direct one. Empty when neither endpoint is complete and plain.
std::vector<std::string> ssh_commands(const SshEndpoints& endpoints);

}  // namespace pf::core
