// One simulated rental's lifecycle as the engine drives it: the core steps the manager runs
// (core/proof_flow.h, core/benchmark_step.h, core/production.h, core/close.h, destroy checks
// from core/lifecycle.h), on the simulator's single clock, with the samples they read kept
// here instead of in a store. The engine owns the physics (when proofs complete, what the
// market says) and its bookkeeping; everything the lifecycle decides comes from this class,
// so the parity test (tests/unit/lifecycle_parity_test.cpp) can drive it step by step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/acceptance.h"
#include "core/bench_run.h"
#include "core/benchmark_step.h"
#include "core/close.h"
#include "core/fleet.h"
#include "core/lifecycle.h"
#include "core/proof_flow.h"

namespace pf::sim {

struct RentalSettings {
  core::LifecycleConfig lifecycle;
  const core::Acceptance* acceptance = nullptr;  // nullptr: the policy proves without a test
  double break_even_rate = 0;                    // the instance's (core/break_even.h)
  double production_window_s = 3600;
};

// What one completed proof did.
struct ProofOutcome {
  core::ProofSample sample;
  core::ProofStep step;
  // The acceptance test ran after this proof: its verdict and what it led to.
  std::optional<core::BenchmarkStep> benchmark;
  std::optional<core::BenchRun> benchmark_run;  // a decided verdict, for the host history
  std::vector<core::BenchRun> production_runs;  // windows this proof completed
  bool accepted = false;                        // the record moved to proving
};

class RentalLifecycle {
 public:
  explicit RentalLifecycle(RentalSettings settings) : settings_(std::move(settings)) {}

  // A move the physics makes (booting, registered, fetching parameters, prover started).
  std::optional<std::string> transition(core::InstanceRecord& rec, core::InstanceState to,
                                        double now, const std::string& reason) const;

  // A proof completed at `now` after `seconds`; `marked_warmup` as the agent marks it.
  // `bench` and `window` describe the runs it may complete (contention, throttling). An
  // accepting verdict (or a policy without a test) moves the record to proving here; a
  // rejecting one is returned in `benchmark->reject` for the caller's close.
  ProofOutcome proof(core::InstanceRecord& rec, bool marked_warmup, double now, double seconds,
                     core::RunContext bench, core::RunContext window);

  // The acceptance test's time rules between proofs (the manager's heartbeat re-evaluation).
  // Same effects as in proof(); nullopt when nothing was judged.
  std::optional<core::BenchmarkStep> evaluate(core::InstanceRecord& rec, double now,
                                              core::RunContext bench,
                                              std::optional<core::BenchRun>& run, bool& accepted);

  // Whether the lifecycle closes the rental now (core::destroy_reason, hearing everything).
  std::optional<core::Closing> check(const core::InstanceRecord& rec, double now) const;

  // Closes the record (core::close_instance); the caller confirms the destroy.
  std::optional<core::CloseStep> close(core::InstanceRecord& rec, const core::Closing& closing,
                                       double now, int our_others_on_machine,
                                       const std::optional<core::Strike>& asked) const;

  const std::vector<core::ProofSample>& benchmark_samples() const { return bench_samples_; }

 private:
  RentalSettings settings_;
  std::int64_t seq_ = 0;
  std::vector<core::ProofSample> bench_samples_;
  std::vector<core::ProofSample> production_samples_;
};

}  // namespace pf::sim
