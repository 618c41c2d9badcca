// Demand from observed work: where proofs arrive as jobs (the gateway's queue; the simulator's
// /2 scenarios) nobody states a demand rate, so the fleet sizes itself from what the queue
// shows: the jobs that arrived lately and how many still wait. The estimate is the demand
// (proofs/hour) core::decide rents and drops against. Pure: the manager and the simulator call
// it with their own observation and the estimate they acted on last.
//
// Why these parts:
//  - a trailing-window arrival rate follows the market (arrivals are Poisson, so one decision's
//    few arrivals say little; a window of an hour averages the noise but still follows a
//    change within the hour);
//  - a backlog (jobs waiting beyond what the window's rate explains) is work already owed: it
//    adds the rate that would drain it within `drain_within_s`;
//  - hysteresis: the estimate only moves when the new figure leaves a band around the one the
//    fleet was sized for (Poisson noise plus a relative share), so the fleet does not rent and
//    drop on noise — each rental pays its setup again, while an instance kept idle a little
//    while costs only its hourly price.
#pragma once

#include <optional>
#include <span>
#include <string>

namespace pf::core {

struct QueueObservation {
  double now = 0;                    // epoch seconds
  double observed_since = 0;         // since when arrivals have been watched (start of the record)
  std::span<const double> arrivals;  // arrival times (epoch s) of recent jobs, any order; those
                                     // outside [now − window, now] are ignored
  int queued = 0;                    // jobs waiting for a prover now
  // What scale_to_demand.h reads beyond the estimate (defaults: unknown, never censored).
  std::span<const double> queued_deadlines = {};  // deadline_at (epoch s) of each queued job
  int in_flight = 0;                              // jobs held by instances now
  // The gateway's admission window (queued + in flight at which the client holds back,
  // design §11); 0 = unbounded: what arrives is all the demand there is.
  int admit_window = 0;
};

struct DemandEstimateConfig {
  double window_s = 3600;        // trailing window of the arrival rate
  double min_observed_s = 300;   // below this much watching, no estimate yet (nullopt)
  double drain_within_s = 7200;  // a backlog is worth the rate that drains it within this
  // Hysteresis band around the previous estimate: z Poisson standard deviations of the
  // window's count, and at least this share of the previous estimate.
  double band_z = 2.0;
  double band_share = 0.1;
};

struct DemandEstimate {
  double arrival_rate = 0;     // proofs/hour over the trailing window
  double backlog_rate = 0;     // proofs/hour that drain the backlog within drain_within_s
  double proofs_per_hour = 0;  // the demand to size the fleet for (after hysteresis)
  bool held = false;           // the previous estimate was kept (the new one is within the band)
  std::string reason;
};

// The hysteresis band around `previous` for a trailing window of `window_s`: z Poisson standard
// deviations of the window's count as a rate, and at least band_share of previous.
double demand_band(double previous, double window_s, const DemandEstimateConfig& config);

// nullopt while too little has been watched to say anything (the caller then keeps whatever it
// used before, or rents nothing for demand it cannot see). `previous`: the demand the fleet was
// last sized for.
std::optional<DemandEstimate> estimate_demand(const QueueObservation& observation,
                                              std::optional<double> previous,
                                              const DemandEstimateConfig& config);

}  // namespace pf::core
