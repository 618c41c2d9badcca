// Prometheus exposition for the manager: fleet gauges from a FleetSummary and a count of API
// requests by route pattern and status. Text format 0.0.4; every series starts with
// "proverfleet_".
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/alerts.h"
#include "core/job_economics.h"
#include "manager/jobs_report.h"
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

// What the manager's watch holds now (core/alerts.h), for alert rules (deploy/prometheus):
// proverfleet_instance_alerts{kind} (live instances with an alert of each kind, 0 included),
// proverfleet_instance_alerts_acting{kind} (those whose rule for closing them is met),
// proverfleet_fleet_alert{kind} (1 while a fleet alert of each kind holds), and
// proverfleet_market_list_age_seconds (since the leader last read a complete market list; absent
// before its first, and on a replica that does not lead).
std::string render_alerts_prometheus(const core::AlertsView& alerts,
                                     std::optional<double> market_list_age_s);

// A Prometheus histogram: counts per upper bound (not cumulative here; the text is), sum, count.
struct Histogram {
  std::vector<double> bounds;         // ascending upper bounds; +Inf is implied
  std::vector<std::uint64_t> counts;  // bounds.size() + 1 (the last: above every bound)
  double sum = 0;
  std::uint64_t count = 0;
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
};

// Once-per-job counters for /metrics from the jobs the report listed: a job's queue wait is
// observed once per lease, its end-to-end latency once when done, its revenue once when
// delivered on time. Only what happened since this process started counts (counters restart
// at 0, as Prometheus expects of a restart), and only within `horizon_s` of the observation:
// a job listed again is not counted twice, and one that finished while nobody scraped is
// counted at the next scrape as long as the report still lists it. Thread-safe.
class JobCounters {
 public:
  explicit JobCounters(double started_at, double horizon_s = 24 * 3600);
  void observe(const std::vector<core::Job>& jobs, const core::PriceConfig& prices, double now);

  struct Snapshot {
    Histogram queue_wait_s, end_to_end_s;
    double revenue_usd = 0;
    std::uint64_t delivered_on_time = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mutex_;  // guards everything below
  double started_at_;
  double horizon_s_;
  std::map<std::pair<std::int64_t, int>, double> leases_seen_;  // (job, attempt) → assigned_at
  std::map<std::int64_t, double> finished_seen_;                // job → finished_at
  std::map<std::int64_t, double> delivered_seen_;               // job → delivered_at
  Snapshot totals_;
};

// The bucket bounds, seconds: a queue wait is seconds to minutes, a proof minutes (cuzk's
// ProveTimeout is 30 min).
std::vector<double> queue_wait_buckets();
std::vector<double> end_to_end_buckets();

// The jobs' series: proverfleet_jobs{state} (open states now), proverfleet_jobs_queued{kind},
// completed/failed totals, arrivals in the last hour, in-flight, on-time share, realised
// $/proof, idle hours, revenue/hour (gauges over the report's window), and from `counters`
// proverfleet_job_queue_wait_seconds / proverfleet_job_end_to_end_seconds histograms and
// proverfleet_jobs_revenue_usd_total.
std::string render_jobs_prometheus(const JobsReport& report, const JobCounters::Snapshot& counters);

// Escapes a label value (backslash, double quote, newline) as the text format requires.
std::string escape_label_value(const std::string& value);

}  // namespace pf::manager
