// The benchmark's evaluation, for the manager and the simulator alike: the acceptance test's
// input built from the instance's record and samples, and its verdict turned into what the
// caller does (keep waiting; accept → proving; reject → close with cause Rejected; either
// verdict is a benchmark run for the host history).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/acceptance.h"
#include "core/close_cause.h"
#include "core/fleet.h"

namespace pf::core {

// The test's input: the benchmark-phase samples among `samples`, since rec.bench_since (the
// first of them when unknown), and the elapsed time from the caller's clock since the record
// entered benchmarking (agent timestamps measure intervals; the cap reads our own clock).
BenchmarkInput benchmark_input(const InstanceRecord& rec, const std::vector<ProofSample>& samples,
                               double now, double break_even_rate);

struct BenchmarkStep {
  Verdict verdict;
  // Accept or reject: the verdict is a benchmark run of the host (core::make_bench_run with
  // core::estimate_of(verdict)).
  bool decided = false;
  bool accept = false;            // → proving, with verdict.reason
  std::optional<Closing> reject;  // → close (core::close_instance)
};

// nullopt when there is nothing to judge yet (no benchmark sample).
std::optional<BenchmarkStep> evaluate_benchmark(const InstanceRecord& rec,
                                                const std::vector<ProofSample>& samples, double now,
                                                double break_even_rate,
                                                const Acceptance& acceptance);

}  // namespace pf::core
