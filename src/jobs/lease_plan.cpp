#include "jobs/lease_plan.h"

#include <algorithm>

namespace pf::jobs {
namespace {

// The fleet as the hook describes it; `held` is filled in by the queue from its own jobs.
bool same_worker(const core::WorkerView& a, const core::WorkerView& b) {
  return a.instance_id == b.instance_id && a.seconds_per_proof == b.seconds_per_proof &&
         a.slots == b.slots && a.busy_s == b.busy_s;
}

}  // namespace

bool LeasePlan::current(std::uint64_t generation, const std::vector<core::WorkerView>& workers,
                        double now) const {
  // `now < made_at_`: the clock stepped back; a plan from "the future" is not trusted either.
  if (!made_ || generation != generation_ || now < made_at_ || now - made_at_ >= max_age_s_) {
    return false;
  }
  return !fleet_changed(workers);
}

bool LeasePlan::fleet_changed(const std::vector<core::WorkerView>& workers) const {
  return made_ &&
         !std::equal(workers.begin(), workers.end(), workers_.begin(), workers_.end(), same_worker);
}

void LeasePlan::remake(std::uint64_t generation, std::vector<core::WorkerView> workers, double now,
                       const core::JobPlan& plan) {
  made_ = true;
  generation_ = generation;
  made_at_ = now;
  workers_ = std::move(workers);
  by_instance_.clear();
  for (const auto& p : plan.placements) by_instance_[p.instance_id].push_back(p);
  ++plans_made_;
}

std::vector<core::JobPlacement> LeasePlan::take(std::int64_t instance_id, int max_jobs) {
  std::vector<core::JobPlacement> out;
  const auto it = by_instance_.find(instance_id);
  if (it == by_instance_.end()) return out;
  auto& mine = it->second;
  while (!mine.empty() && static_cast<int>(out.size()) < max_jobs) {
    out.push_back(std::move(mine.front()));
    mine.pop_front();
  }
  if (mine.empty()) by_instance_.erase(it);
  return out;
}

std::size_t LeasePlan::pending(std::int64_t instance_id) const {
  const auto it = by_instance_.find(instance_id);
  return it == by_instance_.end() ? 0 : it->second.size();
}

}  // namespace pf::jobs
