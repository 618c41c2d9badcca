// For fuzz targets of HTTP clients: a loopback server on its own thread that answers every
// request with the reply set last (status and body), one connection at a time, then closes
// the connection. Header-only; POSIX sockets.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "support/raw_http.h"

namespace pf::fuzz {

class CannedHttpServer {
 public:
  CannedHttpServer() {
    listener_ = test::Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (!listener_.valid() ||
        ::bind(listener_.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener_.fd(), 16) != 0 ||
        ::getsockname(listener_.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("canned server: cannot listen on 127.0.0.1");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~CannedHttpServer() {
    stop_ = true;
    thread_.join();
  }
  CannedHttpServer(const CannedHttpServer&) = delete;
  CannedHttpServer& operator=(const CannedHttpServer&) = delete;

  int port() const { return port_; }

  void set_reply(int status, std::string body) {
    std::lock_guard lock(mu_);
    reply_ = "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\n" +
             "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
             body;
  }

 private:
  void run() {
    while (!stop_) {
      pollfd p{listener_.fd(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      test::Socket conn(::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn.valid()) continue;
      read_request(conn);
      std::string reply;
      {
        std::lock_guard lock(mu_);
        reply = reply_;
      }
      test::send_all(conn, reply);
    }
  }

  // Reads the head and a Content-Length body (the client's; their content does not matter).
  static void read_request(const test::Socket& conn) {
    std::string buf;
    char chunk[8192];
    std::size_t want = std::string::npos;
    while (buf.size() < want) {
      pollfd p{conn.fd(), POLLIN, 0};
      if (::poll(&p, 1, 2000) <= 0) return;
      const ssize_t n = ::recv(conn.fd(), chunk, sizeof chunk, 0);
      if (n <= 0) return;
      buf.append(chunk, static_cast<std::size_t>(n));
      const auto end = buf.find("\r\n\r\n");
      if (want == std::string::npos && end != std::string::npos) {
        want =
            end + 4 + test::content_length_of(std::string_view(buf).substr(0, end + 2)).value_or(0);
      }
    }
  }

  test::Socket listener_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string reply_ = "HTTP/1.1 200 X\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
  std::thread thread_;
};

}  // namespace pf::fuzz
