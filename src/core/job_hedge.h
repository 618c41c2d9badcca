// Hedged proving (issue 26 item 4). Pure: the shells' job queues (the policy simulator's
// sim/des_dispatch.h today) call it with their own view of the held jobs and the fleet, and
// neither re-implements it.
//
// A job is held by one prover (its lease). Its proof is *at risk* when its prover is
//  - silent: its agent not heard for `silent_after_s` while the lease still runs (the lease
//    returns the job only after lease_s; a host gone dark holds it until then), or
//  - overdue: the proof has run `overdue_factor` times its prover's measured time per proof and
//    at least `overdue_min_s` more (a throttled GPU, a prover that hangs while its agent still
//    heartbeats and renews the lease: cuzk's own timeout is Curio's 30 minutes, the job's
//    whole deadline).
// A job at risk is started on a second prover — a hedge — when one has a slot no queued job was
// given and can still finish it before the job's deadline; the first valid proof wins and the
// shell stops the other. Hedges use only spare slots (the shells plan queued jobs first), so a
// hedge costs an otherwise idle slot for up to one proof and the input's transfer, never a
// queued job's place. One hedge per job; jobs by deadline (earliest first), each to the spare
// slot that finishes it first; a job without a deadline comes last. A market-stopped or closed
// prover is not hedged: its jobs return to the queue at once (core/market_stop.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/job_schedule.h"

namespace pf::core {

struct HedgeConfig {
  bool enabled = true;
  double overdue_factor = 1.5;  // × the holder's measured seconds per proof ...
  double overdue_min_s = 120;   // ... and at least this much beyond one proof time
  double silent_after_s = 30;   // the holder's agent not heard this long (3 heartbeats)
};

// Hedging off: for the shells' policies that do not hedge (the simulator's classic and
// clairvoyant) and `[jobs] hedge = false`.
inline const HedgeConfig kHedgingOff = [] {
  HedgeConfig c;
  c.enabled = false;
  return c;
}();

struct HeldJob {
  std::int64_t job_id = 0;
  JobKind kind = JobKind::PorepC2;
  std::int64_t holder = 0;                    // the instance whose lease it is
  double started_at = 0;                      // when the holder began its proof (else its lease)
  double deadline_at = 0;                     // epoch s; 0 = none
  double holder_seconds_per_proof = 0;        // measured; 0 = unknown (never overdue)
  double holder_heard_at = 0;                 // the holder's agent, last heard (epoch s)
  bool hedged = false;                        // already running on a second prover
  std::vector<std::int64_t> avoid_instances;  // failed it, or made a proof the client rejected
};

struct Hedge {
  enum class Cause { Silent, Overdue };
  std::int64_t job_id = 0;
  std::int64_t holder = 0;
  std::int64_t instance_id = 0;   // the second prover
  double expected_finish_at = 0;  // epoch s, there
  Cause cause = Cause::Overdue;
  std::string reason;
};

// Whether `job`'s proof is at risk at `now` (and why), by the rules above.
std::optional<Hedge::Cause> proof_at_risk(double now, const HeldJob& job,
                                          const HedgeConfig& config);

// The hedges to start now. `workers`: the fleet's workers with `held` counting every job they
// hold (the shells' placement already made: a worker with held < slots has spare slots).
std::vector<Hedge> plan_hedges(double now, const std::vector<HeldJob>& held,
                               const std::vector<WorkerView>& workers, const HedgeConfig& config);

// The hedges plan_hedges puts on `instance_id`, the agent asking now (at most max_jobs, in plan
// order): what both shells' queues lease to it.
std::vector<Hedge> hedges_for(std::int64_t instance_id, int max_jobs, double now,
                              const std::vector<HeldJob>& held,
                              const std::vector<WorkerView>& workers, const HedgeConfig& config);

}  // namespace pf::core
