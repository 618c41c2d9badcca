// Raw HTTP/1.1 over loopback TCP for tests that must send what no client library would
// (malformed request lines, lying lengths, chunked bodies, half-sent headers) and for the fuzz
// harnesses. Header-only, standard library and POSIX sockets only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace pf::test {

// An owned socket descriptor.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = other.fd_;
      other.fd_ = -1;
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { reset(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// A connected TCP socket to 127.0.0.1:port, or an invalid one when the connect failed.
// `from` (another loopback address such as "127.0.0.2") makes the connection come from a
// different client address, for servers that cap connections per address.
inline Socket connect_loopback(int port, const char* from = nullptr) {
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return s;
  if (from != nullptr) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    if (::inet_pton(AF_INET, from, &local.sin_addr) != 1 ||
        ::bind(s.fd(), reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0) {
      s.reset();
      return s;
    }
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) s.reset();
  if (s.valid()) {
    int one = 1;
    ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return s;
}

// Sends all of `data`; false when the peer closed or the socket failed (never SIGPIPE).
inline bool send_all(const Socket& s, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(s.fd(), data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

struct RawReply {
  int status = 0;          // 0: no status line arrived
  std::string head;        // status line and headers
  std::string body;        // as far as it was read
  bool timed_out = false;  // the reply (or its status line) did not arrive within the limit
  bool reset = false;      // the connection failed or was closed before a status line
};

// The value of header `name` (given in lower case) in a response head, if it has one (header
// names case-insensitive).
inline std::optional<std::string_view> header_of(std::string_view head, std::string_view name) {
  std::size_t pos = 0;
  while ((pos = head.find("\r\n", pos)) != std::string_view::npos) {
    pos += 2;
    const std::string_view rest = head.substr(pos);
    if (rest.size() < name.size() + 1 || rest[name.size()] != ':') continue;
    bool match = true;
    for (std::size_t i = 0; i < name.size(); ++i) {
      const char c = rest[i];
      if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) != name[i]) {
        match = false;
        break;
      }
    }
    if (!match) continue;
    std::string_view value = rest.substr(name.size() + 1);
    value = value.substr(0, value.find("\r\n"));
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    return value;
  }
  return std::nullopt;
}

// The Content-Length of a response head, if it has one.
inline std::optional<std::size_t> content_length_of(std::string_view head) {
  const auto value = header_of(head, "content-length");
  if (!value) return std::nullopt;
  return std::strtoull(std::string(*value).c_str(), nullptr, 10);
}

// Reads one response from `s`: returns when the head and a Content-Length body arrived, when
// the peer closed, or at `timeout` (timed_out is set only when no status line came).
inline RawReply read_reply(const Socket& s, std::chrono::milliseconds timeout) {
  RawReply reply;
  std::string buf;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::optional<std::size_t> body_start;
  std::optional<std::size_t> length;
  char chunk[16384];
  while (true) {
    if (body_start && length && buf.size() >= *body_start + *length) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      reply.timed_out = !body_start;
      break;
    }
    pollfd p{s.fd(), POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // the deadline check above ends the loop
    const ssize_t n = ::recv(s.fd(), chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // closed (or reset)
    buf.append(chunk, static_cast<std::size_t>(n));
    if (!body_start) {
      const auto end = buf.find("\r\n\r\n");
      if (end != std::string::npos) {
        body_start = end + 4;
        length = content_length_of(std::string_view(buf).substr(0, end + 2));
      }
    }
  }
  if (!body_start) {
    reply.reset = !reply.timed_out;
    reply.head = buf;
    return reply;
  }
  reply.head = buf.substr(0, *body_start);
  reply.body = buf.substr(*body_start);
  // "HTTP/1.1 200 OK"
  if (reply.head.rfind("HTTP/", 0) == 0) {
    const auto space = reply.head.find(' ');
    if (space != std::string::npos) reply.status = std::atoi(reply.head.c_str() + space + 1);
  }
  return reply;
}

// Connects, sends `request` as it is, and reads one reply. The connection stays open for
// writing (cpp-httplib drops a request whose client half-closed before the reply).
inline RawReply exchange(int port, std::string_view request, std::chrono::milliseconds timeout) {
  Socket s = connect_loopback(port);
  if (!s.valid()) {
    RawReply r;
    r.reset = true;
    return r;
  }
  // A server may answer (413, 400) and close before reading everything: read what it said.
  send_all(s, request);
  return read_reply(s, timeout);
}

}  // namespace pf::test
