#include "core/oom_memory.h"

namespace pf::core {

bool record_oom(InstanceRecord& rec, std::int64_t partitions) {
  if (partitions <= 0 || partitions > kMaxPlanPartitions) return false;
  if (rec.oom_partitions == 0 || partitions < rec.oom_partitions) {
    rec.oom_partitions = static_cast<int>(partitions);
  }
  return true;
}

std::map<std::int64_t, int> oom_partitions_by_machine(const std::vector<InstanceRecord>& fleet) {
  std::map<std::int64_t, int> out;
  for (const auto& rec : fleet) {
    if (rec.oom_partitions <= 0) continue;
    auto [it, fresh] = out.try_emplace(rec.offer.machine_id, rec.oom_partitions);
    if (!fresh && rec.oom_partitions < it->second) it->second = rec.oom_partitions;
  }
  return out;
}

tl::expected<ProverPlan, std::string> plan_for_machine(const PlanInput& input,
                                                       const PlanLimits& limits,
                                                       int oom_partitions) {
  if (oom_partitions <= 0) return plan_prover(input, limits);
  auto plan = plan_after_oom(input, limits, oom_partitions);
  if (plan) {
    plan->reasons.front() = "planned below " + std::to_string(oom_partitions) +
                            " partitions: an earlier rental of this machine was killed for memory "
                            "there";
  }
  return plan;
}

}  // namespace pf::core
