// Demand ahead from the daily pattern of history (issue 12 item 5). Proof work follows the
// operator's business day (sealing batches, deal flow), so the jobs that arrived at this time of
// day on the previous days say something about the next hour that the trailing rate cannot:
// a rental rented now proves only after its setup (boot, parameters, warm-up, benchmark: about
// an hour), so the fleet must be sized for the demand then, not now.
//
// The forecast for time `at` is the arrival rate in a window of `bin_s` around the same time of
// day on each of the previous `history_days` days that were fully watched, blended with the
// trailing rate: weight = days / (days + days_for_half_weight) on the pattern, the rest on the
// trailing rate — one day of history counts half, a week nearly all, and no history leaves the
// trailing rate alone. Pure: the manager and the simulator pass their own arrivals and `now`.
#pragma once

#include <optional>
#include <span>
#include <string>

namespace pf::core {

struct DemandForecastConfig {
  int history_days = 7;             // same time of day on up to this many previous days
  double bin_s = 3600;              // window around that time of day
  double days_for_half_weight = 1;  // pattern weight = days / (days + this); ≤ 0: pattern only
};

struct DemandForecast {
  double at = 0;               // epoch s the forecast is for
  double pattern_rate = 0;     // proofs/hour around this time of day on the days seen
  int days = 0;                // previous days whose window was fully watched
  double weight = 0;           // of the pattern in the blend
  double trailing_rate = 0;    // proofs/hour lately (the caller's)
  double proofs_per_hour = 0;  // weight · pattern + (1 − weight) · trailing
  std::string reason;
};

// nullopt when no previous day was watched around this time of day. `arrivals`: epoch seconds,
// any order, at least the last history_days days (older ones are ignored); `observed_since`:
// since when arrivals have been recorded; only arrivals up to `now` count.
std::optional<DemandForecast> forecast_demand(std::span<const double> arrivals,
                                              double observed_since, double now, double at,
                                              double trailing_rate,
                                              const DemandForecastConfig& config);

}  // namespace pf::core
