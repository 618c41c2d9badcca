#include "net/listen_fds.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace pf::net {
namespace {

std::optional<long> whole_number(const std::string& text) {
  long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

}  // namespace

tl::expected<std::optional<ListenFds>, std::string> parse_listen_fds(
    const std::optional<std::string>& listen_pid, const std::optional<std::string>& listen_fds,
    const std::optional<std::string>& listen_fdnames, long pid) {
  if (!listen_pid || !listen_fds) return std::optional<ListenFds>();
  const auto for_pid = whole_number(*listen_pid);
  if (!for_pid || *for_pid <= 0) {
    return tl::unexpected("LISTEN_PID is not a process id: \"" + listen_pid->substr(0, 32) + "\"");
  }
  if (*for_pid != pid) return std::optional<ListenFds>();  // meant for another process
  const auto count = whole_number(*listen_fds);
  if (!count || *count < 1 || *count > kMaxListenFds) {
    return tl::unexpected("LISTEN_FDS must be a count from 1 to " + std::to_string(kMaxListenFds) +
                          ", not \"" + listen_fds->substr(0, 32) + "\"");
  }
  std::vector<std::string> names;
  if (listen_fdnames) {
    std::string rest = *listen_fdnames;
    while (true) {
      const auto colon = rest.find(':');
      names.push_back(rest.substr(0, colon));
      if (colon == std::string::npos) break;
      rest = rest.substr(colon + 1);
    }
    if (static_cast<long>(names.size()) != *count) {
      return tl::unexpected("LISTEN_FDNAMES names " + std::to_string(names.size()) +
                            " socket(s) but LISTEN_FDS says " + std::to_string(*count));
    }
  } else {
    if (*count > 2) {
      return tl::unexpected("LISTEN_FDS is " + std::to_string(*count) +
                            " without LISTEN_FDNAMES: name them http and grpc "
                            "(FileDescriptorName= in the .socket unit)");
    }
    names = {"http", "grpc"};
    names.resize(static_cast<std::size_t>(*count));
  }
  ListenFds out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] != "http" && names[i] != "grpc") {
      return tl::unexpected("LISTEN_FDNAMES: socket " + std::to_string(i + 1) + " is named \"" +
                            names[i].substr(0, 64) + "\"; serve takes \"http\" and \"grpc\"");
    }
    if (!out.emplace(names[i], kListenFdsStart + static_cast<int>(i)).second) {
      return tl::unexpected("LISTEN_FDNAMES names \"" + names[i] + "\" twice");
    }
  }
  return std::optional<ListenFds>(std::move(out));
}

std::string SocketAddress::text() const {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

tl::expected<SocketAddress, std::string> socket_address(int fd) {
  sockaddr_storage address{};
  socklen_t size = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    return tl::unexpected("fd " + std::to_string(fd) + ": " + std::strerror(errno));
  }
  char text[INET6_ADDRSTRLEN] = {};
  SocketAddress out;
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) == nullptr) {
      return tl::unexpected("fd " + std::to_string(fd) + ": " + std::strerror(errno));
    }
    out.port = ntohs(in->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    if (::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text) == nullptr) {
      return tl::unexpected("fd " + std::to_string(fd) + ": " + std::strerror(errno));
    }
    out.port = ntohs(in6->sin6_port);
  } else {
    return tl::unexpected("fd " + std::to_string(fd) + " is not a TCP/IP socket");
  }
  out.host = text;
  return out;
}

tl::expected<std::optional<ListenFds>, std::string> take_listen_fds() {
  auto parsed = parse_listen_fds(env("LISTEN_PID"), env("LISTEN_FDS"), env("LISTEN_FDNAMES"),
                                 static_cast<long>(::getpid()));
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
  if (!parsed || !*parsed) return parsed;
  for (const auto& [name, fd] : **parsed) {
    int listening = 0;
    socklen_t size = sizeof listening;
    int type = 0;
    socklen_t type_size = sizeof type;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) != 0 ||
        ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_size) != 0) {
      return tl::unexpected("the \"" + name + "\" socket handed over (fd " + std::to_string(fd) +
                            ") is not a socket: " + std::strerror(errno));
    }
    if (!listening || type != SOCK_STREAM) {
      return tl::unexpected("the \"" + name + "\" socket handed over (fd " + std::to_string(fd) +
                            ") is not a listening stream socket (ListenStream= in the unit)");
    }
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0 || ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0) {
      return tl::unexpected("cannot mark the \"" + name +
                            "\" socket close-on-exec: " + std::strerror(errno));
    }
  }
  return parsed;
}

tl::expected<util::UniqueFd, std::string> listen_tcp(const std::string& host, int port) {
  const std::string where =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  if (port < 0 || port > 65535) return tl::unexpected("cannot listen on " + where + ": bad port");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return tl::unexpected("cannot listen on " + where + ": " + ::gai_strerror(rc));
  }
  std::string error = "no address";
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    util::UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (fd.get() < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int on = 1;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
        ::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 1024) != 0) {
      error = std::strerror(errno);
      continue;
    }
    ::freeaddrinfo(found);
    return fd;
  }
  ::freeaddrinfo(found);
  return tl::unexpected("cannot listen on " + where + " (" + error + ")");
}

}  // namespace pf::net
