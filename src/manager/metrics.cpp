#include "manager/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "manager/views.h"

namespace pf::manager {
namespace {

// Prometheus floats: plain decimal, with the format's spellings for non-finite values.
std::string number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Shortest text that reads back as the same double: 0.4, not 0.40000000000000002.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

void header(std::ostringstream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

void gauge(std::ostringstream& out, const char* name, const char* help, double value) {
  header(out, name, "gauge", help);
  out << name << " " << number(value) << "\n";
}

}  // namespace

void Metrics::count_request(const std::string& method, const std::string& route, int code) {
  std::lock_guard lock(mutex_);
  ++requests_[RequestKey{route, code, method}];
}

std::map<RequestKey, std::uint64_t> Metrics::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void Metrics::count_front_event(const std::string& event) {
  std::lock_guard lock(mutex_);
  ++front_events_[event];
}

std::map<std::string, std::uint64_t> Metrics::front_events() const {
  std::lock_guard lock(mutex_);
  return front_events_;
}

std::string render_prometheus(const FleetSummary& fleet,
                              const std::map<RequestKey, std::uint64_t>& requests,
                              const std::map<std::string, std::uint64_t>& front_events) {
  std::ostringstream out;

  header(out, "proverfleet_instances", "gauge", "Instances by lifecycle state.");
  for (auto state : kAllInstanceStates) {
    const std::string name = core::to_string(state);
    auto it = fleet.by_state.find(name);
    const int count = it == fleet.by_state.end() ? 0 : it->second;
    out << "proverfleet_instances{state=\"" << escape_label_value(name) << "\"} " << count << "\n";
  }

  header(out, "proverfleet_spend_usd_total", "counter",
         "Money spent on rentals since the store was created, USD.");
  out << "proverfleet_spend_usd_total " << number(fleet.spend_usd) << "\n";
  header(out, "proverfleet_proofs_total", "counter", "Production proofs completed, all time.");
  out << "proverfleet_proofs_total " << fleet.proofs << "\n";
  gauge(out, "proverfleet_proofs_per_hour", "Measured proofs/hour of accepted instances.",
        fleet.proofs_per_hour);
  gauge(out, "proverfleet_dollars_per_hour",
        "What the live instances cost an hour, USD (a bid at its bid; one the market stopped, "
        "its disk).",
        fleet.dollars_per_hour);
  gauge(out, "proverfleet_storage_dollars_per_hour",
        "Storage the live instances' disks are billed now, USD/hour.", fleet.storage_usd_per_hour);
  header(out, "proverfleet_live_instances_by_terms", "gauge",
         "Live instances by rental terms: on-demand or interruptible (a bid).");
  out << "proverfleet_live_instances_by_terms{terms=\"on_demand\"} " << fleet.on_demand_instances
      << "\n";
  out << "proverfleet_live_instances_by_terms{terms=\"bid\"} " << fleet.bid_instances << "\n";
  gauge(out, "proverfleet_market_stopped_instances",
        "Live instances the market holds stopped now (outbid, contract ended, credit).",
        fleet.market_stopped);
  gauge(out, "proverfleet_live_market_stops",
        "The market's stops of the live instances so far (preemptions of bids among them).",
        fleet.market_stops);
  gauge(out, "proverfleet_profit_per_hour", "Expected profit of the fleet, USD/hour.",
        fleet.profit_per_hour);
  // An alert's input: while 0, no agent is destroyed or blamed for silence (core/hearing.h), so
  // a long stretch of 0 (a fleet-wide silence, a failing front) needs a person.
  gauge(out, "proverfleet_silence_judged",
        "1 while agents' silence is judged; 0 while the manager could not hear them.",
        fleet.hearing.may_judge_silence ? 1 : 0);
  gauge(out, "proverfleet_agents_silent", "Agents silent for a whole heartbeat timeout.",
        fleet.hearing.agents_silent);
  // Absent (rather than 0 or +Inf) while nothing proves: a dashboard should show "no data".
  if (fleet.cost_per_proof) {
    gauge(out, "proverfleet_cost_per_proof_usd", "Fleet cost per proof, USD.",
          *fleet.cost_per_proof);
  }

  header(out, "proverfleet_api_requests_total", "counter",
         "API requests served, by route pattern, status code and method.");
  for (const auto& [key, count] : requests) {
    out << "proverfleet_api_requests_total{route=\"" << escape_label_value(key.route)
        << "\",code=\"" << key.code << "\",method=\"" << escape_label_value(key.method) << "\"} "
        << count << "\n";
  }
  header(out, "proverfleet_http_front_events_total", "counter",
         "What the HTTP front did on its own: connections refused for a cap, deadlines missed, "
         "requests refused because a lane was full.");
  for (const auto& [event, count] : front_events) {
    out << "proverfleet_http_front_events_total{event=\"" << escape_label_value(event) << "\"} "
        << count << "\n";
  }
  return out.str();
}

std::string render_alerts_prometheus(const core::AlertsView& alerts,
                                     std::optional<double> market_list_age_s) {
  std::ostringstream out;
  // Per kind: instances with an alert of it, and those whose rule for closing them is met.
  std::map<core::AlertKind, std::pair<int, int>> by_kind;
  for (auto kind : core::kAllAlertKinds) by_kind[kind] = {0, 0};
  for (const auto& a : alerts.instances) {
    auto& [count, acting] = by_kind[a.kind];
    ++count;
    if (a.drop_warranted) ++acting;
  }
  header(out, "proverfleet_instance_alerts", "gauge",
         "Live instances with an alert of each kind (the manager's watch).");
  for (const auto& [kind, counts] : by_kind) {
    out << "proverfleet_instance_alerts{kind=\"" << core::to_string(kind) << "\"} " << counts.first
        << "\n";
  }
  header(out, "proverfleet_instance_alerts_acting", "gauge",
         "Of those, the ones whose rule for closing the instance is met.");
  for (const auto& [kind, counts] : by_kind) {
    out << "proverfleet_instance_alerts_acting{kind=\"" << core::to_string(kind) << "\"} "
        << counts.second << "\n";
  }
  header(out, "proverfleet_fleet_alert", "gauge",
         "1 while a fleet alert holds: spend over budget, jobs missing deadlines.");
  for (const char* kind : core::kFleetAlertKinds) {
    const bool on = std::any_of(alerts.fleet.begin(), alerts.fleet.end(),
                                [kind](const core::FleetAlert& a) { return a.kind == kind; });
    out << "proverfleet_fleet_alert{kind=\"" << kind << "\"} " << (on ? 1 : 0) << "\n";
  }
  if (market_list_age_s) {
    gauge(out, "proverfleet_market_list_age_seconds",
          "Seconds since the leader last read a complete list of its market instances.",
          *market_list_age_s);
  }
  return out.str();
}

// ---- jobs -------------------------------------------------------------------------------------

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto at = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  ++counts[static_cast<std::size_t>(at)];
  sum += value;
  ++count;
}

std::vector<double> queue_wait_buckets() {
  return {1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600};
}

std::vector<double> end_to_end_buckets() {
  return {30, 60, 120, 180, 300, 450, 600, 900, 1200, 1800, 2700, 3600};
}

JobCounters::JobCounters(double started_at, double horizon_s)
    : started_at_(started_at),
      horizon_s_(horizon_s),
      totals_{Histogram(queue_wait_buckets()), Histogram(end_to_end_buckets()), 0, 0} {}

void JobCounters::observe(const std::vector<core::Job>& jobs, const core::PriceConfig& prices,
                          double now) {
  std::lock_guard lock(mutex_);
  const double oldest = std::max(started_at_, now - horizon_s_);
  const auto fresh = [oldest, now](double at) { return at > 0 && at >= oldest && at <= now; };
  for (const auto& job : jobs) {
    if (auto wait = core::queue_wait_s(job); wait && fresh(job.assigned_at)) {
      if (leases_seen_.emplace(std::pair{job.id, job.attempts}, job.assigned_at).second) {
        totals_.queue_wait_s.observe(*wait);
      }
    }
    if (auto total = core::end_to_end_s(job); total && fresh(job.finished_at)) {
      if (finished_seen_.emplace(job.id, job.finished_at).second) {
        totals_.end_to_end_s.observe(*total);
      }
    }
    if (job.state == core::JobState::Done && fresh(job.delivered_at) &&
        core::job_timeliness(job, now).timeliness == core::Timeliness::OnTime) {
      if (delivered_seen_.emplace(job.id, job.delivered_at).second) {
        totals_.revenue_usd += core::job_revenue_usd(job, prices);
        ++totals_.delivered_on_time;
      }
    }
  }
  // Forget what is older than the horizon: it is never observed again (see `fresh`).
  const auto prune = [oldest](auto& seen) {
    std::erase_if(seen, [oldest](const auto& entry) { return entry.second < oldest; });
  };
  prune(leases_seen_);
  prune(finished_seen_);
  prune(delivered_seen_);
}

JobCounters::Snapshot JobCounters::snapshot() const {
  std::lock_guard lock(mutex_);
  return totals_;
}

namespace {

void histogram(std::ostringstream& out, const char* name, const char* help, const Histogram& h) {
  header(out, name, "histogram", help);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < h.bounds.size(); ++i) {
    cumulative += h.counts[i];
    out << name << "_bucket{le=\"" << number(h.bounds[i]) << "\"} " << cumulative << "\n";
  }
  cumulative += h.counts.back();
  out << name << "_bucket{le=\"+Inf\"} " << cumulative << "\n";
  out << name << "_sum " << number(h.sum) << "\n" << name << "_count " << h.count << "\n";
}

}  // namespace

std::string render_jobs_prometheus(const JobsReport& report,
                                   const JobCounters::Snapshot& counters) {
  std::ostringstream out;
  header(out, "proverfleet_jobs", "gauge", "Gateway jobs open now, by state.");
  for (auto state : {core::JobState::Queued, core::JobState::Assigned, core::JobState::Proving}) {
    auto it = report.open_by_state.find(state);
    out << "proverfleet_jobs{state=\"" << core::to_string(state) << "\"} "
        << (it == report.open_by_state.end() ? 0 : it->second) << "\n";
  }
  header(out, "proverfleet_jobs_queued", "gauge", "Gateway jobs waiting for a machine, by kind.");
  for (auto kind : core::kAllJobKinds) {
    auto it = report.queued_by_kind.find(kind);
    out << "proverfleet_jobs_queued{kind=\"" << core::to_string(kind) << "\"} "
        << (it == report.queued_by_kind.end() ? 0 : it->second) << "\n";
  }
  header(out, "proverfleet_jobs_completed_total", "counter",
         "Gateway jobs done since the store was created.");
  out << "proverfleet_jobs_completed_total " << report.completed << "\n";
  header(out, "proverfleet_jobs_failed_total", "counter",
         "Gateway jobs failed since the store was created.");
  out << "proverfleet_jobs_failed_total " << report.failed << "\n";
  header(out, "proverfleet_jobs_cancelled_total", "counter",
         "Gateway jobs cancelled by their clients since the store was created.");
  out << "proverfleet_jobs_cancelled_total " << report.cancelled << "\n";
  header(out, "proverfleet_job_hedges_started_total", "counter",
         "Copies of a job at risk started on a second instance (hedged proving), since the "
         "manager started leading.");
  out << "proverfleet_job_hedges_started_total " << report.hedges_started << "\n";
  header(out, "proverfleet_job_hedges_won_total", "counter",
         "Hedge copies whose proof came first, since the manager started leading.");
  out << "proverfleet_job_hedges_won_total " << report.hedges_won << "\n";
  gauge(out, "proverfleet_jobs_arrivals_last_hour", "Jobs submitted in the last hour.",
        report.arrivals_last_hour);
  gauge(out, "proverfleet_job_inputs_stored",
        "Job inputs the database holds (open jobs' and those within [jobs] retention_h).",
        static_cast<double>(report.inputs.inputs));
  gauge(out, "proverfleet_job_inputs_stored_bytes", "The bytes of those job inputs.",
        static_cast<double>(report.inputs.bytes));
  gauge(out, "proverfleet_jobs_idle_instance_hours",
        "Hours accepted instances held no job, within the jobs window.", report.money.idle_hours);
  gauge(out, "proverfleet_jobs_revenue_per_hour_usd",
        "Revenue of jobs delivered on time per hour, over the jobs window.",
        report.money.revenue_per_hour);
  gauge(out, "proverfleet_jobs_at_risk",
        "Jobs still queued with less time to their deadline than the window's median "
        "submission-to-proof time.",
        report.latency.at_risk);
  // Absent while nothing settled or was delivered: "no data", not 0.
  if (report.latency.on_time_share) {
    gauge(out, "proverfleet_jobs_on_time_share",
          "Share of jobs settled in the window that were delivered by their deadline.",
          *report.latency.on_time_share);
  }
  // What a proof delivered on time earned in the window: the break-even of realised $/proof.
  if (report.money.delivered_on_time > 0) {
    gauge(out, "proverfleet_jobs_revenue_per_proof_usd",
          "Revenue of jobs delivered on time in the jobs window over their count, USD.",
          report.money.revenue_usd / report.money.delivered_on_time);
  }
  if (report.money.realised_cost_per_proof) {
    gauge(out, "proverfleet_jobs_realised_cost_per_proof_usd",
          "Spend in the jobs window over jobs delivered on time in it, USD.",
          *report.money.realised_cost_per_proof);
  }
  histogram(out, "proverfleet_job_queue_wait_seconds",
            "Seconds from submission to the lease, once per lease (since the manager started).",
            counters.queue_wait_s);
  histogram(out, "proverfleet_job_end_to_end_seconds",
            "Seconds from submission to the proof, once per done job (since the manager started).",
            counters.end_to_end_s);
  header(out, "proverfleet_jobs_revenue_usd_total", "counter",
         "Revenue of jobs delivered on time since the manager started, USD.");
  out << "proverfleet_jobs_revenue_usd_total " << number(counters.revenue_usd) << "\n";
  header(out, "proverfleet_jobs_delivered_on_time_total", "counter",
         "Jobs delivered by their deadline since the manager started.");
  out << "proverfleet_jobs_delivered_on_time_total " << counters.delivered_on_time << "\n";
  return out.str();
}

}  // namespace pf::manager
