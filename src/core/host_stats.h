// Robust summaries of a host's measured runs. A single run can be far off (another of our
// instances shared the machine, the GPU throttled), so the estimate is a median, never a MAX,
// and a disturbed run never replaces clean ones.
#pragma once

#include <vector>

#include "core/fleet.h"

namespace pf::core {

// Summary of `runs`, which are taken to be runs on `host` (any order; sorted by `at` inside).
// - median and p10 (linear interpolation) over rates; runs marked contended or throttled are
//   left out of them when at least one clean run exists;
// - ewma over the same runs in time order, `alpha` being the weight of the newer run;
// - latest / last_at: the most recent run, whatever its flags; runs: every run given.
// Runs with a non-finite rate or time count in `runs` but feed no statistic.
// Throws std::invalid_argument unless 0 < alpha <= 1.
HostSummary summarize_host(const HostKey& host, std::vector<BenchRun> runs, double alpha = 0.3);

// One summary per HostKey present in `runs`, ordered by (machine_id, gpu_name, num_gpus).
std::vector<HostSummary> summarize_hosts(const std::vector<BenchRun>& runs, double alpha = 0.3);

}  // namespace pf::core
