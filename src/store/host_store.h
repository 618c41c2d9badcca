// What the manager learned about machines: benchmark runs, memory peaks and bad-host entries.
// Part of the Store (store.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/fleet.h"
#include "core/memory_model.h"
#include "store/transactions.h"

namespace pf::store {

class HostStore : public virtual Transactions {
 public:
  ~HostStore() override = default;

  // --- host history --------------------------------------------------------------------------
  virtual std::int64_t insert_bench_run(const core::BenchRun& run) = 0;
  // Every run on that host, oldest first. Runs are never overwritten.
  virtual std::vector<core::BenchRun> bench_runs(const core::HostKey& host) = 0;
  virtual std::vector<core::BenchRun> all_bench_runs() = 0;
  // The runs whose instance_id is `instance_id`, oldest first.
  virtual std::vector<core::BenchRun> instance_bench_runs(std::int64_t instance_id) = 0;

  // --- memory observations (core/memory_model.h: the model learned from agents' peaks) ----
  virtual void insert_memory_observation(const core::MemoryObservation& observation) = 0;
  // Observations on `machine_id` or on machines whose GPU is `gpu_name` (case-insensitive),
  // newest first, at most `limit` of them.
  virtual std::vector<core::MemoryObservation> memory_observations(std::int64_t machine_id,
                                                                   const std::string& gpu_name,
                                                                   std::size_t limit = 500) = 0;

  // --- bad hosts -----------------------------------------------------------------------------
  // Inserts or replaces the entry for (machine_id, source).
  virtual void put_bad_host(const core::BadHost& entry) = 0;
  virtual bool remove_bad_host(std::int64_t machine_id, const std::string& source) = 0;
  // All entries, expired ones included (callers filter with core::is_active).
  virtual std::vector<core::BadHost> bad_hosts() = 0;
};

}  // namespace pf::store
