#include "core/demand_estimate.h"

#include <algorithm>
#include <cmath>

#include "core/text.h"

namespace pf::core {

double demand_band(double previous, double window_s, const DemandEstimateConfig& cfg) {
  const double window_h = window_s / 3600;
  if (!(window_h > 0)) return cfg.band_share * previous;
  // Poisson: the window's count has standard deviation √(count); as a rate, √(count)/window.
  const double noise = cfg.band_z * std::sqrt(std::max(1.0, previous * window_h)) / window_h;
  return std::max(noise, cfg.band_share * previous);
}

std::optional<DemandEstimate> estimate_demand(const QueueObservation& obs,
                                              std::optional<double> previous,
                                              const DemandEstimateConfig& cfg) {
  const double watched_s = obs.now - obs.observed_since;
  if (!(watched_s >= cfg.min_observed_s) || !(cfg.window_s > 0)) return std::nullopt;
  // The window cannot reach back before watching began.
  const double window_s = std::min(cfg.window_s, watched_s);
  const double from = obs.now - window_s;
  const auto count = std::count_if(obs.arrivals.begin(), obs.arrivals.end(),
                                   [&](double t) { return t > from && t <= obs.now; });
  const double window_h = window_s / 3600;
  DemandEstimate out;
  out.arrival_rate = static_cast<double>(count) / window_h;
  if (obs.queued > 0 && cfg.drain_within_s > 0) {
    out.backlog_rate = obs.queued / (cfg.drain_within_s / 3600);
  }
  const double fresh = out.arrival_rate + out.backlog_rate;
  out.proofs_per_hour = fresh;
  const std::string seen = std::to_string(count) + " jobs in the last " + fixed(window_s / 60, 0) +
                           " min (" + fixed(out.arrival_rate, 0) + "/hr), " +
                           std::to_string(obs.queued) + " queued (+" + fixed(out.backlog_rate, 0) +
                           "/hr to drain)";
  if (previous) {
    const double band = demand_band(*previous, window_s, cfg);
    if (std::abs(fresh - *previous) <= band) {
      out.proofs_per_hour = *previous;
      out.held = true;
      out.reason = "demand held at " + fixed(*previous, 0) + "/hr: " + seen + " is within ±" +
                   fixed(band, 0) + "/hr of it";
      return out;
    }
  }
  out.reason = "demand " + fixed(fresh, 0) + "/hr: " + seen;
  return out;
}

}  // namespace pf::core
