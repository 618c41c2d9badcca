#include "core/demand_forecast.h"

#include <algorithm>

#include "core/text.h"

namespace pf::core {
namespace {

constexpr double kDayS = 24 * 3600;

}  // namespace

std::optional<DemandForecast> forecast_demand(std::span<const double> arrivals,
                                              double observed_since, double now, double at,
                                              double trailing_rate,
                                              const DemandForecastConfig& cfg) {
  if (!(cfg.bin_s > 0) || cfg.history_days <= 0) return std::nullopt;
  DemandForecast out;
  out.at = at;
  out.trailing_rate = trailing_rate;
  long long count = 0;
  for (int d = 1; d <= cfg.history_days; ++d) {
    const double from = at - d * kDayS - cfg.bin_s / 2;
    const double to = from + cfg.bin_s;
    if (from < observed_since || to > now) continue;  // not (fully) watched
    ++out.days;
    count += std::count_if(arrivals.begin(), arrivals.end(),
                           [&](double t) { return t >= from && t < to; });
  }
  if (out.days == 0) return std::nullopt;
  out.pattern_rate = static_cast<double>(count) / (out.days * cfg.bin_s / 3600);
  out.weight = cfg.days_for_half_weight > 0 ? out.days / (out.days + cfg.days_for_half_weight) : 1;
  out.proofs_per_hour = out.weight * out.pattern_rate + (1 - out.weight) * trailing_rate;
  out.reason = "forecast " + fixed(out.proofs_per_hour, 0) + "/hr in " + fixed((at - now) / 60, 0) +
               " min: " + fixed(out.pattern_rate, 0) + "/hr at that time of day over " +
               std::to_string(out.days) + (out.days == 1 ? " day" : " days") + " (weight " +
               percent(out.weight) + "), " + fixed(trailing_rate, 0) + "/hr lately";
  return out;
}

}  // namespace pf::core
