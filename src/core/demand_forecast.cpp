#include "core/demand_forecast.h"

#include <algorithm>
#include <cmath>

#include "core/text.h"

namespace pf::core {
namespace {

constexpr double kDayS = 24 * 3600;

double count_in(std::span<const double> arrivals, double from, double to) {
  return static_cast<double>(std::count_if(arrivals.begin(), arrivals.end(),
                                           [&](double t) { return t >= from && t < to; }));
}

struct Pattern {
  double rate = 0;
  int days = 0;
};

// The arrival rate around the time of day of `at` on the previous days, from what was seen in
// [observed_since, seen_until].
Pattern pattern_at(std::span<const double> arrivals, double observed_since, double seen_until,
                   double at, const DemandForecastConfig& cfg) {
  Pattern out;
  double count = 0;
  for (int d = 1; d <= cfg.history_days; ++d) {
    const double from = at - d * kDayS - cfg.bin_s / 2;
    const double to = from + cfg.bin_s;
    if (from < observed_since || to > seen_until) continue;  // not (fully) watched
    ++out.days;
    count += count_in(arrivals, from, to);
  }
  if (out.days > 0) out.rate = count / (out.days * cfg.bin_s / 3600);
  return out;
}

}  // namespace

std::optional<DemandForecast> forecast_demand(std::span<const double> arrivals,
                                              double observed_since, double now, double at,
                                              double trailing_rate,
                                              const DemandForecastConfig& cfg) {
  if (!(cfg.bin_s > 0) || cfg.history_days <= 0 || !(cfg.trailing_window_s > 0)) {
    return std::nullopt;
  }
  const Pattern ahead = pattern_at(arrivals, observed_since, now, at, cfg);
  if (ahead.days == 0) return std::nullopt;
  DemandForecast out;
  out.at = at;
  out.trailing_rate = trailing_rate;
  out.pattern_rate = ahead.rate;
  out.days = ahead.days;

  // Back-test: the last skill_checks windows that have fully arrived, each forecast from
  // `at − now` before it by the pattern and by the trailing rate.
  const double lead = std::max(0.0, at - now);
  const double bin_h = cfg.bin_s / 3600;
  const double window_h = cfg.trailing_window_s / 3600;
  double pattern_err = 0, trailing_err = 0;
  for (int j = 0; j < cfg.skill_checks; ++j) {
    const double centre = now - cfg.bin_s / 2 - j * cfg.bin_s;
    const double origin = centre - lead;
    if (origin - cfg.trailing_window_s < observed_since) break;
    const Pattern then = pattern_at(arrivals, observed_since, origin, centre, cfg);
    if (then.days == 0) break;
    const double actual =
        count_in(arrivals, centre - cfg.bin_s / 2, centre + cfg.bin_s / 2) / bin_h;
    const double trailing = count_in(arrivals, origin - cfg.trailing_window_s, origin) / window_h;
    pattern_err += std::abs(then.rate - actual);
    trailing_err += std::abs(trailing - actual);
    ++out.checks;
  }
  if (out.checks > 0) {
    out.pattern_error = pattern_err / out.checks;
    out.trailing_error = trailing_err / out.checks;
    const double p2 = out.pattern_error * out.pattern_error;
    const double t2 = out.trailing_error * out.trailing_error;
    out.weight = p2 + t2 > 0 ? t2 / (p2 + t2) : 0.5;
  }
  out.proofs_per_hour = out.weight * out.pattern_rate + (1 - out.weight) * trailing_rate;
  out.reason =
      "forecast " + fixed(out.proofs_per_hour, 0) + "/hr in " + fixed(lead / 60, 0) +
      " min: " + fixed(out.pattern_rate, 0) + "/hr at that time of day over " +
      std::to_string(out.days) + (out.days == 1 ? " day" : " days") + ", weight " +
      percent(out.weight) +
      (out.checks > 0 ? " (it missed by " + fixed(out.pattern_error, 0) + "/hr over the last " +
                            fixed(out.checks * bin_h, 0) + " h, the trailing rate by " +
                            fixed(out.trailing_error, 0) + "/hr)"
                      : " (not yet tested)") +
      ", " + fixed(trailing_rate, 0) + "/hr lately";
  return out;
}

}  // namespace pf::core
