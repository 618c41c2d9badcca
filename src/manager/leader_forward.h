// A follower's HTTP side (issue 14): what only the leader serves (core::served_by_leader: agent
// calls, job routes, operator changes) is forwarded to the leader's URL from the lease row, and
// the leader's reply (status, body, content type, Content-Range/ETag/Retry-After) is relayed.
// With no live leader (a failover in progress) the answer is 503 with Retry-After naming the
// situation; nothing is acted on here. A request already forwarded once is never forwarded again
// (two replicas that each think the other leads answer 503 rather than loop).
#pragma once

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

 private:
  Leadership& leadership_;
  double request_timeout_s_;
};

}  // namespace pf::manager
