// Handing listening sockets from a running process to its successor over a unix stream socket,
// as Envoy's hot restart does (its "parent" sends the listen sockets to the "child" with
// SCM_RIGHTS:
// https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/operations/hot_restart and the
// design note https://blog.envoyproxy.io/envoy-hot-restart-1d16b14555b5; unix(7), cmsg(3)). The
// sockets are duplicated, not moved: both processes hold the same listening socket, the kernel
// queues connections in its one backlog, and whichever process accepts gets each. Nothing here
// knows what the sockets are for (cli/serve_takeover.h speaks the protocol).
//
// Messages are lines of at most kMaxHandoverLine bytes ending in '\n'; a line may carry
// descriptors. Every read has a deadline, and a peer that sends more than a line, a line with no
// end, or descriptors where none are expected is refused with an error naming it.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "util/unique_fd.h"

namespace pf::net {

inline constexpr std::size_t kMaxHandoverLine = 512;
inline constexpr std::size_t kMaxHandoverFds = 8;

struct HandoverMessage {
  std::string line;                 // without its '\n'
  std::vector<util::UniqueFd> fds;  // descriptors that came with it (close-on-exec)
};

// A connected unix stream socket carrying handover messages.
class HandoverChannel {
 public:
  explicit HandoverChannel(util::UniqueFd fd) : fd_(std::move(fd)) {}
  // Connects to the control socket at `path` (as the successor).
  static tl::expected<HandoverChannel, std::string> connect(const std::string& path);

  // Sends `line` (no '\n' in it; one is added) and, with it, duplicates of `fds`.
  tl::expected<void, std::string> send(std::string_view line, const std::vector<int>& fds = {});
  // The next line, waiting at most `timeout`. An error when the peer closed the channel, sent
  // an overlong line, or the deadline passed (the error says which).
  tl::expected<HandoverMessage, std::string> receive(std::chrono::milliseconds timeout);
  // The user id of the process at the other end (SO_PEERCRED).
  tl::expected<unsigned, std::string> peer_uid() const;
  int fd() const { return fd_.get(); }

 private:
  util::UniqueFd fd_;
  std::string pending_;  // bytes read past the last line
  std::vector<util::UniqueFd> pending_fds_;
};

// The running process's side: a unix stream socket listening at `path`, mode 0600. A path where
// another process already answers is refused (two processes must not offer one fleet); a stale
// socket file (nobody answers) is replaced.
class HandoverListener {
 public:
  static tl::expected<HandoverListener, std::string> listen(const std::string& path);
  // The next successor that connects, or nullopt when none did within `timeout`.
  tl::expected<std::optional<HandoverChannel>, std::string> accept(
      std::chrono::milliseconds timeout);
  const std::string& path() const { return path_; }
  // Closes the socket; removes the file when `unlink` (a successor that binds the same path
  // after us unlinks it itself, so a process that handed over leaves the file alone).
  void close(bool unlink);

 private:
  HandoverListener(util::UniqueFd fd, std::string path)
      : fd_(std::move(fd)), path_(std::move(path)) {}
  util::UniqueFd fd_;
  std::string path_;
};

// Whether a process answers at the unix socket `path` now.
bool handover_socket_answers(const std::string& path);

}  // namespace pf::net
