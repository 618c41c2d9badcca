// Production windows, for the manager and the simulator alike: a proving instance is measured
// in consecutive windows of its production proofs (core::complete_production_windows); each
// complete window not yet recorded becomes a "production" run of the host, its rate interval
// at the acceptance config's z. The rate is the busy rate (core::estimate_busy_rate): time an
// instance waits idle for a job is not counted as slowness.
#pragma once

#include <vector>

#include "core/acceptance.h"
#include "core/fleet.h"

namespace pf::core {

struct ProductionRun {
  double start = 0;  // the window's start (agent clock)
  RateEstimate estimate;
};

// The windows completed since rec.production_windows were recorded, oldest first. The caller
// records each (core::make_bench_run(rec, "production", ...)) and adds their count to
// rec.production_windows.
std::vector<ProductionRun> new_production_windows(const InstanceRecord& rec,
                                                  const std::vector<ProofSample>& samples,
                                                  double window_s, double z);

}  // namespace pf::core
