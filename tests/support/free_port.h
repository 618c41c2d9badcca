#pragma once
// A loopback TCP port for a server a test starts (or restarts) at an address it fixes first.
//
// Not bind(0): the kernel gives that from its ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), and between our probe and the server's bind any
// process on the machine may be given the same port by its own bind(0) or outgoing connection.
// With ctest running tests side by side that happens: in CI (2026-12-07) another test's HTTP
// server got the port an end-to-end run had chosen for serve's gateway, serve retried its bind,
// and for a second Curio's calls were answered by that HTTP/1 server. A port below the
// ephemeral range is handed out by nobody; only another test picking the same one at random
// in the same moment could take it.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <stdexcept>

namespace pf::test {

namespace free_port_detail {

// The lowest port the kernel hands out on its own (32768 where the file cannot be read).
inline int ephemeral_low() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  int high = 0;
  if (range >> low >> high && low > 1024 && low <= 65535) return low;
  return 32768;
}

// Whether 127.0.0.1:port can be bound now (without SO_REUSEADDR: a port with connections
// still closing is passed over too).
inline bool bindable(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace free_port_detail

// A port on 127.0.0.1 that is free now and below the kernel's ephemeral range.
inline int free_port() {
  constexpr int kLowest = 10000;  // above the well-known and most registered services' ports
  const int ceiling = free_port_detail::ephemeral_low();
  if (ceiling <= kLowest + 100)
    throw std::runtime_error("free_port: the ephemeral range starts too low");
  std::mt19937 random(
      std::random_device{}() ^ static_cast<unsigned>(::getpid()) ^
      static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uniform_int_distribution<int> pick(kLowest, ceiling - 1);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = pick(random);
    if (free_port_detail::bindable(port)) return port;
  }
  throw std::runtime_error("free_port: no free port on 127.0.0.1 below the ephemeral range");
}

}  // namespace pf::test
