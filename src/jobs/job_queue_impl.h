// JobQueue's state, shared by its two source files (job_queue.cpp: clients and the manager;
// job_queue_agents.cpp: leases and results). Not part of the interface.
//
// Locking: `mu` guards everything here and is held across each store write, so the in-memory
// view of open jobs and the store never disagree. Hooks (which call into the Manager, itself
// calling the queue under its own lock) run only after `mu` is released: every method gathers
// them in an Effects and runs it last. Order: mu → the store's lock.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "jobs/input_store.h"
#include "jobs/job_queue.h"
#include "jobs/lease_plan.h"

namespace pf::jobs {

// Hook calls gathered under the lock, run after it.
struct Effects {
  std::vector<std::pair<std::int64_t, std::string>> events;
  std::vector<std::pair<std::int64_t, core::Strike>> strikes;
  void run(const JobQueueHooks& hooks) const;
};

inline JobError job_error(JobError::Code code, std::string message) {
  return JobError{code, std::move(message)};
}

// A plan is made again at least this often even when nothing changed (lease_plan.h): held
// proofs' expected ends and deadlines move with time. The long-poll's own recheck period.
constexpr double kPlanMaxAgeS = 2;

// "job 12 (request r-1)": how events and errors name a job.
std::string describe(const core::Job& job);

// A step of `job`'s timeline at `at`: its current attempt, on the instance it names.
core::JobEvent timeline_event(const core::Job& job, core::JobEventKind kind, double at,
                              std::string detail);

struct JobQueue::Impl {
  Impl(store::Store& store_in, JobQueueConfig config_in, JobQueueHooks hooks_in, Clock clock_in);

  store::Store& store;
  const JobQueueConfig config;
  const JobQueueHooks hooks;
  const Clock clock;
  InputStore inputs;

  std::mutex mu;
  std::condition_variable finished_cv;  // a job reached a terminal state (await)
  std::condition_variable work_cv;      // jobs became placeable or slots freed (lease)
  // Bumped with every work_cv notification: every change of the queued or leased jobs other
  // than a lease the current plan made (submit, requeue, finish, fail, cancel, close, expiry).
  std::uint64_t work_generation = 0;
  // Hedge copies started, and won (their proof came first), since this queue was opened.
  std::int64_t hedges_started = 0, hedges_won = 0;
  // The placement of the current generation and fleet, consumed by leases (lease_plan.h).
  LeasePlan plan{kPlanMaxAgeS};
  bool stopping = false;
  // Queued, assigned and proving jobs: a write-through copy of their rows (lease renewals
  // included, so a restart knows each lease's expiry).
  std::map<std::int64_t, core::Job> open;
  // Failed proofs in a row per instance (any job); reset by a proof. Write-through copy of the
  // store's job_failure_streaks: a restart forgives no streak.
  std::map<std::int64_t, int> host_failures_in_a_row;
  double next_sweep_at = 0;
  double alive_written_at = 0;  // when tick() last recorded the queue alive
  double observed_since = 0;
  // When this queue opened: an agent is not called silent for the time the manager itself was
  // down (its renewals could not arrive), so no hedge starts for that.
  double opened_at = 0;

  // Instances closed, whose jobs are not yet back in the queue. return_jobs_of() is called by
  // the Manager under its own lock and at times inside a store transaction (holding the
  // store's lock): it must never wait for `mu`, whose holders wait for the store. So it only
  // records the close here (closed_mu is never held while taking another lock) and applies it
  // at once if `mu` is free; otherwise the holder of `mu`, or the next caller, applies it.
  std::mutex closed_mu;
  std::vector<std::pair<std::int64_t, std::string>> closed_pending;
  // Applies closed_pending (caller holds mu). A store failure leaves the rest pending.
  void drain_closed(Effects& effects);
  // Hook calls gathered by a caller that had none to run (see enter()).
  Effects deferred;
  // Every method calls this first under mu: applies pending closes; hands the hook calls
  // gathered so far to `effects` (the caller runs them after releasing mu), or keeps them for
  // the next caller that has an Effects when `effects` is null.
  void enter(Effects* effects);

  // Writes the jobs' rows, their timeline's new events (core/job_event.h) and whatever `also`
  // writes in one transaction, then updates `open` to match (caller holds mu). Throws
  // StoreError, with `open` unchanged.
  void commit(const std::vector<core::Job>& jobs, const std::vector<core::JobEvent>& events = {},
              const std::function<void()>& also = {});
  // Runs `write` in one transaction after the fence hook (JobQueueHooks::fence), if any.
  void fenced(const std::function<void()>& write);
  // A leased job back to queued (not a failure): lost lease, closed instance.
  static void requeue(core::Job& job);
  // Hedged proving: the hedge's copy ends (the job stays with its holder) ...
  static void drop_hedge(core::Job& job);
  // ... or the holder's does, and the hedge holds the job alone from now on.
  static void promote_hedge(core::Job& job);
  // The hedges core::plan_hedges starts now on `instance_id` (up to max_jobs), given the fleet's
  // `workers` as the hook reports them (caller holds mu).
  std::vector<core::Hedge> hedges_for(std::int64_t instance_id, int max_jobs,
                                      const std::vector<core::WorkerView>& workers, double now);
  // Jobs each instance holds, hedge copies included (caller holds mu).
  std::map<std::int64_t, int> held_counts() const;
  // Wakes lease waiters (caller holds mu).
  void wake_workers();
  // Up to max_jobs placements on `instance_id` from the current plan, planning first when
  // the plan in hand was made for another generation or fleet (`workers`, from the hook) or
  // kPlanMaxAgeS ago (caller holds mu). The caller leases them.
  std::vector<core::JobPlacement> placements_for(std::int64_t instance_id, int max_jobs,
                                                 std::vector<core::WorkerView> workers, double now);
  // Finds an open job or the stored row (caller holds mu). Throws StoreError.
  std::optional<core::Job> find(std::int64_t job_id);
  // Why `instance_id` may not act on attempt `attempt` of `job`, or nullopt if it holds it.
  static std::optional<std::string> not_held(const core::Job& job, std::int64_t instance_id,
                                             int attempt);
};

}  // namespace pf::jobs
