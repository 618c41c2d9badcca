// Running proofs on a started prover. A session keeps the plan's proofs in flight, one worker
// thread a slot, until a stop, a re-plan or the prover's death; while the manager has work,
// the slots take its jobs (work_loop.h) instead of the benchmark input. A set_concurrency
// command grows the slots in place. Every outcome is counted in the shared state and reported
// as an event; too many failures in a row end the session as a death.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "agent/agent_log.h"
#include "agent/agent_state.h"
#include "agent/prover.h"
#include "agent/reporter.h"
#include "agent/work_loop.h"
#include "core/planner.h"

namespace pf::agent {

// Proofs failed in a row (the prover alive) before the prover counts as dead.
inline constexpr int kFailedProofsBeforeRestart = 5;

struct SessionEnd {
  enum class Why { Stop, Replan, Died } why = Why::Stop;
  ProofOutcome outcome;  // Died: the failure that ended it
  ProverHealth health;   // Died: read before the prover was stopped
};

class ProofSlots {
 public:
  struct Config {
    int max_samples = 0;                      // the benchmark's cap: past it the phase says proving
    std::optional<int> concurrency;           // --concurrency
    std::optional<int> settings_concurrency;  // the manager's prover.concurrency
  };
  // Every reference must outlive this object; `work` may be null (no job queue).
  ProofSlots(AgentState& state, Prover& prover, WorkLoop* work, Reporter& reporter, AgentLog& log,
             Config config)
      : state_(state),
        prover_(prover),
        work_(work),
        reporter_(reporter),
        log_(log),
        config_(config) {}

  // Keeps the planned proofs in flight until a stop, a re-plan or the prover's death; the
  // prover is stopped when it returns.
  SessionEnd run_session(const core::ProverPlan& plan);

  // One proof, counted in flight while it runs.
  ProofOutcome run_proof(ProofJob job);
  void record_completed(const ProofOutcome& out, bool warmup);
  // True when too many proofs failed in a row: the prover is unusable as it is.
  bool record_failed(const ProofOutcome& out);
  // Keeps the prover's highest memory reading for heartbeats.
  void note_peak();
  // Waits (briefly) for a failing prover to finish dying, so its exit status says why.
  ProverHealth settled_health();

 private:
  AgentState& state_;
  Prover& prover_;
  WorkLoop* work_;
  Reporter& reporter_;
  AgentLog& log_;
  Config config_;
  std::atomic<std::int64_t> next_proof_index_{1};
};

}  // namespace pf::agent
