// A planned restart or upgrade of `serve` that fails no call (issue 35): the running process
// (the predecessor) hands its listening sockets to a new one (`serve --takeover`, the successor)
// over a unix socket, as Envoy's hot restart does, and the two use the replica machinery to
// pass the fleet on:
//
//   successor                                predecessor
//   "takeover 1 PID"                    →    (peer's uid must be ours)
//                                       ←    "sockets http grpc" + the descriptors (SCM_RIGHTS)
//   serves them as a follower (relays
//   to the predecessor, which still leads)
//   "listening"                         →    retires: ends its term (its job queue stops; the
//                                            calls waiting on it wait for their jobs at the next
//                                            leader: gateway_front.h) and resigns the lease
//                                       ←    "resigned"
//   takes the lease at once, loads the
//   queue from the store (or, when the
//   predecessor was a follower, sees
//   the replica that leads); "leading"  →    stops accepting (closes its descriptors: the
//                                            successor's keep listening), drains its open calls,
//                                            exits
//
// Both processes accept from the same sockets while the handover runs, so no connection is
// refused and none waits on a process that is going. A successor that fails before "listening"
// changes nothing; one that fails between "listening" and "leading" (its channel closes or goes
// quiet) leaves the predecessor leading again. Works on any store the replicas work on (one
// SQLite file on one host, PostgreSQL).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tl/expected.hpp>
#include <utility>
#include <vector>

#include "net/listen_fds.h"
#include "net/socket_handover.h"
#include "util/unique_fd.h"

namespace pf::cli {

// How long each step may take before the other side gives up on it.
struct TakeoverTiming {
  std::chrono::milliseconds hello{5'000};        // the successor's first line
  std::chrono::milliseconds listening{120'000};  // its start-up: config, store, migrations
  std::chrono::milliseconds resigned{30'000};    // the predecessor's resignation
  std::chrono::milliseconds leading{60'000};     // the successor's first term
};

// The predecessor's side: what serve does at each step.
struct TakeoverHooks {
  // Second descriptors of the listening sockets, by name ("http", "grpc").
  std::function<std::vector<std::pair<std::string, util::UniqueFd>>()> sockets;
  // The successor serves them: end this process's term and resign the lease for good.
  std::function<void()> retire;
  // The successor failed before it led: compete for the lease again.
  std::function<void()> rejoin;
  // The successor leads: stop accepting on this process's descriptors.
  std::function<void()> stop_accepting;
  std::function<void(bool warning, const std::string& line)> log;
};

// Listens at the takeover socket for a successor (a thread of its own) and runs the predecessor's
// side of the protocol with the first that asks.
class TakeoverOffer {
 public:
  TakeoverOffer(net::HandoverListener listener, TakeoverHooks hooks, TakeoverTiming timing = {});
  ~TakeoverOffer();
  TakeoverOffer(const TakeoverOffer&) = delete;
  TakeoverOffer& operator=(const TakeoverOffer&) = delete;

  // Set once a successor leads: serve then drains and exits.
  bool handed_over() const { return handed_over_.load(); }
  // The successor's pid, as it said ("" before a handover).
  std::string successor() const;
  // Stops listening (serve is stopping); the socket file is removed unless handed over.
  void stop();

 private:
  void run();
  // One successor's request; true when it took over.
  bool serve_successor(net::HandoverChannel& channel);

  net::HandoverListener listener_;
  const TakeoverHooks hooks_;
  const TakeoverTiming timing_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> handed_over_{false};
  mutable std::mutex mu_;
  std::string successor_;
  std::thread thread_;
};

// The successor's side (`serve --takeover`).
class TakeoverRequest {
 public:
  // Connects to the predecessor at `path` and receives its sockets.
  static tl::expected<TakeoverRequest, std::string> start(const std::string& path,
                                                          TakeoverTiming timing = {});
  // The sockets by name, as net::take_listen_fds gives a supervisor's; this process owns them.
  net::ListenFds sockets() const { return sockets_; }
  // This process serves the sockets: asks the predecessor to resign, and returns once it did.
  tl::expected<void, std::string> listening();
  // This process leads: the predecessor stops accepting and drains. Closes the channel.
  tl::expected<void, std::string> leading();

 private:
  TakeoverRequest(net::HandoverChannel channel, net::ListenFds sockets, TakeoverTiming timing)
      : channel_(std::move(channel)), sockets_(std::move(sockets)), timing_(timing) {}
  net::HandoverChannel channel_;
  net::ListenFds sockets_;
  TakeoverTiming timing_;
};

// A reload (SIGHUP: `systemctl reload`, deploy/systemd/proverfleet.service) starts the successor
// itself: the binary now installed where this one was started from (an upgrade replaced the file;
// /proc/self/exe would still name the old one), with this process's arguments and --takeover.
struct OwnCommand {
  std::string path;               // the executable's path as it was at start
  std::vector<std::string> argv;  // this process's arguments, argv[0] included
};
// Read once at start (/proc/self/exe, /proc/self/cmdline).
tl::expected<OwnCommand, std::string> read_own_command();
// `command` with --takeover added (once, where it is not there yet).
std::vector<std::string> successor_argv(const OwnCommand& command);
// Starts the successor (posix_spawn: stdio, environment and process group inherited, no signal
// blocked or ignored). Its pid.
tl::expected<int, std::string> spawn_successor(const OwnCommand& command);

}  // namespace pf::cli
