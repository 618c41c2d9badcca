// The prover plan as JSON: what `proverfleet plan --json` prints and what the agent reports
// in its prover_started event (so the manager can keep it with the benchmark).
#pragma once

#include <nlohmann/json.hpp>

#include "core/planner.h"

namespace pf::agent {

// Keys: partitions, total_budget_gib, gpu_workers_per_device, synthesis_threads,
// gpu_threads, reasons, warmup_partitions, warmup_budget_gib, expected_peak_gib,
// usable_ram_gib, gpus, proofs_in_flight.
nlohmann::json plan_to_json(const core::ProverPlan& plan);

}  // namespace pf::agent
