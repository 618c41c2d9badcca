// The simulator's job queue on scenario /2: where the jobs wait and which instance gets which,
// decided as the manager's job queue decides it (jobs::JobQueue::lease): an agent with a free
// slot asks; core::place_jobs plans every queued job (priority, deadline, arrival, avoid list)
// over every worker (core::job_worker: measured seconds per proof, slots) with the jobs each
// holds counted here; the asker takes the jobs the plan puts on it, and nothing else. A job the
// plan keeps for a busy, clearly faster instance waits for it, as in the manager.
//
// What the simulator adds, and why: its clients leave at their deadline (a late job earns
// nothing), so a job still queued then is dropped (`expire`), as a client cancelling it would
// drop it from the manager's queue. tests/unit/job_dispatch_parity_test.cpp drives one scripted
// sequence through this and through a real JobQueue and expects the same assignments.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "core/job_hedge.h"
#include "core/job_schedule.h"

namespace pf::sim {

class JobDispatch {
 public:
  // A job arrived (ids ascending in arrival order; times epoch s; deadline_at 0 = none).
  void arrive(std::int64_t job_id, double submitted_at, double deadline_at);

  // Queued jobs whose deadline is at or before `now` leave unserved; returns their ids.
  std::vector<std::int64_t> expire(double now);

  // `instance_id` asks for up to `max_jobs` jobs: core::place_jobs over the queue and
  // `workers` (their `held` is filled here), and the placements on the asker are leased to it,
  // in plan order. Nothing when the asker is not among `workers`. When the plan gives it
  // nothing, `hedging` (core::plan_hedges, as jobs::JobQueue::lease does) may give it copies of
  // held jobs whose proofs are at risk (hedger() names them).
  std::vector<std::int64_t> lease(std::int64_t instance_id, int max_jobs, double now,
                                  std::vector<core::WorkerView> workers,
                                  const core::HedgeConfig& hedging = core::kHedgingOff);
  // The agent was heard (a heartbeat): every lease it holds is renewed now.
  void renew(std::int64_t instance_id, double now);

  // A job the instance holds is finished (delivered, late or not). Hedged: the other prover's
  // copy is stopped too, and its instance returned (the engine stops that proof).
  std::optional<std::int64_t> done(std::int64_t instance_id, std::int64_t job_id);

  // The instance stopped proving (crash, offline, OOM, closed): its jobs go back to the queue,
  // but for a hedged one, which stays with its other prover.
  void release(std::int64_t instance_id);

  // Hedged proving (core/job_hedge.h): a hedged job is held by both provers until one finishes
  // it (done) or stops (release). The instance running the second copy, if any.
  std::optional<std::int64_t> hedger(std::int64_t job_id) const;
  bool hedged(std::int64_t job_id) const { return hedges_.count(job_id) > 0; }
  // `workers` with `held` set to the jobs each holds (hedge copies included), as lease sees them.
  std::vector<core::WorkerView> with_held(std::vector<core::WorkerView> workers) const;

  int queued() const { return static_cast<int>(queued_.size()); }
  int in_flight() const;
  // deadline_at of each queued job (epoch s), ascending by job id.
  std::vector<double> queued_deadlines() const;

 private:
  struct Job {
    double submitted_at = 0;
    double deadline_at = 0;
    double leased_at = 0;   // held: when this copy was leased (its proof's start, in the sim)
    double renewed_at = 0;  // held: its holder last heard
  };
  std::map<std::int64_t, Job> queued_;                                    // by job id
  std::map<std::int64_t, std::map<std::int64_t, Job>> held_;              // instance → its jobs
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> hedges_;  // job → its 2 provers
  // The last plan, reused while nothing it was made from changed: idle instances asking one
  // after another, none of them given a job, all read the same plan (a lease recomputes it).
  std::uint64_t generation_ = 0;  // bumped by every change of queued_ or held_
  struct Plan {
    std::uint64_t generation = 0;
    double now = 0;
    std::vector<core::WorkerView> workers;
    std::vector<core::JobPlacement> placements;
  };
  std::optional<Plan> plan_;

  // Drops `job_id` from what `instance_id` holds; whether it held it.
  bool drop_held(std::int64_t instance_id, std::int64_t job_id);
  // The hedges core::plan_hedges starts on `instance_id` now, leased to it (up to max_jobs).
  std::vector<std::int64_t> lease_hedges(std::int64_t instance_id, int max_jobs, double now,
                                         const std::vector<core::WorkerView>& workers,
                                         const core::HedgeConfig& hedging);
};

}  // namespace pf::sim
