#include "core/production.h"

#include <algorithm>

#include "core/policy.h"

namespace pf::core {

std::vector<ProductionRun> new_production_windows(const InstanceRecord& rec,
                                                  const std::vector<ProofSample>& samples,
                                                  double window_s, double z) {
  std::vector<ProductionRun> out;
  const auto windows = complete_production_windows(samples, window_s);
  for (std::size_t i = static_cast<std::size_t>(std::max(0, rec.production_windows));
       i < windows.size(); ++i) {
    out.push_back({windows[i].start, estimate_busy_rate(windows[i].samples, windows[i].start, z)});
  }
  return out;
}

}  // namespace pf::core
