// Where each queued job goes (design §11, issue 12 item 4). Pure: the manager's job queue and
// the policy simulator call it with their own view of the queue and the fleet, and neither
// re-implements it.
//
// Rule: jobs are taken in order (priority, then deadline, then arrival); each goes to the
// instance where it is expected to finish first. An instance works through the jobs ahead of
// a new one (those it holds plus those this call gave it) at its measured throughput — `slots`
// proofs every `seconds_per_proof` — so a job with L jobs ahead starts at once while L < slots,
// otherwise once L − slots + 1 slots have freed, and finishes one proof time later. Candidates
// are ranked by (avoided, late, expected finish):
//  - an instance in the job's avoid list (it failed the job, or made a proof the client
//    rejected) only when no other instance can take it;
//  - an instance that cannot finish the job before its deadline is not chosen while another
//    can;
//  - among the rest, the earliest expected finish.
// Only instances that have the job's kind's parameters (WorkerView::kinds) are candidates; a job
// no instance can prove waits, saying so.
// A job nobody can finish in time any more still goes to the earliest finisher (a late proof is
// better than none to the client, who decides); it is marked `late` so the shell can count it.
// But it comes after the jobs of its priority that can still be on time: in an overload, taking
// jobs strictly by deadline spends every slot on jobs that finish late anyway, and the jobs
// behind them then miss their deadlines too (measured in `sim` on scenario /2: hundreds of late
// proofs per run, every one of them unpaid, whenever capacity fell short of arrivals for an
// hour). Held back, it takes a slot that no on-time job wants.
//
// Leases never exceed slots: an agent holds at most its plan's proofs in flight, so only jobs
// whose chosen instance has a free slot are placed (leased). When the best instance is busy —
// it finishes the job earlier than every free one, even after the work it holds, by more than
// `hold_margin` — the job *waits for it*: it stays queued (nothing is reserved in the queue or
// leased), the free slower instances are not given it, and the plan counts it on the busy
// instance so that the jobs after it see that instance's real backlog. The next call (when a
// slot frees anywhere) decides again from the then current state, so a wrong estimate costs at
// most one decision: nothing stays bound to an instance that does not free up. Only a job that
// keeps its deadline (or one no free instance could keep anyway) waits; where waiting would
// turn an on-time job late it is placed on the free instance that keeps the deadline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/job.h"

namespace pf::core {

struct JobToPlace {
  std::int64_t job_id = 0;
  JobKind kind = JobKind::PorepC2;
  int priority = 0;
  double submitted_at = 0;
  double deadline_at = 0;  // epoch s; 0 = none
  std::vector<std::int64_t> avoid_instances;
};

struct WorkerView {
  std::int64_t instance_id = 0;
  double seconds_per_proof = 0;  // measured wall time of one proof at its plan (> 0)
  int slots = 1;                 // proofs it keeps in flight (its plan's concurrency)
  int held = 0;                  // jobs it holds now (assigned or proving)
  // Seconds until its held work is done, if the shell knows better than held × s/proof ÷ slots
  // (e.g. proofs already half way); < 0: estimate from held.
  double busy_s = -1;
  // The kinds it has the parameters for (core/proof_params.h): a job goes only to an instance
  // that can prove its kind.
  KindSet kinds = kFleetKinds;
};

struct JobPlacement {
  std::int64_t job_id = 0;
  std::int64_t instance_id = 0;
  double expected_finish_at = 0;  // epoch s
  bool late = false;              // expected after the job's deadline
  std::string reason;
};

// A job left in the queue on purpose: it is expected to finish first on a busy instance, or no
// instance can take it. What the plan saw is kept as numbers and put into words only when asked
// (reason()): a plan over a long queue has a wait per job and is remade on every change, while
// the words are read only when someone looks.
struct JobWait {
  enum class Cause {
    NoRatedInstance,  // no instance has a measured rate yet
    NoParameters,     // none has the parameters for the job's kind
    NoFreeSlot,       // every instance that can take it is busy
    BusyIsBetter,     // a busy instance finishes it clearly before the best free one
  };
  std::int64_t job_id = 0;
  std::int64_t instance_id = 0;   // the busy instance it waits for; 0: no instance can take it
  double expected_finish_at = 0;  // epoch s, on that instance (0 when none)
  bool late = false;
  Cause cause = Cause::NoRatedInstance;
  JobKind kind = JobKind::PorepC2;
  double planned_at = 0;              // the plan's `now`
  bool avoided = false;               // the instance it waits for failed it (no other can take it)
  std::int64_t free_instance_id = 0;  // BusyIsBetter: the best free instance
  double free_finish_at = 0;          // ... when it would finish the job
  bool free_late = false;             // ... after the job's deadline

  std::string reason() const;
};

struct JobPlan {
  std::vector<JobPlacement> placements;  // lease these now (each to a free slot)
  std::vector<JobWait> waits;            // the rest, in the order they were considered
};

struct PlacementConfig {
  // A busy instance is waited for only when it finishes the job at least this share of the
  // best free instance's time-to-finish earlier (estimates are rough: a small expected gain
  // does not justify leaving a free machine idle).
  double hold_margin = 0.2;
};

// The whole plan: placements for free slots and why the other jobs wait.
JobPlan plan_jobs(double now, const std::vector<JobToPlace>& queued,
                  const std::vector<WorkerView>& workers, const PlacementConfig& config = {});

// The placements of plan_jobs: what to lease now. An instance takes at most `slots` jobs in total
// (held + placed); work beyond its slots stays in the queue.
std::vector<JobPlacement> place_jobs(double now, const std::vector<JobToPlace>& queued,
                                     const std::vector<WorkerView>& workers,
                                     const PlacementConfig& config = {});

}  // namespace pf::core
