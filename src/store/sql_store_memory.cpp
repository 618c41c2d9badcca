// SqlStore's memory observations (issue 13): the `memory_observations` table, what agents saw
// of the prover's memory (core/memory_model.h learns the per-partition figure from it).
#include <algorithm>
#include <limits>

#include "store/sql_store.h"
#include "store/sql_store_detail.h"

namespace pf::store {

using sql::Statement;

void SqlStore::insert_memory_observation(const core::MemoryObservation& o) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_,
              "INSERT INTO memory_observations (instance_id, machine_id, gpu_name, num_gpus, at, "
              "partitions, observed_peak_gib, model_peak_gib, usable_ram_gib, oom) VALUES "
              "(:instance_id, :machine_id, :gpu_name, :num_gpus, :at, :partitions, "
              ":observed_peak_gib, :model_peak_gib, :usable_ram_gib, :oom)",
              "inserting memory observation of instance " + std::to_string(o.instance_id));
  s.bind_int(":instance_id", o.instance_id);
  s.bind_int(":machine_id", o.machine_id);
  s.bind_text(":gpu_name", o.gpu_name);
  s.bind_int(":num_gpus", o.num_gpus);
  s.bind_real(":at", o.at);
  s.bind_int(":partitions", o.partitions);
  s.bind_real(":observed_peak_gib", o.observed_peak_gib);
  s.bind_real(":model_peak_gib", o.model_peak_gib);
  s.bind_real(":usable_ram_gib", o.usable_ram_gib);
  s.bind_bool(":oom", o.oom);
  s.run();
}

std::vector<core::MemoryObservation> SqlStore::memory_observations(std::int64_t machine_id,
                                                                   const std::string& gpu_name,
                                                                   std::size_t limit) {
  std::lock_guard lock(mutex_);
  Statement s(
      *conn_,
      "SELECT * FROM memory_observations WHERE machine_id = :machine_id OR lower(gpu_name) = "
      "lower(:gpu_name) ORDER BY at DESC, id DESC LIMIT :limit",
      "reading memory observations of machine " + std::to_string(machine_id));
  s.bind_int(":machine_id", machine_id);
  s.bind_text(":gpu_name", gpu_name);
  s.bind_int(":limit", static_cast<std::int64_t>(
                           std::min<std::size_t>(limit, std::numeric_limits<std::int32_t>::max())));
  std::vector<core::MemoryObservation> out;
  while (s.next()) {
    core::MemoryObservation o;
    o.instance_id = s.integer("instance_id");
    o.machine_id = s.integer("machine_id");
    o.gpu_name = s.text("gpu_name");
    o.num_gpus = s.int32("num_gpus");
    o.at = s.real("at");
    o.partitions = s.int32("partitions");
    o.observed_peak_gib = s.real("observed_peak_gib");
    o.model_peak_gib = s.real("model_peak_gib");
    o.usable_ram_gib = s.real("usable_ram_gib");
    o.oom = s.integer("oom") != 0;
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace pf::store
