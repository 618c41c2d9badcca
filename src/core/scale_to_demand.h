// Scale to demand (issue 12 item 5, design §11): where proofs arrive as jobs, the demand the
// fleet is sized for is the queue's, and one pure decision serves both shells — the manager's
// autopilot (observing jobs::JobQueue) and the policy simulator on scenario /2 (observing its
// simulated queue). Each passes its own observation and `now`; neither re-implements a step.
//
// The demand (proofs/hour) is the largest of:
//  - arrivals: what the daily pattern of history forecasts for when a rental rented now would
//    be proving (`lead_s` ahead: boot, parameters, warm-up, benchmark), blended with the
//    trailing-window rate by how well each predicted lately (demand_forecast.h; the trailing
//    rate alone until a pattern has been seen and tested) — so capacity is ready when the
//    day's peak comes and is let go ahead of the day's lull — plus the rate that drains the
//    backlog within drain_within_s (demand_estimate.h);
//  - deadlines: the capacity the queued jobs need to be done before their deadlines when
//    served earliest-deadline first (max over k of k jobs ÷ time to the k-th deadline; jobs due
//    within deadline_floor_s are the present fleet's to serve or miss — nothing rented now can
//    reach them — and jobs already past their deadline ask for nothing). When that is above
//    the measured capacity the backlog would miss deadlines and the fleet must grow;
//  - censoring: while the gateway's admission window is full (queued + in flight ≥ window) the
//    client holds jobs back, so what arrives is only a floor on demand: the fleet is sized for
//    at least its measured capacity × (1 + censored_step), and grows again every decision the
//    window stays full (capacity rises as the rentals are accepted).
// Hysteresis (demand_estimate.h's band) keeps the figure the fleet was last sized for while the
// new one stays within the noise of the window's count — except that a full window never
// holds the figure below its floor.
//
// core::decide then rents until expected capacity covers the figure and drops the dearest per
// proof (least efficient) proving instance when its paid proofs within the figure no longer
// earn surplus_keep_share of its price: idle capacity goes, one instance per decision, within
// the caps decide already applies (max $/hour, max instances, benchmarks at once).
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/blocklist.h"
#include "core/demand_estimate.h"
#include "core/demand_forecast.h"
#include "core/fleet.h"
#include "core/offer.h"
#include "core/policy.h"

namespace pf::core {

struct ScaleToDemandConfig {
  DemandEstimateConfig estimate;
  DemandForecastConfig forecast;
  bool use_forecast = true;
  double lead_s = 3600;           // a rental rented now proves for money about this much later
  double deadline_floor_s = 600;  // queued jobs due sooner are the present fleet's
  double censored_step = 0.25;    // full admission window: demand ≥ capacity × (1 + this)
  // The lasting part of the demand also counts the arrivals of this recent window where they
  // are higher than the trailing hour's (0: off).
  double current_window_s = 1800;
  // The rest (the backlog to drain, a deadline need the fleet meets) is gone once the queue is
  // worked off: with transient_backlog, a candidate's room beyond the lasting demand is valued
  // only over transient_room_h·e^(−setup/transient_room_h) hours (scoring.h). On since jobs that
  // can no longer be on time wait behind those that can (job_schedule.h): measured
  // (docs/decision-engine.md, "Transient backlog") it gains on both bundled /2 scenarios on
  // each of six seeds. Before that, a fleet it left short for an hour made every queued job
  // late, and it lost on demo-small-v2.
  bool transient_backlog = true;
  double transient_room_h = 1.0;
};

struct DemandDecision {
  double proofs_per_hour = 0;  // what decide() sizes the fleet for
  // The part of it that lasts: the arrivals (ahead, or of the last current_window_s where
  // higher), the deadline need the measured fleet cannot meet, the censoring floor — not the
  // backlog to drain, which is gone once the queue is worked off.
  double lasting_proofs_per_hour = 0;
  DemandEstimate recent;  // trailing arrivals and backlog drain (before hysteresis)
  std::optional<DemandForecast> forecast;
  double capacity = 0;       // measured proofs/hour of the proving fleet
  double deadline_rate = 0;  // capacity the queued jobs need to meet their deadlines
  bool would_miss = false;   // at the measured capacity some queued job misses its deadline
  bool censored = false;     // the admission window is full: demand is at least this
  bool held = false;         // the previous figure was kept (within the noise band)
  std::string reason;
};

// nullopt while too little has been watched (DemandEstimateConfig::min_observed_s).
// `capacity`: measured proofs/hour of the proving instances (measured_capacity below).
std::optional<DemandDecision> demand_to_serve(const QueueObservation& jobs,
                                              std::optional<double> previous, double capacity,
                                              const ScaleToDemandConfig& config);

// Proofs/hour each live proving instance delivers, as decide() measures it: its latest judged
// production window since acceptance, else its verdict's rate.
std::map<std::int64_t, double> measured_rates(const std::vector<InstanceRecord>& fleet,
                                              std::span<const Measurement> measurements,
                                              const WatchConfig& watch);

struct ScaledDecision {
  std::optional<DemandDecision> demand;  // nullopt: not enough watched; sized_for is the fallback
  std::optional<double> sized_for;       // the demand decide() was given
  std::vector<Action> actions;
};

// The one decision both shells make where jobs arrive: demand_to_serve on the observation, then
// core::decide with that demand. While nothing can be said yet (too little watched) the fleet
// stays sized for `previous`, or for `policy.demand_proofs_per_hour` when there is none (the
// simulator passes 0: rent nothing for demand it cannot see; the autopilot its configured
// demand).
ScaledDecision decide_for_jobs(const std::vector<InstanceRecord>& fleet,
                               const std::vector<Offer>& offers, const PolicyHistory& history,
                               const std::vector<BadHost>& bad_hosts, double now,
                               PolicyConfig policy, const QueueObservation& jobs,
                               std::optional<double> previous, const ScaleToDemandConfig& config);

// Owned copy of a queue observation, for shells that gather it from elsewhere (the autopilot
// from jobs::JobQueue). view() borrows from it.
struct QueueSnapshot {
  bool any_job = false;  // a job was ever submitted (else the configured demand applies)
  double now = 0;
  double observed_since = 0;
  std::vector<double> arrivals;
  std::vector<double> queued_deadlines;
  int queued = 0;
  int in_flight = 0;
  int admit_window = 0;
  QueueObservation view() const {
    return {now, observed_since, arrivals, queued, queued_deadlines, in_flight, admit_window};
  }
};

}  // namespace pf::core
