// The Store: every fact the manager must not lose. The manager writes an action's intent here
// before it acts, so a crash at any point leaves a record to resume or reconcile from.
// Implementation: SqlStore (src/store/sql_store.h), on SQLite or PostgreSQL. Failures throw
// StoreError.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/fleet.h"
#include "core/job.h"
#include "core/leader_lease.h"
#include "core/memory_model.h"
#include "store/confirm.h"

namespace pf::store {

// Chunks (agent log pushes) kept per instance at most, whatever their size.
inline constexpr std::size_t kMaxAgentLogChunks = 1024;

// The instances in one state, with what they spent and proved (Store::instance_totals).
struct InstanceTotals {
  std::int64_t instances = 0;
  double spend_usd = 0;
  std::int64_t proofs_production = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  // Runs fn atomically: all its writes land or none do. Nested calls join the outer one.
  virtual void transaction(const std::function<void()>& fn) = 0;
  // transaction(), except that the commit may still be on its way when it returns: wait for the
  // returned Confirm, or hand it what to do then, with the caller's own locks released, before
  // relying on the writes. Other transactions run meanwhile and are applied after it. For a
  // caller holding a lock others queue on (the Manager's agent path): its round trip to the
  // database no longer holds them, and a reply that waits with then() holds no thread either.
  // Inside another transaction it joins that one (confirmed by its commit).
  virtual Confirm transaction_sent(const std::function<void()>& fn) = 0;

  // --- instances ---------------------------------------------------------------------------
  // Inserts and returns the new id (record.id is ignored). deployment_id must be unique.
  virtual std::int64_t insert_instance(const core::InstanceRecord& record) = 0;
  // Replaces the row with record.id. Throws StoreError if it does not exist.
  virtual void update_instance(const core::InstanceRecord& record) = 0;
  // Writes only what agents report and what accrues with it: last_heartbeat_at, params_*,
  // prover_crashes, ooms, proofs_benchmark, proofs_production, gpu_util, peak_memory_gib,
  // plan_json, spend_usd, billed_until, gpu_throttled and bench_since. State, offer snapshot,
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

  // --- audit trail ---------------------------------------------------------------------------
  virtual std::int64_t append_event(const core::InstanceEvent& event) = 0;
  // Newest last; at most `limit` most recent (0 = all).
  virtual std::vector<core::InstanceEvent> events(std::int64_t instance_id, std::size_t limit) = 0;

  // --- agent logs (bounded per instance, kept across restarts) ---------------------------------
  // Appends a chunk of the instance's agent log, then drops its oldest chunks until what is
  // kept is at most `max_bytes` (a larger chunk keeps its newest bytes) and at most
  // kMaxAgentLogChunks chunks. The instance must exist.
  virtual void append_agent_log(std::int64_t instance_id, double at, std::string_view text,
                                std::size_t max_bytes) = 0;
  // What is kept of the instance's log, oldest first ("" when nothing).
  virtual std::string agent_log(std::int64_t instance_id) = 0;

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

  // --- settings (small key/value: operator token hash, autopilot pause, ...) -----------------
  virtual std::optional<std::string> setting(const std::string& key) = 0;
  virtual void put_setting(const std::string& key, const std::string& value) = 0;
  // The setting `key`, stored as `value` first when there is none. Callers racing on a new key
  // (replicas starting together) all get the one value that was stored. Not inside transaction().
  virtual std::string setting_or_put(const std::string& key, const std::string& value) = 0;

  // --- proof jobs (the gateway's queue, src/jobs) ---------------------------------------------
  // Inserts and returns the new id (job.id is ignored). (client, request_id) must be unique:
  // a request_id is its client's idempotency key.
  virtual std::int64_t insert_job(const core::Job& job) = 0;
  // Replaces the row with job.id (its proof bytes stay). Throws StoreError if it does not exist.
  virtual void update_job(const core::Job& job) = 0;
  virtual std::optional<core::Job> job(std::int64_t id) = 0;
  // The newest job with this request_id from any client (the operator's lookup).
  virtual std::optional<core::Job> job_by_request(const std::string& request_id) = 0;
  // The job `client` asked for with `request_id` (exactly that client; "" = rows recorded
  // before clients were).
  virtual std::optional<core::Job> client_job(const std::string& client,
                                              const std::string& request_id) = 0;
  // Queued, assigned and proving jobs, by id.
  virtual std::vector<core::Job> open_jobs() = 0;
  // Newest first (by id), at most `limit` (0 = all); `states` empty = every state. `before_id`
  // > 0: only jobs with a smaller id (the next page after a page that ended at that id).
  virtual std::vector<core::Job> jobs(const std::vector<core::JobState>& states, std::size_t limit,
                                      std::int64_t before_id = 0) = 0;
  // submitted_at of every job submitted at or after `since`.
  virtual std::vector<double> job_arrivals_since(double since) = 0;
  virtual std::map<core::JobState, std::int64_t> job_counts() = 0;
  // The proof bytes of a done job (kept with its row, so "done" and its proof land together).
  // nullopt: none stored, or removed by retention.
  virtual void put_job_proof(std::int64_t id, const std::string& proof) = 0;
  virtual std::optional<std::string> job_proof(std::int64_t id) = 0;
  // Removes the proofs of jobs finished (and delivered, if they were) before `before`; returns
  // how many.
  virtual int drop_job_proofs(double before) = 0;
  // Input digests some job still needs: open jobs, and finished ones whose last news (finish
  // or delivery) is at or after `since`.
  virtual std::vector<std::string> job_inputs_in_use(double since) = 0;
  // A heartbeat's lease renewal: sets lease_expires_at of those jobs that `instance_id` holds
  // (assigned or proving); returns how many rows changed.
  virtual int renew_job_leases(std::int64_t instance_id, const std::vector<std::int64_t>& job_ids,
                               double lease_expires_at) = 0;
  // Failed proofs in a row per instance (the job queue's strike rule): instances with a
  // running streak only. Putting 0 ends the streak (removes the row).
  virtual std::map<std::int64_t, int> job_failure_streaks() = 0;
  virtual void put_job_failure_streak(std::int64_t instance_id, int failures_in_a_row) = 0;

  // --- leader lease (replicas: core/leader_lease.h) -------------------------------------------
  // The lease row `name`; nullopt when none was ever written.
  virtual std::optional<core::LeaseRow> leader_lease(const std::string& name) = 0;
  // The same, read inside the caller's transaction so that no lease write commits before that
  // transaction ends (a fence: what it checks holds until its writes commit). PostgreSQL: FOR
  // SHARE, and the session is ended should it sit idle in the transaction past idle_limit_s (a
  // paused leader must not hold the lease row past its own term); SQLite's write transactions
  // exclude every other writer already.
  virtual std::optional<core::LeaseRow> lock_leader_lease(const std::string& name,
                                                          double idle_limit_s) = 0;
  // Compare-and-set of a take or renewal decided by core::decide_lease on the row `read`: writes
  // `row` only if the stored row still has read's holder, epoch and expiry (the empty row,
  // holder "", epoch 0, expiry 0, is created first when there is none; pass a default LeaseRow
  // for it). True when `row` was written.
  virtual bool write_leader_lease(const core::LeaseRow& row, const core::LeaseRow& read) = 0;
};

// Opens the store named by `url`: a file path or "sqlite:PATH" (":memory:" for tests), or
// "postgres://..." / "postgresql://...". Applies pending migrations. Throws StoreError with a
// clear message (never showing a password from the URL).
std::unique_ptr<Store> open_store(const std::string& url);

}  // namespace pf::store
