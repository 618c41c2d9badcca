#include "manager/memory_observations.h"

#include <cmath>

#include "core/planner.h"

namespace pf::manager {
namespace {

using nlohmann::json;

// A GiB figure from the report: a finite number in [0, the planner's largest machine], else 0.
double gib(const json& data, const char* key) {
  const auto it = data.find(key);
  if (it == data.end() || !it->is_number()) return 0;
  const double v = it->get<double>();
  return std::isfinite(v) && v >= 0 && v <= core::kMaxPlanRamGib ? v : 0;
}

}  // namespace

std::optional<core::MemoryObservation> memory_observation(const core::InstanceRecord& rec,
                                                          const std::string& type, const json& data,
                                                          double at) {
  if (type != "memory_check" && type != "oom") return std::nullopt;
  if (!data.is_object()) return std::nullopt;
  const auto p = data.find("partitions");
  if (p == data.end() || !p->is_number_integer()) return std::nullopt;
  const auto partitions = p->get<std::int64_t>();
  if (partitions < 1 || partitions > core::kMaxPlanPartitions) return std::nullopt;
  core::MemoryObservation o;
  o.instance_id = rec.id;
  o.machine_id = rec.offer.machine_id;
  o.gpu_name = rec.offer.gpu_name;
  o.num_gpus = rec.offer.num_gpus;
  o.at = at;
  o.partitions = static_cast<int>(partitions);
  o.observed_peak_gib = gib(data, "observed_peak_gib");
  o.model_peak_gib = gib(data, "model_peak_gib");
  o.usable_ram_gib = gib(data, "usable_ram_gib");
  o.oom = type == "oom";
  // A check without a reading teaches nothing; an OOM teaches its limit.
  if (!o.oom && o.observed_peak_gib <= 0) return std::nullopt;
  if (o.oom && o.observed_peak_gib <= 0 && o.usable_ram_gib <= 0) return std::nullopt;
  return o;
}

json memory_model_json(const core::LearnedMemory& learned) {
  return {{"base_gib", learned.model.base_gib},
          {"per_partition_gib", learned.model.per_partition_gib},
          {"source", learned.source},
          {"observations", learned.observations},
          {"reason", learned.reason}};
}

}  // namespace pf::manager
