#include "agent/plan_json.h"

namespace pf::agent {

nlohmann::json plan_to_json(const core::ProverPlan& p) {
  return {{"partitions", p.partitions},
          {"total_budget_gib", p.total_budget_gib},
          {"gpu_workers_per_device", p.gpu_workers_per_device},
          {"synthesis_threads", p.synthesis_threads},
          {"gpu_threads", p.gpu_threads},
          {"reasons", p.reasons},
          {"warmup_partitions", p.warmup_partitions},
          {"warmup_budget_gib", p.warmup_budget_gib},
          {"expected_peak_gib", p.expected_peak_gib},
          {"usable_ram_gib", p.usable_ram_gib},
          {"gpus", p.gpus},
          {"proofs_in_flight", p.proofs_in_flight}};
}

}  // namespace pf::agent
