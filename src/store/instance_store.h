// The instances the manager rented, as rows, and what their agents report about them (events
// applied once by (instance, seq), proof samples). Part of the Store (store.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/fleet.h"
#include "store/transactions.h"

namespace pf::store {

// The instances in one state, with what they spent and proved (InstanceStore::instance_totals).
struct InstanceTotals {
  std::int64_t instances = 0;
  double spend_usd = 0;
  std::int64_t proofs_production = 0;
};

class InstanceStore : public virtual Transactions {
 public:
  ~InstanceStore() override = default;

  // --- instances ---------------------------------------------------------------------------
  // Inserts and returns the new id (record.id is ignored). deployment_id must be unique.
  virtual std::int64_t insert_instance(const core::InstanceRecord& record) = 0;
  // Replaces the row with record.id. Throws StoreError if it does not exist.
  virtual void update_instance(const core::InstanceRecord& record) = 0;
  // Writes only what agents report and what accrues with it: last_heartbeat_at, params_*,
  // prover_crashes, ooms, proofs_benchmark, proofs_production, gpu_util, peak_memory_gib,
  // plan_json, spend_usd (and its storage and bandwidth parts), billed_until, gpu_throttled and
  // bench_since. State, offer snapshot,
  // verdict and the rest of the row stay as stored. Agents report every few seconds; rewriting the
  // whole row (and its offer snapshot) each time was the manager's main cost. Throws StoreError if
  // the row does not exist.
  virtual void update_agent_progress(const core::InstanceRecord& record) = 0;
  virtual std::optional<core::InstanceRecord> instance(std::int64_t id) = 0;
  // The row as this store last read or wrote it: read from the database only the first time
  // (and after a rollback or forget_written_copies). For the agent path of the process that is
  // the only writer of instance rows — the leader: followers forward agent calls and no command
  // but serve writes them — so a heartbeat does not read back, under the Manager's lock, what
  // the last one wrote (on PostgreSQL a round trip each). The copy follows this store's own
  // update_instance and update_agent_progress; destroyed rows are not kept.
  virtual std::optional<core::InstanceRecord> instance_as_written(std::int64_t id) = 0;
  // Drops every copy instance_as_written and mark_agent_seq answer from: another process may
  // have written since (the Manager calls it when a leader's term begins).
  virtual void forget_written_copies() = 0;
  virtual std::optional<core::InstanceRecord> instance_by_deployment(const std::string& dep) = 0;
  virtual std::optional<core::InstanceRecord> instance_by_market_id(std::int64_t market_id) = 0;
  // The instance whose agent token hashes to `hash` (indexed: agents call on every heartbeat).
  virtual std::optional<core::InstanceRecord> instance_by_token_hash(const std::string& hash) = 0;
  // Ordered by id. include_destroyed=false returns only live rows.
  virtual std::vector<core::InstanceRecord> instances(bool include_destroyed) = 0;
  // Every rental of the offer's machine `machine_id`, destroyed ones included, ordered by id
  // (indexed: registration reads a machine's history, not the fleet's).
  virtual std::vector<core::InstanceRecord> instances_on_machine(std::int64_t machine_id) = 0;

  // --- hot reads: the history as the fleet summary and the dashboard need it, without reading
  // every row (their cost must not grow with the destroyed instances a fleet keeps) -----------
  // Instances, spend and production proofs by state over every row, read at once (all-time
  // totals never step back between two calls). States with no instance are absent.
  virtual std::map<core::InstanceState, InstanceTotals> instance_totals() = 0;
  // Destroyed rows that may count in a window starting at `since`: destroyed at or after it,
  // billed up to it or later, or without destroyed_at. Ordered by id.
  virtual std::vector<core::InstanceRecord> destroyed_instances_since(double since) = 0;

  // --- agent reports -------------------------------------------------------------------------
  // Records that the agent's event `seq` was applied. Returns false if it already was (the
  // caller then skips it): agent events are idempotent by (instance, seq). Answered from the
  // seqs this store read (once per instance) and recorded itself, the same one-writer rule as
  // instance_as_written; inside a transaction the insert may be held back to its end, and a seq
  // another process recorded meanwhile fails the transaction (the unique key) rather than
  // being applied twice.
  virtual bool mark_agent_seq(std::int64_t instance_id, std::int64_t seq) = 0;
  // A sample already recorded for (instance, seq) is kept as it is (mark_agent_seq is what
  // tells a repeat). May be held back to the transaction's end (SqlStore on PostgreSQL).
  virtual void insert_proof_sample(const core::ProofSample& sample) = 0;
  virtual std::vector<core::ProofSample> proof_samples(std::int64_t instance_id) = 0;
};

}  // namespace pf::store
