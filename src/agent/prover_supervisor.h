// The prover's life on this machine: plan it (this instance's own OOM lesson first, else what
// the manager knows of the machine), start it, warm it up (a smaller first plan while cuzk
// has no PCE file yet), check its memory against the model, then let the proof slots run it
// until it stops, dies or is re-planned. After an OOM kill it re-plans smaller and remembers
// the cap; after a crash it restarts with a doubling pause, up to max_restarts in a row
// without a proof.
#pragma once

#include <functional>
#include <string>
#include <tl/expected.hpp>

#include "agent/agent.h"
#include "agent/agent_log.h"
#include "agent/agent_state.h"
#include "agent/machine_plan.h"
#include "agent/proof_slots.h"
#include "agent/prover.h"
#include "agent/registration.h"
#include "agent/reporter.h"

namespace pf::agent {

class ProverSupervisor {
 public:
  struct Hooks {
    std::function<void(const std::string& phase)> set_phase;
    std::function<bool(double sim_seconds)> pause;  // false: a stop came
  };
  // Every reference must outlive this object.
  ProverSupervisor(const AgentOptions& options, const ManagerTerms& terms, AgentState& state,
                   MachineProbe& probe, Prover& prover, ProofSlots& slots, Reporter& reporter,
                   AgentLog& log, Hooks hooks)
      : o_(options),
        terms_(terms),
        state_(state),
        probe_(probe),
        prover_(prover),
        slots_(slots),
        reporter_(reporter),
        log_(log),
        hooks_(std::move(hooks)),
        cap_file_(options.state_dir) {}

  // Runs the prover until a stop; an error when it cannot go on.
  tl::expected<void, std::string> run();

 private:
  core::PlanInput plan_input() const;
  core::PlanLimits plan_limits(std::optional<int> oom_cap);
  // After the prover died: an OOM re-plans smaller, anything else restarts it. An error when
  // nothing more can be done.
  tl::expected<void, std::string> after_death(const ProofOutcome& outcome,
                                              const ProverHealth& health, int& crash_streak);
  // The memory_check event: the plan's modelled peak against the one observed.
  void report_memory_check(const core::ProverPlan& plan);
  // The plan as reported to the manager (prover_started, replan), with "proof_kinds".
  nlohmann::json reported_plan(const core::ProverPlan& plan) const;

  const AgentOptions& o_;
  const ManagerTerms& terms_;
  AgentState& state_;
  MachineProbe& probe_;
  Prover& prover_;
  ProofSlots& slots_;
  Reporter& reporter_;
  AgentLog& log_;
  Hooks hooks_;
  PartitionCapFile cap_file_;
};

}  // namespace pf::agent
