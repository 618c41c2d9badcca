// Listening sockets handed over by a supervisor (systemd socket activation, sd_listen_fds(3)):
// the supervisor binds and listens, keeps the sockets across restarts of the process, and starts
// the process with them open from fd 3 (SD_LISTEN_FDS_START) on, saying so in the environment:
//   LISTEN_PID      the pid they are meant for (a child that inherits the environment must not
//                   take them too);
//   LISTEN_FDS      how many;
//   LISTEN_FDNAMES  their names, ':'-separated, in order (a .socket unit's FileDescriptorName=).
// While the process is down the kernel keeps accepting connections into the sockets' backlogs,
// so a client's call waits for the restart instead of failing (systemd.socket(5); the
// "Socket activation" sections of
// https://www.freedesktop.org/software/systemd/man/sd_listen_fds.html).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "util/unique_fd.h"

namespace pf::net {

inline constexpr int kListenFdsStart = 3;  // SD_LISTEN_FDS_START
inline constexpr int kMaxListenFds = 16;

// The sockets by name. Without LISTEN_FDNAMES the names are "http" then "grpc", in order.
using ListenFds = std::map<std::string, int>;

// From the three variables' values (nullopt: unset) and this process's pid. nullopt when no
// sockets were handed to this process (LISTEN_PID unset or another pid's, or LISTEN_FDS unset);
// an error naming the variable when a value is malformed or out of range.
tl::expected<std::optional<ListenFds>, std::string> parse_listen_fds(
    const std::optional<std::string>& listen_pid, const std::optional<std::string>& listen_fds,
    const std::optional<std::string>& listen_fdnames, long pid);

// The address a TCP socket is bound to: host (IPv6 without brackets) and port.
struct SocketAddress {
  std::string host;
  int port = 0;
  std::string text() const;  // HOST:PORT, [IPv6]:PORT
};
tl::expected<SocketAddress, std::string> socket_address(int fd);

// Binds HOST:PORT (a name or an address; IPv6 without brackets; port 0 picks a free one) and
// listens, as a supervisor would: SO_REUSEADDR, never SO_REUSEPORT (a second manager on the port
// must fail to bind, not share the fleet), close-on-exec. A process that binds its own sockets
// this way can hand them to a successor (net/socket_handover.h).
tl::expected<util::UniqueFd, std::string> listen_tcp(const std::string& host, int port);

// Reads the environment, then unsets the three variables (so that children, e.g. spawned agents
// in a demo, do not see them) and marks the sockets close-on-exec. Checks that each is a
// listening stream socket.
tl::expected<std::optional<ListenFds>, std::string> take_listen_fds();

}  // namespace pf::net
