// A completed proof as the lifecycle counts it, for the manager (agent events) and the
// simulator (its prover) alike: what kind of sample it is, the counters it bumps, and the phase
// it advances the instance to.
//
//   marked warm-up by the agent             → Warmup; before the benchmark it moves the
//                                             benchmark clock's start to its completion
//   measured, instance proving              → Production
//   measured, no benchmark wanted           → Production, and the instance is accepted unmeasured
//   measured, instance before benchmarking  → Benchmark; the instance enters benchmarking (its
//                                             clock starts at the last warm-up completion, or
//                                             at this proof without one)
//   measured otherwise                      → Benchmark
#pragma once

#include <optional>
#include <string>

#include "core/fleet.h"
#include "core/lifecycle.h"

namespace pf::core {

struct ProofInput {
  bool marked_warmup = false;  // the agent's phase was "warmup"
  double at = 0;               // completion (agent clock)
  double now = 0;              // the caller's clock, for the transition
  // False for a policy that proves for money without a benchmark (the simulator's clairvoyant).
  bool benchmark = true;
  double break_even_rate = 0;  // the instance's, for the benchmarking deadline
};

struct ProofStep {
  ProofPhase phase = ProofPhase::Benchmark;
  // The transition to benchmarking this proof made (its audit message), if it made one.
  std::optional<std::string> entered_benchmark;
  // No benchmark wanted: the caller accepts the instance now (it moves to proving).
  bool accept_unmeasured = false;
  // A benchmark sample while benchmarking: the acceptance test runs (core/benchmark_step.h).
  bool evaluate = false;
};

// Classifies the proof and applies it to `rec`: counters, bench_since, the move to
// benchmarking.
ProofStep record_proof(InstanceRecord& rec, const ProofInput& input, const LifecycleConfig& cfg);

}  // namespace pf::core
