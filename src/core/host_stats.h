// Robust summaries of a host's measured runs. A single run can be far off (another of our
// instances shared the machine, the GPU throttled), so the estimate is a median, never a MAX,
// and a disturbed run never replaces clean ones.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
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

// "Did this machine fail before?": what our rentals of one machine did, for the offers table.
// Counts are over the whole machine (any GPU slice); the rate is the offer's slice's median.
struct MachineHistory {
  std::int64_t machine_id = 0;
  int rentals = 0;  // our instances on the machine, any state
  int runs = 0;     // measured runs (benchmark verdicts and production windows) of the slice
  // Median of the slice's runs (clean ones when any is clean; never the MAX). nullopt: none.
  std::optional<double> median_rate;
  // The latest rental's verdict ("accept", "reject") or, for one closed without a verdict, its
  // close cause ("deadline", "market_exited", ...); "" when no rental got that far.
  std::string last_verdict;
  std::string last_verdict_reason;
  double last_at = 0;  // when the latest rental was created
  int ooms = 0;        // out-of-memory kills over all rentals
  int crashes = 0;     // prover crashes over all rentals
  // The entry that applies now (an operator entry before an automatic one), if any.
  std::optional<BadHost> bad_host;
  bool known() const { return rentals > 0 || bad_host.has_value(); }
};

// The history of `host.machine_id` from the fleet (any order, destroyed rows included), every
// measured run and the bad-host list, at `now`.
MachineHistory machine_history(const HostKey& host, std::span<const InstanceRecord> fleet,
                               std::span<const BenchRun> runs, std::span<const BadHost> bad_hosts,
                               double now);

}  // namespace pf::core
