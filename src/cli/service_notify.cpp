#include "cli/service_notify.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/unique_fd.h"

namespace pf::cli {

tl::expected<bool, std::string> notify_service_manager(const std::string& state) {
  const char* where = std::getenv("NOTIFY_SOCKET");
  if (where == nullptr || *where == '\0') return false;
  const std::string path(where);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if ((path[0] != '/' && path[0] != '@') || path.size() >= sizeof address.sun_path) {
    return tl::unexpected("NOTIFY_SOCKET must be an absolute path or @name under " +
                          std::to_string(sizeof address.sun_path) + " bytes");
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  if (path[0] == '@') address.sun_path[0] = '\0';  // an abstract socket name
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  util::UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return tl::unexpected(std::string("NOTIFY_SOCKET: ") + std::strerror(errno));
  if (::sendto(fd.get(), state.data(), state.size(), MSG_NOSIGNAL,
               reinterpret_cast<const sockaddr*>(&address), length) < 0) {
    return tl::unexpected("NOTIFY_SOCKET " + path + ": " + std::strerror(errno));
  }
  return true;
}

}  // namespace pf::cli
