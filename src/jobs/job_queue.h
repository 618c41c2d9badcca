// The gateway's job queue (design §11): every proof request the fleet acknowledged, durable
// before it is acknowledged, leased to instances, answered exactly once per request_id.
//
// Callers: the gRPC gateway (submit/await/cancel/status), the agent HTTP API (lease, input,
// result, renew from heartbeats), the operator API and CLI (list), the Manager (an instance
// closed; tick). Thread-safe: every method may be called from any thread; await and lease block
// without holding the queue's lock.
//
// Guarantees:
//  - submit stores the input in the database (content-addressed chunks, then the header that
//    makes it whole: jobs/input_store.h) and then the row in one store transaction before it
//    returns; a crash in between leaves at most an input no job names, which the retention
//    sweep removes. Nothing half-written is visible. Any replica reads any input.
//  - (client, request_id) is the idempotency key: a request_id that is queued or running joins the
//    existing job of that client; one whose proof was delivered means the client rejected that
//    proof: the job opens a new attempt on another instance and the instance that made it gets a
//    strike.
//  - only the holder of a job's current attempt completes it; a late or duplicate result is
//    acknowledged and ignored. Hedged proving (core/job_hedge.h) gives the current attempt a
//    second holder while the first one's proof is at risk (overdue, or its agent silent): the
//    first valid proof finishes the job and the other copy is dropped at its next heartbeat; a
//    copy that fails, is closed or is not renewed leaves the other holding the job.
//  - a lease not renewed (the agent names its jobs on every heartbeat) for lease_s returns the
//    job to the queue; an instance closed returns its jobs at once. Renewals and each
//    instance's run of failed proofs are stored: a restart forgets neither (the manager's
//    downtime is not held against a lease: core/job_lease.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "core/blocklist.h"
#include "core/job.h"
#include "core/job_event.h"
#include "core/job_hedge.h"
#include "core/job_schedule.h"
#include "jobs/proof_check.h"
#include "store/confirm.h"
#include "store/job_store.h"

namespace pf::jobs {

struct JobError {
  enum class Code {
    InvalidArgument,     // a field is wrong (message names it)
    ResourceExhausted,   // input over max_input_bytes, or the queue is full
    NotFound,            // no such job
    FailedPrecondition,  // e.g. a result for an attempt the caller does not hold
    AlreadyExists,       // the request_id is an open job of this client with another input
    Unavailable,         // shutting down, or the store failed (retry later)
  };
  Code code = Code::InvalidArgument;
  std::string message;
};
template <typename T>
using JobResult = tl::expected<T, JobError>;

struct JobQueueConfig {
  // Inputs lived under <data_dir>/job-inputs before schema 18 (import_input_files moves them
  // into the store); serve's takeover socket lives here too.
  std::string data_dir;
  std::int64_t max_input_bytes = 256LL * 1024 * 1024;
  int max_open_jobs = 10000;         // queued + leased; beyond: ResourceExhausted
  double default_deadline_s = 1800;  // a client's ProveTimeout (Curio: 30 min)
  double lease_s = 60;               // a lease nobody renews returns to the queue after this long
  int max_attempts = 3;              // failed proofs (not lost leases) before the job fails
  int strike_after_failures = 2;     // failed proofs on one host (any job) in a row → strike
  double retention_s = 24 * 3600;    // inputs and proofs of finished jobs kept this long
  // Job timelines (core/job_event.h) kept this long after their steps; 0 = for ever.
  double timeline_retention_s = 90 * 86400;
  // What a reported proof must be before it is accepted (jobs/proof_check.h); serve sets it
  // from [jobs] proof_check (default groth16).
  ProofCheck proof_check = ProofCheck::None;
  // Hedged proving (core/job_hedge.h): an agent asking for work that the plan gives nothing
  // may be given a copy of a held job whose proof is at risk; serve sets it from [jobs] hedge*.
  core::HedgeConfig hedging;
};

struct SubmitRequest {
  std::string request_id;  // non-empty, ≤ 256 printable bytes
  core::JobKind kind = core::JobKind::PorepC2;
  int priority = 0;
  std::string input;  // the client's SubmitProofRequest, serialized, request_id cleared
  std::optional<double> deadline_s;  // from now; nullopt: default_deadline_s
  // Who asks (the gateway's client identity: gateway/relay_identity.h). Request ids are per
  // client: the same request_id from another client is another job. ≤ 256 bytes.
  std::string client;
};

struct Submitted {
  core::Job job;
  bool joined = false;  // an existing open job with this request_id
  bool redo = false;    // the request came back after delivery: a new attempt was opened
};

struct Finished {
  core::Job job;      // state Done, Failed or Cancelled
  std::string proof;  // Done: the proof bytes
};

struct KindCounts {
  int pending = 0;      // queued (censored for backpressure: see status())
  int in_progress = 0;  // assigned or proving
};
struct QueueStatus {
  std::map<core::JobKind, KindCounts> by_kind;
  std::int64_t completed = 0, failed = 0, cancelled = 0;  // since the store began
  int free_slots = 0;                                     // fleet slots not holding a job now
  // Hedged proving since this queue was opened (this process's term as leader): copies of a
  // job at risk started on a second instance, and those whose proof came first.
  std::int64_t hedges_started = 0, hedges_won = 0;
};

struct Lease {
  core::Job job;  // id, attempts (the attempt to present), kind, input digest/bytes, deadline
  double lease_s = 0;
};

struct InputChunk {
  std::string bytes;
  std::int64_t offset = 0;
  std::int64_t total = 0;
  std::string digest;  // SHA-256 hex of the whole input
};

struct ProofReport {
  std::int64_t job_id = 0;
  int attempt = 0;
  bool ok = false;
  std::string proof;    // ok
  std::string message;  // !ok: why
  bool oom = false;     // !ok: the prover died for memory (not the job's fault)
  double prove_ms = 0, gpu_ms = 0, queue_ms = 0;
};
struct ReportAck {
  bool applied = false;  // false: late or duplicate, ignored
  std::string reason;
};

// What the queue needs from the rest of the manager.
struct JobQueueHooks {
  // Instances that may take jobs now (accepted and proving, not closing), with their measured
  // seconds per proof and slots. The queue adds its own count of held jobs.
  std::function<std::vector<core::WorkerView>()> workers;
  // Blame for a host (failed proofs in a row, a proof the client rejected).
  std::function<void(std::int64_t instance_id, const core::Strike& strike)> strike;
  // Audit trail: an event on the instance's row ("job" type).
  std::function<void(std::int64_t instance_id, const std::string& message)> event;
  // Replicas (issue 14): throws store::StoreError when this queue may no longer write jobs (the
  // replica's term as leader ended). Called inside every transaction that changes a job, so a
  // paused ex-leader's queue cannot lease, finish or requeue what the new leader's queue owns.
  // Empty: a lone manager.
  std::function<void()> fence = {};
};

class JobQueue {
 public:
  using Clock = std::function<double()>;  // epoch seconds
  JobQueue(store::Store& store, JobQueueConfig config, JobQueueHooks hooks, Clock clock);
  ~JobQueue();
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;

  // --- clients (the gateway) ------------------------------------------------------------------
  JobResult<Submitted> submit(const SubmitRequest& request);
  // Blocks until the job is finished, `timeout` passes (nullopt then) or shutdown() (Unavailable).
  // A Done result returned here counts as delivered.
  JobResult<std::optional<Finished>> await(std::int64_t job_id, std::chrono::milliseconds timeout);
  // The Done result `await` just returned could not reach its client (it left while the proof
  // arrived): the job no longer counts as delivered, so the client's return with the same
  // request_id is a retry that gets the stored proof, not a rejection that blames the host.
  JobResult<void> undeliver(std::int64_t job_id);
  // Cancels a queued or leased job; returns whether it was running (leased). Finished: NotFound
  // is not returned, the job is left as it is and `false` comes back.
  JobResult<bool> cancel(std::int64_t job_id);
  // Per-kind counts for cuzk's GetStatus. Curio stops sending while Σ(pending + in_progress) ≥
  // its MaxPending: pending reports only the backlog beyond free fleet slots, so Curio keeps
  // feeding free machines (design §11).
  QueueStatus status();
  std::optional<core::Job> job(std::int64_t job_id);
  // The newest job with this request_id, from any client (the operator's lookup).
  std::optional<core::Job> job_by_request(const std::string& request_id);
  // The job `client` asked for with `request_id` (a job recorded before clients were, schema <
  // 12, is any client's). What the gateway's AwaitProof and CancelProof act on.
  std::optional<core::Job> client_job(const std::string& client, const std::string& request_id);
  // Submission times (epoch s) of jobs submitted at or after `since`, any order: the arrivals
  // the demand estimate (core/demand_estimate.h) reads. And when this queue's record begins (the
  // first job ever submitted, or when the queue was first opened on this store).
  std::vector<double> arrivals_since(double since);
  double observed_since();
  // Newest first, those `filter` matches; `before_id` > 0: only older jobs (the next page).
  std::vector<core::Job> list(const store::JobFilter& filter, std::size_t limit,
                              std::int64_t before_id = 0);
  // The job's timeline (core/job_event.h): its newest `limit` steps (0 = all), oldest first.
  std::vector<core::JobEvent> timeline(std::int64_t job_id, std::size_t limit);

  // --- agents -------------------------------------------------------------------------------
  // Long-poll: up to `max_jobs` jobs placed on this instance (core::plan_jobs), waiting up to
  // `wait` for one. Each is leased (state assigned) before it is returned. The placement is
  // made once per state of the queue and the fleet and carried out lease by lease: see
  // jobs/lease_plan.h for what makes the next lease plan again. `caller_gone` (optional): whether
  // the request asking has been hung up on; checked before each placement is leased, so a job
  // is not handed to an agent that died while it waited (it would sit out its lease first).
  JobResult<std::vector<Lease>> lease(std::int64_t instance_id, int max_jobs,
                                      std::chrono::milliseconds wait,
                                      const std::function<bool()>& caller_gone = {});
  // Placements made so far (core::plan_jobs over the whole queue and fleet): a lease carries out
  // the plan in hand while nothing else changed (jobs/lease_plan.h). For tests and the bench.
  std::uint64_t plans_made();
  // A byte range of the input of a job the instance holds (resumable download).
  JobResult<InputChunk> read_input(std::int64_t instance_id, std::int64_t job_id, int attempt,
                                   std::int64_t offset, std::int64_t max_bytes);
  // The agent started proving it (assigned → proving).
  JobResult<ReportAck> started(std::int64_t instance_id, std::int64_t job_id, int attempt);
  JobResult<ReportAck> report(std::int64_t instance_id, const ProofReport& report);
  // Heartbeat: the (job, attempt) pairs the agent holds. Renews their leases; returns the ids
  // the agent should drop (cancelled, re-leased elsewhere, finished).
  std::vector<std::int64_t> renew(std::int64_t instance_id,
                                  const std::vector<std::pair<std::int64_t, int>>& held);

  // --- manager ------------------------------------------------------------------------------
  // The instance will not finish its jobs (it is closing or gone, or the market stopped it):
  // they return to the queue now, with no strike; `why` ends the event that lists them.
  void return_jobs_of(std::int64_t instance_id, const std::string& why);
  // Expired leases back to the queue, retention sweep, placement of queued jobs.
  void tick();
  // Wakes every waiter (await, lease) with Unavailable; later calls fail the same way.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pf::jobs
