// The probe/plan step: what the machine offers (memory, cores, GPUs, as probed) and every cap
// on the prover's plan for it: this instance's own OOM lesson (kept in agent.json across
// restarts), the operator's --partitions, the manager's settings and "replan:N" command, and
// the manager's memory model for the machine. The functions are pure; the supervisor calls
// them at start, after an OOM kill and on a re-plan.
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "agent/probe.h"
#include "core/planner.h"

namespace pf::agent {

// The machine as last probed. The main thread probes and re-probes; the reporter only asks
// whether there are GPUs for nvidia-smi to read.
struct MachineProbe {
  ProbeResult result;
  std::atomic<bool> has_gpus{false};
  void refresh(const ProbeOptions& options) {
    result = probe_machine(options);
    has_gpus = !result.gpus.empty();
  }
};

// One line for the log: usable memory, cores, GPUs and free disk, with where each came from.
std::string probe_summary(const ProbeResult& probe);

core::PlanInput plan_input(const ProbeResult& probe, bool pce_cached);

// The limits of a plan: the smallest of `first_cap` (an OOM lesson; nullopt: none) and every
// positive one of the others, with the per-partition memory raised to the manager's model
// (`machine_per_partition_gib`, 0: the planner's own).
struct PartitionCaps {
  std::optional<int> first_cap;
  std::optional<int> option;    // --partitions
  std::optional<int> settings;  // the manager's prover.partitions
  std::optional<int> command;   // the operator's "replan:N"
};
core::PlanLimits plan_limits(const PartitionCaps& caps, double machine_per_partition_gib);

// Proofs kept in flight: the operator's set_concurrency command, else --concurrency, else the
// manager's prover.concurrency, else the plan's (at least 1).
int proofs_in_flight(const core::ProverPlan& plan, std::optional<int> command,
                     std::optional<int> option, std::optional<int> settings);

// agent.json in the state dir: the partition cap this instance learned from an OOM kill, so a
// restarted agent does not repeat it.
class PartitionCapFile {
 public:
  explicit PartitionCapFile(std::string state_dir) : path_(std::move(state_dir) + "/agent.json") {}
  // Absent, torn or hostile: nullopt (the cap is learned again).
  std::optional<int> load() const;
  // Replaces the file atomically; the error text when it could not.
  std::optional<std::string> save(int cap) const;

 private:
  std::string path_;
};

}  // namespace pf::agent
