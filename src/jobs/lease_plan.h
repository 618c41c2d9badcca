// The queue's placement (core::plan_jobs), made once per state of the queue and the fleet and
// carried out lease by lease (design §11, issue 12: gateway_dispatch_per_s).
//
// Why: every agent long-polls for work, so a lease is the queue's most frequent call, and a plan
// over the whole queue × fleet costs far more than a lease. A plan is the one decision for the
// state it was made on: leasing a job it placed makes the queue match the plan (the plan already
// counted the job on that instance's lane), so the rest of the plan stands. Anything else that
// changes the state — a job submitted, requeued, finished, failed or cancelled (the queue's
// generation), or the fleet the hook reports (an instance accepted, closed, gone silent, heard
// again, a rate or a plan changed) — or the plan's age reaching max_age_s makes the next lease
// plan afresh. The age bound keeps "decided from the current state" true for what time alone
// changes (a held proof's expected end, a deadline coming closer).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "core/job_schedule.h"

namespace pf::jobs {

class LeasePlan {
 public:
  explicit LeasePlan(double max_age_s) : max_age_s_(max_age_s) {}

  // Whether the plan in hand was made for this queue generation and this fleet (as the hook
  // reported it: `held` is the queue's own count and not compared) less than max_age_s ago.
  bool current(std::uint64_t generation, const std::vector<core::WorkerView>& workers,
               double now) const;
  // Whether there is a plan in hand, made on another fleet than `workers`.
  bool fleet_changed(const std::vector<core::WorkerView>& workers) const;
  // Replaces the plan (core::plan_jobs's result for that generation, fleet and time).
  void remake(std::uint64_t generation, std::vector<core::WorkerView> workers, double now,
              const core::JobPlan& plan);
  // Up to max_jobs of the placements on `instance_id` not yet taken, in the plan's order; they
  // are removed from the plan (the caller leases them).
  std::vector<core::JobPlacement> take(std::int64_t instance_id, int max_jobs);
  // Placements on `instance_id` not yet taken.
  std::size_t pending(std::int64_t instance_id) const;
  // Drops the plan: the next lease plans afresh.
  void forget() { made_ = false; }
  // Plans made so far (for tests and the bench: how often the queue planned).
  std::uint64_t plans_made() const { return plans_made_; }

 private:
  double max_age_s_;
  bool made_ = false;
  std::uint64_t generation_ = 0;
  double made_at_ = 0;
  std::vector<core::WorkerView> workers_;
  std::map<std::int64_t, std::deque<core::JobPlacement>> by_instance_;
  std::uint64_t plans_made_ = 0;
};

}  // namespace pf::jobs
