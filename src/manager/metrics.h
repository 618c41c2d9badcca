// Prometheus exposition for the manager: fleet gauges from a FleetSummary and a count of API
// requests by route pattern and status. Text format 0.0.4; every series starts with
// "proverfleet_".
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "manager/manager.h"

namespace pf::manager {

inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4";

struct RequestKey {
  std::string route;   // the route's pattern ("/api/v1/instances/{id}"), never the raw path
  int code = 0;        // HTTP status
  std::string method;  // GET, POST, ...
  bool operator<(const RequestKey& other) const {
    return std::tie(route, code, method) < std::tie(other.route, other.code, other.method);
  }
};

// Request counters; safe to update from the server's worker threads.
class Metrics {
 public:
  void count_request(const std::string& method, const std::string& route, int code);
  std::map<RequestKey, std::uint64_t> requests() const;
  // What the HTTP front did on its own (net::to_string(FrontEvent)): refusals, timeouts.
  void count_front_event(const std::string& event);
  std::map<std::string, std::uint64_t> front_events() const;

 private:
  mutable std::mutex mutex_;  // guards both maps
  std::map<RequestKey, std::uint64_t> requests_;
  std::map<std::string, std::uint64_t> front_events_;
};

// The whole /metrics page: proverfleet_instances{state=...} for every state, spend and proof
// totals, fleet rates, proverfleet_api_requests_total{route,code,method} and
// proverfleet_http_front_events_total{event}.
std::string render_prometheus(const FleetSummary& fleet,
                              const std::map<RequestKey, std::uint64_t>& requests,
                              const std::map<std::string, std::uint64_t>& front_events = {});

// Escapes a label value (backslash, double quote, newline) as the text format requires.
std::string escape_label_value(const std::string& value);

}  // namespace pf::manager
