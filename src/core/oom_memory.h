// What an OOM teaches about a machine. The planner sizes the prover from a memory model
// (70 + 14·p GiB); a machine's real peak can be a few GiB per partition above it, so a careful
// plan may still be killed for memory. The agent re-plans smaller at once (plan_after_oom); this
// carries the lesson to the next rental of the same machine, which would otherwise start at the
// same too-large plan, be killed again at the end of its warm-up and lose those minutes again.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "core/fleet.h"
#include "core/planner.h"

namespace pf::core {

// Records that `rec`'s prover was killed for memory at `partitions` (keeps the smallest such
// plan). False, record unchanged, for a count no plan makes (not in 1..kMaxPlanPartitions): the
// agent's report is outside input.
bool record_oom(InstanceRecord& rec, std::int64_t partitions);

// Per machine: the smallest plan (partitions) any of our rentals there was killed for memory at
// (records with oom_partitions > 0; destroyed ones included). Machines without an OOM are absent.
std::map<std::int64_t, int> oom_partitions_by_machine(const std::vector<InstanceRecord>& fleet);

// The first plan for a new rental on a machine whose rental was killed for memory at
// `oom_partitions` (0: none, the ordinary plan): plan_after_oom's step below it, so the machine
// is not killed at the same plan twice. An error when it was killed at a single partition.
tl::expected<ProverPlan, std::string> plan_for_machine(const PlanInput& input,
                                                       const PlanLimits& limits,
                                                       int oom_partitions);

}  // namespace pf::core
