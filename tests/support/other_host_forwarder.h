// Test helper: a TCP forwarder that makes a client on this machine look like another host. It
// listens on 127.0.0.1 (a free port) and connects each accepted connection to `target` from
// the source address `source` (default 127.0.0.2: every 127/8 address is this machine on Linux),
// so the server sees that address as the peer instead of 127.0.0.1. For tests of who a server
// believes a caller is (the gateway's client identity). Header-only; one thread per connection
// direction, all joined on destruction.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace pf::test {

class OtherHostForwarder {
 public:
  explicit OtherHostForwarder(int target_port, std::string source = "127.0.0.2")
      : target_port_(target_port), source_(std::move(source)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (listener_ < 0) throw std::runtime_error("forwarder: socket");
    sockaddr_in addr = loopback(0, "127.0.0.1");
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener_, 16) != 0) {
      ::close(listener_);
      throw std::runtime_error("forwarder: cannot listen on 127.0.0.1");
    }
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~OtherHostForwarder() {
    stopping_ = true;
    acceptor_.join();
    std::vector<std::thread> pumps;
    {
      std::lock_guard lock(mu_);
      pumps.swap(pumps_);
    }
    for (auto& t : pumps) t.join();
    ::close(listener_);
  }
  OtherHostForwarder(const OtherHostForwarder&) = delete;
  OtherHostForwarder& operator=(const OtherHostForwarder&) = delete;

  // Where the client connects: "127.0.0.1:PORT".
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  static sockaddr_in loopback(int port, const std::string& ip) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
    return addr;
  }

  void accept_loop() {
    while (!stopping_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0) continue;
      const int upstream = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in from = loopback(0, source_);
      sockaddr_in to = loopback(target_port_, "127.0.0.1");
      if (upstream < 0 || ::bind(upstream, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
          ::connect(upstream, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
        ::close(client);
        if (upstream >= 0) ::close(upstream);
        continue;
      }
      std::lock_guard lock(mu_);
      pumps_.emplace_back([this, client, upstream] { pump(client, upstream); });
    }
  }

  // Copies both ways until either side closes or the forwarder stops.
  void pump(int a, int b) {
    char buf[64 * 1024];
    bool open = true;
    while (open && !stopping_) {
      pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
      if (::poll(p, 2, 50) <= 0) continue;
      for (int i = 0; i < 2 && open; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const int from = i == 0 ? a : b;
        const int to = i == 0 ? b : a;
        const ssize_t n = ::read(from, buf, sizeof buf);
        if (n <= 0) {
          open = false;
          break;
        }
        for (ssize_t sent = 0; sent < n;) {
          const ssize_t w =
              ::send(to, buf + sent, static_cast<std::size_t>(n - sent), MSG_NOSIGNAL);
          if (w <= 0) {
            open = false;
            break;
          }
          sent += w;
        }
      }
    }
    ::close(a);
    ::close(b);
  }

  int target_port_ = 0;
  std::string source_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> pumps_;
};

}  // namespace pf::test
