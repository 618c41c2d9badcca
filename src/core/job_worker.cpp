#include "core/job_worker.h"

#include <algorithm>

namespace pf::core {

std::optional<WorkerView> job_worker(const InstanceRecord& rec, int plan_slots, double now,
                                     double heard_within_s) {
  if (!heard_for_jobs(rec.last_heartbeat_at, now, heard_within_s)) return std::nullopt;
  return job_worker_if_heard(rec, plan_slots);
}

bool heard_for_jobs(double last_heard_at, double now, double heard_within_s) {
  return last_heard_at >= now - heard_within_s;
}

std::optional<WorkerView> job_worker_if_heard(const InstanceRecord& rec, int plan_slots) {
  if (rec.state != InstanceState::Proving) return std::nullopt;
  // The market stopped it (core/market_stop.h): its agent proves nothing until it resumes.
  if (rec.market_status == "stopped") return std::nullopt;
  if (!rec.verdict || !(rec.verdict->rate > 0)) return std::nullopt;
  WorkerView w;
  w.instance_id = rec.id;
  w.slots = std::max(1, plan_slots);
  // The verdict's rate is the instance's throughput with `slots` proofs in flight; one proof's
  // wall time (what WorkerView asks for) is that many intervals.
  w.seconds_per_proof = w.slots * 3600 / rec.verdict->rate;
  return w;
}

}  // namespace pf::core
