// The gateway's proof jobs (src/jobs): rows, proofs, leases and failure streaks. Part of the
// Store (store.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/job.h"
#include "core/job_event.h"
#include "core/money_ledger.h"
#include "store/transactions.h"

namespace pf::store {

// Which jobs a listing returns (the operator's filters: GET /api/v1/jobs). Every field left at
// its default matches every job; set fields must all match.
struct JobFilter {
  std::vector<core::JobState> states;  // any of these
  std::vector<core::JobKind> kinds;    // any of these
  std::optional<std::string> client;   // exactly this client
  // Jobs this instance held on any try (its timeline's leases, or the job's last holder).
  std::optional<std::int64_t> instance_id;
  // Jobs any rental of this machine held on any try (vast.ai's machine_id).
  std::optional<std::int64_t> machine_id;
  std::string request_id_prefix;          // request ids starting with this ("" = any)
  std::optional<double> submitted_since;  // submitted_at >= since (epoch s)
  std::optional<double> submitted_until;  // submitted_at < until
  // Late at `now` as core::job_timeliness judges it: delivered after the deadline, or not
  // delivered (open, or done and waiting for its client) with the deadline past.
  bool late = false;
  // At risk at `now` as core::is_at_risk judges it with this typical submission-to-proof time:
  // queued, the deadline still ahead but nearer than that.
  std::optional<double> at_risk_typical_s;
  double now = 0;  // for `late` and `at_risk_typical_s`

  // Jobs in these states, whatever else they are.
  static JobFilter in_states(std::vector<core::JobState> states) {
    JobFilter filter;
    filter.states = std::move(states);
    return filter;
  }
};

class JobStore : public virtual Transactions {
 public:
  ~JobStore() override = default;

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
  // Newest first (by id), at most `limit` (0 = all), those `filter` matches. `before_id` > 0:
  // only jobs with a smaller id (the next page after a page that ended at that id).
  virtual std::vector<core::Job> jobs(const JobFilter& filter, std::size_t limit,
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

  // Done jobs delivered in [since, until], counted by bucket of `bucket_s` seconds from `since`,
  // holder, kind and whether they were on time: core::count_deliveries over every such job,
  // computed by the database (the money page's ledger over days of jobs).
  virtual std::vector<core::DeliveryCount> delivery_counts(double since, double until,
                                                           double bucket_s) = 0;

  // --- job timelines (core/job_event.h) -----------------------------------------------------
  // Appends in order; a detail longer than core::kMaxJobEventDetailBytes keeps its start.
  virtual void add_job_events(const std::vector<core::JobEvent>& events) = 0;
  // The job's newest `limit` events (0 = all), oldest first.
  virtual std::vector<core::JobEvent> job_events(std::int64_t job_id, std::size_t limit) = 0;
  // Removes timeline steps recorded before `before` (the retention sweep: a job ends hours after
  // its first step, so a timeline older than the retention goes whole); returns how many.
  virtual int drop_job_events(double before) = 0;
};

}  // namespace pf::store
