// Which instances take proof jobs, and how fast the placement rule (core/job_schedule.h)
// should expect them to be (issue 12 item 3): only accepted instances (state proving: not
// benchmarking, not closing), at the rate their acceptance measured.
#pragma once

#include <optional>

#include "core/fleet.h"
#include "core/job_schedule.h"

namespace pf::core {

// The market holding it stopped (market_status "stopped") takes it out too.
// `plan_slots`: the proofs its prover plan keeps in flight (< 1 counts as 1). seconds_per_proof
// is one proof's wall time: slots × 3600 / the measured proofs per hour. nullopt: the instance
// takes no jobs (not proving, no measured rate to place work by, or its agent not heard within
// `heard_within_s` of `now`: a job placed on a silent agent would wait there, unleased, until
// the silence closed the instance minutes later).
std::optional<WorkerView> job_worker(const InstanceRecord& rec, int plan_slots, double now,
                                     double heard_within_s);

// The two halves of job_worker, for a shell that keeps the rows between reads and follows
// heartbeats itself (manager/job_worker_roster.h): what the row decides (state and rate) ...
std::optional<WorkerView> job_worker_if_heard(const InstanceRecord& rec, int plan_slots);
// ... and whether an agent last heard at `last_heard_at` is heard enough at `now`.
bool heard_for_jobs(double last_heard_at, double now, double heard_within_s);

}  // namespace pf::core
