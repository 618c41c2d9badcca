#include "manager/leader_forward.h"

#include <nlohmann/json.hpp>

#include "market/http_client.h"
#include "util/bounded_json.h"

namespace pf::manager {
namespace {

// Request headers relayed to the leader: credentials, the body's type, ranges and validators.
constexpr const char* kRelayedRequestHeaders[] = {"Authorization", "Content-Type", "Range",
                                                  "If-None-Match", "Accept"};
// Reply headers relayed back (the body's type is relayed separately).
constexpr const char* kRelayedReplyHeaders[] = {
    "content-range",    "etag",          "retry-after",  "accept-ranges",
    "www-authenticate", "cache-control", "x-next-cursor"};

ForwardedReply unavailable(const std::string& message, const nlohmann::json& leader) {
  ForwardedReply reply;
  reply.status = 503;
  reply.body = util::dump_json_lossy(nlohmann::json{{"error", message}, {"leader", leader}});
  reply.headers.emplace_back("Retry-After", "2");
  return reply;
}

}  // namespace

LeaderForward::LeaderForward(Leadership& leadership, double request_timeout_s)
    : leadership_(leadership), request_timeout_s_(request_timeout_s) {}

std::optional<ForwardedReply> LeaderForward::operator()(const net::HttpRequest& request,
                                                        const std::string& route) {
  if (!core::served_by_leader(request.method, route)) return std::nullopt;
  if (leadership_.leading()) return std::nullopt;
  const LeaderView view = leadership_.view();
  const auto& row = view.lease;
  if (!core::has_live_leader(row, view.now) || row->holder == view.replica_id) {
    return unavailable("no replica leads at the moment (failover in progress, at most " +
                           std::to_string(static_cast<int>(view.failover_bound_s)) + " s): retry",
                       nullptr);
  }
  const nlohmann::json leader = {{"replica_id", row->holder}, {"url", row->holder_url}};
  if (row->holder_url == leadership_.config().url && !stopped_accepting_) {
    return unavailable("the leader's address " + row->holder_url +
                           " is this replica's own (its socket outlived a restart, or is being "
                           "handed to a successor): retry",
                       leader);
  }
  if (request.has_header(kForwardedByHeader)) {
    return unavailable("this replica (" + view.replica_id +
                           ") does not lead and the request was "
                           "already forwarded once: retry",
                       leader);
  }
  market::HttpRequest out;
  out.method = request.method;
  out.url = row->holder_url + request.target;
  for (const char* name : kRelayedRequestHeaders) {
    if (request.has_header(name))
      out.headers.push_back(std::string(name) + ": " + request.get_header_value(name));
  }
  out.headers.push_back(std::string(kForwardedByHeader) + ": " + view.replica_id);
  if (request.method != "GET") out.body = request.body;
  market::HttpOptions options;
  options.connect_timeout_s = 5;
  options.request_timeout_s = request_timeout_s_;
  options.max_body_bytes = 64u << 20;
  const auto reply = market::http_perform(options, out);
  if (!reply) {
    return unavailable("the leader " + row->holder + " at " + row->holder_url +
                           " did not answer (" + reply.error().message + "): retry",
                       leader);
  }
  ForwardedReply relayed;
  relayed.status = reply->status;
  relayed.body = reply->body;
  const std::string type = reply->header("content-type");
  relayed.content_type = type.empty() ? "application/json" : type;
  for (const char* name : kRelayedReplyHeaders) {
    const std::string value = reply->header(name);
    if (!value.empty()) relayed.headers.emplace_back(name, value);
  }
  return relayed;
}

}  // namespace pf::manager
