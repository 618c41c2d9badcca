// Benchmark acceptance: from post-warm-up proof completions, decide Accept / Reject / Continue
// against the instance's break-even rate. The manager and the simulator call this through
// `Acceptance`, so a better test (sequential, from the decision-engine work) drops in behind
// the same interface.
#pragma once

#include <memory>
#include <vector>

#include "core/fleet.h"

namespace pf::core {

struct AcceptanceConfig {
  int min_samples = 6;            // never decide on fewer measured proofs
  int max_samples = 20;           // decide by the point estimate once this many are in
  double max_seconds = 4 * 3600;  // time cap on the benchmark
  double z = 1.645;               // interval width (one-sided 95%)
};

struct BenchmarkInput {
  // Completions in the benchmark phase, in any order. Warm-up proofs are excluded by the
  // caller (the agent marks them); `since` is when the benchmark phase began, so the first
  // interval is measured from the end of warm-up.
  std::vector<ProofSample> samples;
  double since = 0;
  double now = 0;
  double break_even_rate = 0;
};

class Acceptance {
 public:
  virtual ~Acceptance() = default;
  virtual Verdict evaluate(const BenchmarkInput& input) const = 0;
  // The interval width its verdicts report, which production windows use too.
  virtual double interval_z() const { return AcceptanceConfig{}.z; }
};

// First rule: rate from inter-completion intervals with a normal interval on the mean;
// accept when the whole interval clears break-even, reject when it is all below, else wait
// until max_samples / max_seconds and decide on the point estimate.
class IntervalAcceptance final : public Acceptance {
 public:
  explicit IntervalAcceptance(AcceptanceConfig config) : config_(config) {}
  Verdict evaluate(const BenchmarkInput& input) const override;
  double interval_z() const override { return config_.z; }

 private:
  AcceptanceConfig config_;
};

// Proofs/hour with an interval from completion times: intervals between consecutive
// completions (the first from `since`), mean m, rate 3600/m.
struct RateEstimate {
  double rate = 0;
  double low = 0;
  double high = 0;
  int samples = 0;
};
RateEstimate estimate_rate(std::vector<ProofSample> samples, double since, double z);
// The rate an instance proves at while it has work: as estimate_rate, but an interval that is
// longer than the proof's own wall time (ProofSample::seconds, when reported) counts only that
// wall time. Where proofs are jobs (the gateway, scenario /2) an instance waits idle between
// jobs; completions then measure the work it was given, not what it can do, and an idle host
// would look slow (and dear per proof) to the production watch, the surplus step and the
// demand's measured capacity. Back to back (a benchmark, /1 production) the interval is at
// most the wall time, so nothing changes; with proofs pipelined the wall time is longer than
// the interval and the interval stands.
RateEstimate estimate_busy_rate(std::vector<ProofSample> samples, double since, double z);

}  // namespace pf::core
