// A follower's HTTP side (issue 14): what only the leader serves (core::served_by_leader: agent
// calls, job routes, operator changes) is forwarded to the leader's URL from the lease row, and
// the leader's reply (status, body, content type, Content-Range/ETag/Retry-After) is relayed.
// With no live leader (a failover in progress) the answer is 503 with Retry-After naming the
// situation; nothing is acted on here. A request already forwarded once is never forwarded again
// (two replicas that each think the other leads answer 503 rather than loop), and a leader whose
// URL is this replica's own is not forwarded to while this process accepts there: a serve
// restarted on the sockets systemd held, or one handing its socket to a successor, shares that
// URL with the lease's holder, and a request forwarded to itself would wait for a thread of the
// lane its forwarder holds (agents stalled until the forward timed out, their jobs' leases
// expired: seen in the PostgreSQL e2e run).
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "manager/leadership.h"
#include "net/http_server.h"

namespace pf::manager {

// The header a forwarded request carries: the forwarding replica's id.
inline constexpr const char* kForwardedByHeader = "X-Proverfleet-Forwarded-By";

struct ForwardedReply {
  int status = 503;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers = {};
};

class LeaderForward {
 public:
  // request_timeout_s bounds a whole forwarded exchange (a job lease long-poll included).
  LeaderForward(Leadership& leadership, double request_timeout_s);
  // nullopt: serve the request here (this replica leads, or any replica serves the route).
  std::optional<ForwardedReply> operator()(const net::HttpRequest& request,
                                           const std::string& route);
  // This process no longer accepts on its listening socket (it handed it to a successor): its
  // own URL now reaches the successor only, so requests may be forwarded there.
  void stopped_accepting() { stopped_accepting_ = true; }

 private:
  Leadership& leadership_;
  double request_timeout_s_;
  std::atomic<bool> stopped_accepting_{false};
};

}  // namespace pf::manager
