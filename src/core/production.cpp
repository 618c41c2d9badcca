#include "core/production.h"

#include <algorithm>
#include <cmath>

#include "core/policy.h"

namespace pf::core {
namespace {

// Whether complete_production_windows would return more than `recorded` windows, without sorting
// or binning: called on every production proof with all of the instance's samples, the full
// computation made a rental's bookkeeping quadratic (a third of `sim`'s time on a 72 h scenario).
// The count is the latest proof's window index from the origin (the earliest proof's start); when
// several proofs share the earliest end, whichever the sort puts first sets the origin, so both
// extremes are tried and only a "no" from both is trusted.
bool closes_a_window(const std::vector<ProofSample>& samples, double window_s, int recorded) {
  if (!(window_s > 0)) return false;
  bool any = false;
  double earliest = 0, latest = 0, earliest_start_lo = 0, earliest_start_hi = 0;
  for (const auto& s : samples) {
    if (s.phase != ProofPhase::Production) continue;
    const double start = s.at - s.seconds;
    if (!any || s.at < earliest) {
      earliest = s.at;
      earliest_start_lo = earliest_start_hi = start;
    } else if (s.at == earliest) {
      earliest_start_lo = std::min(earliest_start_lo, start);
      earliest_start_hi = std::max(earliest_start_hi, start);
    }
    latest = any ? std::max(latest, s.at) : s.at;
    any = true;
  }
  if (!any) return false;
  const auto complete = [&](double origin) {
    return std::floor(std::max(0.0, latest - origin) / window_s);
  };
  const double recorded_windows = std::max(0, recorded);
  return complete(earliest_start_lo) > recorded_windows ||
         complete(earliest_start_hi) > recorded_windows;
}

}  // namespace

std::vector<ProductionRun> new_production_windows(const InstanceRecord& rec,
                                                  const std::vector<ProofSample>& samples,
                                                  double window_s, double z) {
  std::vector<ProductionRun> out;
  if (!closes_a_window(samples, window_s, rec.production_windows)) return out;
  const auto windows = complete_production_windows(samples, window_s);
  for (std::size_t i = static_cast<std::size_t>(std::max(0, rec.production_windows));
       i < windows.size(); ++i) {
    out.push_back({windows[i].start, estimate_busy_rate(windows[i].samples, windows[i].start, z)});
  }
  return out;
}

}  // namespace pf::core
