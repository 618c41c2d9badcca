#include "net/socket_handover.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pf::net {
namespace {

std::string errno_text(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

tl::expected<sockaddr_un, std::string> unix_address(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof address.sun_path) {
    return tl::unexpected("the takeover socket path '" + path + "' must be 1 to " +
                          std::to_string(sizeof address.sun_path - 1) + " bytes long");
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

tl::expected<util::UniqueFd, std::string> unix_socket() {
  util::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return tl::unexpected(errno_text("socket"));
  return fd;
}

// Waits until `fd` is readable or `timeout` passes (false). EINTR waits again for what is left.
tl::expected<bool, std::string> readable_within(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd ready{fd, POLLIN, 0};
    const int n = ::poll(&ready, 1, static_cast<int>(std::max<long long>(left.count(), 0)));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return tl::unexpected(errno_text("poll"));
  }
}

}  // namespace

tl::expected<HandoverChannel, std::string> HandoverChannel::connect(const std::string& path) {
  auto address = unix_address(path);
  if (!address) return tl::unexpected(address.error());
  auto fd = unix_socket();
  if (!fd) return tl::unexpected(fd.error());
  if (::connect(fd->get(), reinterpret_cast<const sockaddr*>(&*address), sizeof *address) != 0) {
    return tl::unexpected("no serve answers at the takeover socket '" + path +
                          "': " + std::strerror(errno));
  }
  return HandoverChannel(std::move(*fd));
}

tl::expected<void, std::string> HandoverChannel::send(std::string_view line,
                                                      const std::vector<int>& fds) {
  if (line.size() + 1 > kMaxHandoverLine || line.find('\n') != std::string_view::npos) {
    return tl::unexpected(std::string("handover: a line must be one line under 512 bytes"));
  }
  if (fds.size() > kMaxHandoverFds) {
    return tl::unexpected(std::string("handover: too many descriptors for one message"));
  }
  std::string bytes(line);
  bytes.push_back('\n');
  std::size_t sent = 0;
  bool fds_sent = fds.empty();
  while (sent < bytes.size()) {
    iovec io{bytes.data() + sent, bytes.size() - sent};
    msghdr message{};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxHandoverFds)] = {};
    if (!fds_sent) {
      message.msg_control = control;
      message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* header = CMSG_FIRSTHDR(&message);
      header->cmsg_level = SOL_SOCKET;
      header->cmsg_type = SCM_RIGHTS;
      header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
    }
    const ssize_t n = ::sendmsg(fd_.get(), &message, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return tl::unexpected(errno_text("handover: sending"));
    }
    fds_sent = true;  // the descriptors travel with the first byte
    sent += static_cast<std::size_t>(n);
  }
  return {};
}

tl::expected<HandoverMessage, std::string> HandoverChannel::receive(
    std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (const auto end = pending_.find('\n'); end != std::string::npos) {
      HandoverMessage message;
      message.line = pending_.substr(0, end);
      pending_.erase(0, end + 1);
      message.fds = std::move(pending_fds_);
      pending_fds_.clear();
      return message;
    }
    if (pending_.size() >= kMaxHandoverLine) {
      return tl::unexpected(std::string("handover: the peer sent a line over 512 bytes"));
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    auto ready = readable_within(fd_.get(), std::max(left, std::chrono::milliseconds(0)));
    if (!ready) return tl::unexpected("handover: " + ready.error());
    if (!*ready) {
      return tl::unexpected("handover: no answer within " + std::to_string(timeout.count()) +
                            " ms");
    }
    char buffer[kMaxHandoverLine];
    iovec io{buffer, kMaxHandoverLine - pending_.size()};
    msghdr message{};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxHandoverFds)] = {};
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(fd_.get(), &message, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return tl::unexpected(errno_text("handover: reading"));
    }
    // Descriptors first: they are ours now, whatever else is wrong with the message.
    for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
         header = CMSG_NXTHDR(&message, header)) {
      if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
      const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof fd);
        pending_fds_.emplace_back(fd);
      }
    }
    if ((message.msg_flags & MSG_CTRUNC) != 0) {
      return tl::unexpected(std::string("handover: the peer sent too many descriptors"));
    }
    if (n == 0) return tl::unexpected(std::string("handover: the peer closed the channel"));
    pending_.append(buffer, static_cast<std::size_t>(n));
  }
}

tl::expected<unsigned, std::string> HandoverChannel::peer_uid() const {
  ucred credentials{};
  socklen_t size = sizeof credentials;
  if (::getsockopt(fd_.get(), SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) {
    return tl::unexpected(errno_text("handover: SO_PEERCRED"));
  }
  return static_cast<unsigned>(credentials.uid);
}

bool handover_socket_answers(const std::string& path) {
  auto channel = HandoverChannel::connect(path);
  return channel.has_value();
}

tl::expected<HandoverListener, std::string> HandoverListener::listen(const std::string& path) {
  auto address = unix_address(path);
  if (!address) return tl::unexpected(address.error());
  struct stat existing {};
  if (::lstat(path.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode)) {
      return tl::unexpected("the takeover socket path '" + path + "' exists and is not a socket");
    }
    if (handover_socket_answers(path)) {
      return tl::unexpected("another serve answers takeovers at '" + path + "'");
    }
    ::unlink(path.c_str());  // stale: its process is gone
  }
  auto fd = unix_socket();
  if (!fd) return tl::unexpected(fd.error());
  // Only this user may connect: the file is created 0600 (umask), and peers are checked again
  // by their credentials (HandoverChannel::peer_uid).
  const mode_t old_mask = ::umask(0177);
  const int bound =
      ::bind(fd->get(), reinterpret_cast<const sockaddr*>(&*address), sizeof *address);
  const int bind_errno = errno;
  ::umask(old_mask);
  if (bound != 0) {
    return tl::unexpected("cannot bind the takeover socket '" + path +
                          "': " + std::strerror(bind_errno));
  }
  if (::listen(fd->get(), 4) != 0) {
    const std::string error = errno_text("listen");
    ::unlink(path.c_str());
    return tl::unexpected("the takeover socket '" + path + "': " + error);
  }
  return HandoverListener(std::move(*fd), path);
}

tl::expected<std::optional<HandoverChannel>, std::string> HandoverListener::accept(
    std::chrono::milliseconds timeout) {
  if (fd_.get() < 0) return tl::unexpected(std::string("the takeover socket is closed"));
  auto ready = readable_within(fd_.get(), timeout);
  if (!ready) return tl::unexpected(ready.error());
  if (!*ready) return std::optional<HandoverChannel>();
  util::UniqueFd connection(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (connection.get() < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) {
      return std::optional<HandoverChannel>();
    }
    return tl::unexpected(errno_text("accept on the takeover socket"));
  }
  return std::optional<HandoverChannel>(HandoverChannel(std::move(connection)));
}

void HandoverListener::close(bool unlink) {
  if (fd_.get() < 0) return;
  fd_.reset();
  if (unlink) ::unlink(path_.c_str());
}

}  // namespace pf::net
