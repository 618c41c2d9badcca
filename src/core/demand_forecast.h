// Demand ahead from the daily pattern of history (issue 12 item 5). Proof work follows the
// operator's business day (sealing batches, deal flow), so the jobs that arrived at this time of
// day on the previous days say something about the next hour that the trailing rate cannot:
// a rental rented now proves only after its setup (boot, parameters, warm-up, benchmark: about
// an hour), so the fleet must be sized for the demand then, not now.
//
// The forecast for time `at` is the arrival rate in a window of `bin_s` around the same time of
// day on each of the previous `history_days` days that were fully watched (the pattern),
// blended with the trailing rate by how well each has predicted lately: the pattern is
// back-tested on the last `skill_checks` windows of `bin_s` — for each, what the pattern (from
// the days before it) and the trailing rate (the `trailing_window_s` before it, `at − now`
// ahead) would have forecast, against what arrived — and weighted by inverse squared error:
// weight = e_trailing² ÷ (e_trailing² + e_pattern²). A pattern that has not yet been tested
// gets no weight; one that predicted as well as the trailing rate gets half; a day that broke
// the pattern (an outage, a holiday) takes its weight away within a few hours. Pure: the
// manager and the simulator pass their own arrivals and `now`.
#pragma once

#include <optional>
#include <span>
#include <string>

namespace pf::core {

struct DemandForecastConfig {
  int history_days = 7;             // same time of day on up to this many previous days
  double bin_s = 3600;              // window around that time of day
  int skill_checks = 6;             // past windows the pattern is back-tested on
  double trailing_window_s = 3600;  // the trailing rate's window (demand_estimate's window_s)
};

struct DemandForecast {
  double at = 0;               // epoch s the forecast is for
  double pattern_rate = 0;     // proofs/hour around this time of day on the days seen
  int days = 0;                // previous days whose window was fully watched
  int checks = 0;              // past windows it was tested on
  double pattern_error = 0;    // mean absolute error there, proofs/hour
  double trailing_error = 0;   // the trailing rate's, same windows
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
