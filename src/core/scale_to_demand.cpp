#include "core/scale_to_demand.h"

#include <algorithm>
#include <cmath>

#include "core/text.h"

namespace pf::core {
namespace {

struct DeadlineNeed {
  double rate = 0;          // proofs/hour the queued jobs need to meet their deadlines
  bool would_miss = false;  // at `capacity` some queued job misses its deadline
  int due = 0;              // queued jobs with a deadline still ahead
};

// Earliest deadline first: the k-th job (by deadline) is done after k proofs of capacity.
DeadlineNeed deadline_need(const QueueObservation& jobs, double capacity, double floor_s) {
  std::vector<double> ahead;
  for (double d : jobs.queued_deadlines)
    if (d > jobs.now) ahead.push_back(d);
  std::sort(ahead.begin(), ahead.end());
  DeadlineNeed out;
  out.due = static_cast<int>(ahead.size());
  for (std::size_t k = 1; k <= ahead.size(); ++k) {
    const double left_s = ahead[k - 1] - jobs.now;
    if (!(capacity > 0) || jobs.now + static_cast<double>(k) * 3600 / capacity > ahead[k - 1]) {
      out.would_miss = true;
    }
    if (left_s < floor_s) continue;  // nothing rented now reaches it
    out.rate = std::max(out.rate, static_cast<double>(k) * 3600 / left_s);
  }
  return out;
}

const BenchRun* latest_window(std::span<const Measurement> measurements, const InstanceRecord& rec,
                              int min_samples) {
  const BenchRun* best = nullptr;
  for (const auto& m : measurements) {
    const BenchRun& w = m.run;
    if (w.instance_id != rec.id || w.kind != "production") continue;
    if (w.at < rec.state_since || w.samples < min_samples) continue;
    if (!best || w.at > best->at) best = &w;
  }
  return best;
}

}  // namespace

std::map<std::int64_t, double> measured_rates(const std::vector<InstanceRecord>& fleet,
                                              std::span<const Measurement> measurements,
                                              const WatchConfig& watch) {
  std::map<std::int64_t, double> out;
  for (const auto& rec : fleet) {
    if (rec.state != InstanceState::Proving) continue;
    const BenchRun* latest = latest_window(measurements, rec, watch.min_samples);
    out[rec.id] = latest ? latest->rate : rec.verdict ? rec.verdict->rate : 0;
  }
  return out;
}

std::optional<DemandDecision> demand_to_serve(const QueueObservation& jobs,
                                              std::optional<double> previous, double capacity,
                                              const ScaleToDemandConfig& cfg) {
  auto recent = estimate_demand(jobs, std::nullopt, cfg.estimate);
  if (!recent) return std::nullopt;
  DemandDecision out;
  out.recent = *recent;
  out.capacity = capacity;
  std::vector<std::string> why;
  why.push_back(recent->reason.substr(recent->reason.find(':') + 2));  // what was seen

  double arrivals = recent->arrival_rate;
  if (cfg.use_forecast) {
    DemandForecastConfig forecast = cfg.forecast;
    forecast.trailing_window_s = cfg.estimate.window_s;
    out.forecast = forecast_demand(jobs.arrivals, jobs.observed_since, jobs.now,
                                   jobs.now + cfg.lead_s, recent->arrival_rate, forecast);
    if (out.forecast) {
      why.push_back(out.forecast->reason);
      // Both ways: a pattern that predicted well lowers the figure ahead of a lull too (measured
      // on market-72h-v2: raising only kept idle capacity through the day's dips).
      arrivals = out.forecast->proofs_per_hour;
    }
  }
  double fresh = arrivals + recent->backlog_rate;
  // What lasts: the arrivals ahead, or the arrivals of the last current_window_s where they
  // are higher (the trailing hour lags a step up in demand by up to an hour; the backlog term
  // is what catches up meanwhile, and it must not be discounted as transient then).
  double lasting = arrivals;
  if (cfg.current_window_s > 0 && jobs.now - jobs.observed_since >= cfg.current_window_s) {
    const auto lately = std::count_if(jobs.arrivals.begin(), jobs.arrivals.end(), [&](double t) {
      return t >= jobs.now - cfg.current_window_s && t < jobs.now;
    });
    lasting = std::max(lasting, static_cast<double>(lately) * 3600 / cfg.current_window_s);
  }

  const DeadlineNeed need = deadline_need(jobs, capacity, cfg.deadline_floor_s);
  out.deadline_rate = need.rate;
  out.would_miss = need.would_miss;
  if (need.would_miss) {
    why.push_back("at the measured " + fixed(capacity, 0) + "/hr the " + std::to_string(need.due) +
                  " queued jobs would miss deadlines; meeting them needs " + fixed(need.rate, 0) +
                  "/hr");
  }
  fresh = std::max(fresh, need.rate);
  // Deadlines the measured fleet cannot meet are a shortfall of capacity, not a backlog.
  if (need.would_miss) lasting = std::max(lasting, need.rate);

  const int open = jobs.queued + jobs.in_flight;
  out.censored = jobs.admit_window > 0 && open >= jobs.admit_window;
  double floor = 0;
  if (out.censored) {
    floor = capacity * (1 + cfg.censored_step);
    why.push_back("admission window full (" + std::to_string(open) + " of " +
                  std::to_string(jobs.admit_window) + "): the client holds work back, demand is " +
                  "at least " + fixed(floor, 0) + "/hr (capacity + " + percent(cfg.censored_step) +
                  ")");
    fresh = std::max(fresh, floor);
    lasting = std::max(lasting, floor);
  }
  out.lasting_proofs_per_hour = lasting;

  out.proofs_per_hour = fresh;
  std::string seen;
  for (const auto& w : why) seen += (seen.empty() ? "" : "; ") + w;
  if (previous) {
    const double band = demand_band(
        *previous, std::min(cfg.estimate.window_s, jobs.now - jobs.observed_since), cfg.estimate);
    if (std::abs(fresh - *previous) <= band && *previous >= floor) {
      out.proofs_per_hour = *previous;
      out.held = true;
      out.reason = "demand held at " + fixed(*previous, 0) + "/hr (new figure " + fixed(fresh, 0) +
                   "/hr is within ±" + fixed(band, 0) + "/hr): " + seen;
      return out;
    }
  }
  out.reason = "demand " + fixed(fresh, 0) + "/hr: " + seen;
  return out;
}

ScaledDecision decide_for_jobs(const std::vector<InstanceRecord>& fleet,
                               const std::vector<Offer>& offers, const PolicyHistory& history,
                               const std::vector<BadHost>& bad_hosts, double now,
                               PolicyConfig policy, const QueueObservation& jobs,
                               std::optional<double> previous, const ScaleToDemandConfig& config) {
  ScaledDecision out;
  double capacity = 0;
  for (const auto& [id, rate] : measured_rates(fleet, history.measurements, policy.watch)) {
    capacity += rate;
  }
  out.demand = demand_to_serve(jobs, previous, capacity, config);
  if (out.demand) {
    policy.demand_proofs_per_hour = out.demand->proofs_per_hour;
    if (config.transient_backlog) {
      policy.lasting_demand_proofs_per_hour = out.demand->lasting_proofs_per_hour;
      policy.transient_room_h = config.transient_room_h;
    }
  } else if (previous) {
    policy.demand_proofs_per_hour = previous;
  }
  out.sized_for = policy.demand_proofs_per_hour;
  out.actions = decide(fleet, offers, history, bad_hosts, now, policy);
  return out;
}

}  // namespace pf::core
